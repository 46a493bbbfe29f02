// What a reader sees on one page of the built book, measured in the browser (tests/browser/check_book.py).
// Defines window.__nplm with:
//   ready(timeoutMs)    waits for MathJax's first typesetting and for every widget view to draw
//   openAll()           opens every folded block (hidden cells, solutions) so that they are measured too
//   inspect(minScale)   returns {math, overflow, images, widgets, column}
//   controls()          the interactive controls in cell outputs, with the box of the picture they drive
//   mask(on)            hides (visibility) the controls themselves, so that a screenshot shows only the picture
(() => {
  const SKIP = new Set(["SCRIPT", "STYLE", "PRE", "CODE", "TEXTAREA", "NOSCRIPT", "MJX-CONTAINER", "svg"]);
  const WIDGET_VIEW = 'script[type="application/vnd.jupyter.widget-view+json"]';
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const visible = (el) => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== "hidden";

  function describe(el) {
    let s = el.tagName.toLowerCase();
    if (el.id) s += "#" + el.id;
    const cls = [...el.classList].filter((c) => !/^(docutils|container|notranslate)$/.test(c)).slice(0, 3);
    if (cls.length) s += "." + cls.join(".");
    const sec = el.closest("section[id]");
    const text = (el.innerText || el.textContent || "").trim().replace(/\s+/g, " ").slice(0, 60);
    return `${s}${sec ? " in #" + sec.id : ""}${text ? ' "' + text + '"' : ""}`;
  }

  function column() {
    return document.querySelector("article.bd-article") || document.querySelector('[role="main"]') || document.body;
  }

  function widgetAreas() {
    return [...document.querySelectorAll(WIDGET_VIEW)].map((s) => {
      const prev = s.previousElementSibling;
      return prev && prev.classList.contains("widget-subarea") ? prev : null;
    });
  }

  async function ready(timeoutMs) {
    const t0 = performance.now();
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
      await Promise.race([MathJax.startup.promise, sleep(timeoutMs)]);
    }
    while (performance.now() - t0 < timeoutMs) {
      const areas = widgetAreas();
      if (areas.every((a) => a && a.children.length > 0 && a.getBoundingClientRect().height > 0)) break;
      await sleep(100);
    }
    await sleep(300);  // let late layout (fonts, images) settle
    return performance.now() - t0;
  }

  function openAll() {
    document.querySelectorAll("details").forEach((d) => { d.open = true; });
    document.querySelectorAll(".toggle-hidden").forEach((e) => e.classList.remove("toggle-hidden"));
    document.querySelectorAll("button.toggle-button").forEach((b) => b.classList.remove("toggle-button-hidden"));
  }

  // Text a reader would see as raw TeX: \( \) \[ \] $$ \begin{...} outside code, or math MathJax left alone.
  function unrenderedMath() {
    const found = [];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, {
      acceptNode(node) {
        for (let el = node.parentElement; el; el = el.parentElement) {
          if (SKIP.has(el.tagName) || el.classList.contains("highlight")) return NodeFilter.FILTER_REJECT;
        }
        return NodeFilter.FILTER_ACCEPT;
      },
    });
    const tex = /\\\(|\\\)|\\\[|\\\]|\$\$|\\begin\{|\\frac\{|\\mathrm\{/;
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      if (tex.test(n.nodeValue) && visible(n.parentElement)) {
        found.push(`raw TeX ${JSON.stringify(n.nodeValue.trim().slice(0, 60))} in ${describe(n.parentElement).slice(0, 80)}`);
      }
    }
    for (const el of document.querySelectorAll(".math")) {
      if (!el.querySelector("mjx-container") && !el.closest("mjx-container")) found.push(`math not typeset: ${describe(el)}`);
    }
    for (const el of document.querySelectorAll("mjx-merror")) {
      found.push(`MathJax error: ${el.getAttribute("data-mjx-error") || el.textContent.slice(0, 60)}`);
    }
    return [...new Set(found)];
  }

  // Content wider than the column: sticking out of it, or hidden behind a horizontal scroll bar.
  function overflow() {
    const col = column(), c = col.getBoundingClientRect(), found = [], flagged = [];
    for (const el of col.querySelectorAll("*")) {
      if (flagged.some((f) => f.contains(el)) || !visible(el)) continue;
      if (el.closest(".headerlink, .copybtn, .toggle-button, mjx-assistive-mml")) continue;
      const r = el.getBoundingClientRect();
      if (r.width === 0 || r.height === 0) continue;
      const ox = getComputedStyle(el).overflowX;
      if ((ox === "auto" || ox === "scroll") && el.scrollWidth > el.clientWidth + 1) {
        found.push(`scrolls sideways (${el.scrollWidth} px of content in ${el.clientWidth} px): ${describe(el)}`);
        flagged.push(el);
      } else if (r.right > c.right + 1 || r.left < c.left - 1) {
        found.push(`wider than the column (${Math.round(r.left - c.left)}..${Math.round(r.right - c.left)} px in ${Math.round(c.width)} px): ${describe(el)}`);
        flagged.push(el);
      }
    }
    return found;
  }

  // Images drawn smaller than minScale of their own size (a matplotlib figure's text shrinks with them).
  function images(minScale) {
    const out = [];
    for (const img of column().querySelectorAll("img")) {
      if (!visible(img)) continue;
      const r = img.getBoundingClientRect();
      const src = img.getAttribute("src") || "";
      if (!img.complete || img.naturalWidth === 0) { out.push({src, missing: true}); continue; }
      if (/\.svg(\?|$)/.test(src) || img.naturalWidth < 120) continue;  // vector art and icons scale freely
      out.push({src, natural: img.naturalWidth, shown: Math.round(r.width), scale: r.width / img.naturalWidth,
                small: r.width / img.naturalWidth < minScale, where: describe(img.closest(".cell") || img)});
    }
    return out;
  }

  function widgets() {
    return widgetAreas().map((a) => ({rendered: !!(a && a.children.length > 0 && a.getBoundingClientRect().height > 0)}));
  }

  function inspect(minScale) {
    const c = column().getBoundingClientRect();
    return {math: unrenderedMath(), overflow: overflow(), images: images(minScale), widgets: widgets(),
            column: {left: c.left, width: c.width}, bodyFont: getComputedStyle(column().querySelector("p") || document.body).fontSize};
  }

  // Interactive controls inside cell outputs: sliders (ipywidgets' noUiSlider or <input type=range>)
  // and drop-downs (<select>). Each comes with the box of its output (page coordinates), which is
  // the picture compared before and after the control is moved.
  const CONTROL = ".noUi-target, input[type=range], select";
  function unit(el) { return el.closest(".widget-inline-hbox, label") || el; }

  function controls() {
    const out = [];
    const all = [...column().querySelectorAll(CONTROL)].filter((el) => visible(el) && el.closest(".cell_output, .output, .widget-subarea"));
    all.forEach((el, i) => {
      el.setAttribute("data-nplm-control", i);
      const root = el.closest(".widget-subarea") || el.closest(".cell_output") || el.closest(".output");
      root.setAttribute("data-nplm-root", "");
      const rr = root.getBoundingClientRect(), r = el.getBoundingClientRect();
      const handle = el.querySelector(".noUi-handle");
      const hr = handle ? handle.getBoundingClientRect() : null;
      const label = (unit(el).innerText || "").trim().split("\n")[0].slice(0, 30);
      out.push({index: i, kind: el.tagName === "SELECT" ? "select" : "slider", label,
                options: el.tagName === "SELECT" ? el.options.length : null,
                selected: el.tagName === "SELECT" ? el.selectedIndex : null,
                box: {x: r.left + scrollX, y: r.top + scrollY, width: r.width, height: r.height},
                handle: hr ? {x: hr.left + hr.width / 2 + scrollX, y: hr.top + hr.height / 2 + scrollY} : null,
                picture: {x: rr.left + scrollX, y: rr.top + scrollY, width: rr.width, height: rr.height}});
    });
    return out;
  }

  // Hide the controls (their own look changes when moved) and whatever is fixed to the viewport
  // (headers, the skip link): a screenshot then shows only the output's picture.
  let pinned = null;
  function mask(on) {
    if (pinned === null) {
      pinned = [...document.querySelectorAll("body *")].filter((el) => /^(fixed|sticky)$/.test(getComputedStyle(el).position));
    }
    if (document.activeElement && document.activeElement.blur) document.activeElement.blur();
    for (const el of document.querySelectorAll("[data-nplm-control]")) unit(el).style.visibility = on ? "hidden" : "";
    for (const el of pinned) el.style.visibility = on ? "hidden" : "";
  }

  // Before the full-page screenshot: nothing focused, back at the top.
  function reset() {
    if (document.activeElement && document.activeElement.blur) document.activeElement.blur();
    window.scrollTo(0, 0);
  }

  // Choose another option the way a reader's click does (native pop-ups cannot be driven headless).
  function choose(i, optionIndex) {
    const el = document.querySelector(`[data-nplm-control="${i}"]`);
    el.selectedIndex = optionIndex;
    el.dispatchEvent(new Event("input", {bubbles: true}));
    el.dispatchEvent(new Event("change", {bubbles: true}));
    return el.options[optionIndex].text;
  }

  // Scroll control i to the middle of the viewport; return where to press (its handle, or its own
  // centre) and where to release (a quarter or three quarters along it), in viewport coordinates.
  function aim(i) {
    const el = document.querySelector(`[data-nplm-control="${i}"]`);
    el.scrollIntoView({block: "center"});
    const r = el.getBoundingClientRect(), h = el.querySelector(".noUi-handle");
    const from = h ? h.getBoundingClientRect() : null;
    const x0 = from ? from.left + from.width / 2 : r.left + r.width / 2;
    const y = r.top + r.height / 2;
    const x1 = r.left + r.width * ((x0 - r.left) / r.width > 0.5 ? 0.25 : 0.75);
    return {x0, y0: from ? from.top + from.height / 2 : y, x1, y1: y, isRange: el.tagName === "INPUT"};
  }

  window.__nplm = {ready, openAll, inspect, controls, mask, choose, aim, reset};
})();
