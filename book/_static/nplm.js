// nplm-edu: long lines of code and output wrap at the column's edge (nplm.css); here each line of a
// highlighted block becomes its own span, so that a wrapped line continues indented under itself
// (a hanging indent) instead of at the left margin, where it would look like a new line of code.
// The text is unchanged: copying a block copies the same characters.
(function () {
  "use strict";
  var HANG = 4; // characters of extra indent for the continuation of a wrapped line

  function lines(pre) {
    var out = [[]];
    Array.prototype.forEach.call(pre.childNodes, function (node) {
      var text = node.textContent;
      if (text.indexOf("\n") < 0) { out[out.length - 1].push(node); return; }
      text.split("\n").forEach(function (part, k) {
        if (k > 0) out.push([]);
        if (!part) return;
        var piece;
        if (node.nodeType === Node.TEXT_NODE) {
          piece = document.createTextNode(part);
        } else {
          piece = node.cloneNode(false);
          piece.textContent = part;
        }
        out[out.length - 1].push(piece);
      });
    });
    return out;
  }

  function hang(pre) {
    if (pre.dataset.nplmLines) return;
    var text = pre.textContent;
    var parts = lines(pre);
    if (parts.length > 0 && parts[parts.length - 1].length === 0 && text.endsWith("\n")) parts.pop();
    var frag = document.createDocumentFragment();
    parts.forEach(function (nodes, k) {
      var span = document.createElement("span");
      span.className = "nplm-line";
      var first = nodes.map(function (n) { return n.textContent; }).join("");
      var indent = first.length - first.replace(/^ +/, "").length;
      span.style.setProperty("--nplm-indent", (indent + HANG) + "ch");
      nodes.forEach(function (n) { span.appendChild(n); });
      if (k < parts.length - 1 || text.endsWith("\n")) span.appendChild(document.createTextNode("\n"));
      frag.appendChild(span);
    });
    if (frag.textContent !== text) return; // never change what the block says
    pre.textContent = "";
    pre.appendChild(frag);
    pre.dataset.nplmLines = "1";
  }

  function run() {
    document.querySelectorAll(".bd-article div.highlight > pre").forEach(hang);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", run);
  else run();
})();
