// What a reader sees on one page of the built book, measured in the browser (tests/browser/check_book.py).
// Defines window.__nplm with:
//   ready(timeoutMs)    waits for MathJax's first typesetting and for every widget view to draw
//   openAll()           opens every folded block (hidden cells, solutions) so that they are measured too
//   inspect(minScale, narrow)  returns {math, overflow, printed, page, cutOff, fingers, images, widgets, column}
//                       (narrow: a phone's width, where code, tables with a cue and equations may scroll)
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

  // Content wider than the column: sticking out of it, or hidden behind a horizontal scroll bar. On a
  // phone (narrow) a block may scroll within itself when the reader can tell: code, display equations,
  // and tables whose box shows a cue that it scrolls (a shadow at the hidden edge: a background image).
  const PRINTED = ".cell_output pre, div.output pre, .output_area pre";
  function mayScroll(el) {
    if (el.matches("table") || el.querySelector("table")) return hasCue(el) ? "" : "a table with no cue that it scrolls";
    if (el.matches("pre, div.highlight") || el.closest("div.highlight")) return "";
    if (el.matches("mjx-container, .math, div.math") || el.querySelector(":scope > mjx-container")) return "";
    return "content";
  }
  function hasCue(el) {
    return getComputedStyle(el).backgroundImage !== "none";
  }
  function overflow(narrow) {
    const col = column(), c = col.getBoundingClientRect(), found = [], flagged = [];
    for (const el of col.querySelectorAll("*")) {
      if (flagged.some((f) => f.contains(el)) || !visible(el)) continue;
      if (el.closest(".headerlink, .copybtn, .toggle-button, mjx-assistive-mml")) continue;
      const r = el.getBoundingClientRect();
      if (r.width === 0 || r.height === 0) continue;
      const ox = getComputedStyle(el).overflowX;
      if (el.matches(PRINTED) || (el.closest(".cell_output, div.output") && el.querySelector(PRINTED))) {
        if (r.right <= c.right + 1 && r.left >= c.left - 1) continue;  // its text: printed() measures it
      }
      if ((ox === "auto" || ox === "scroll") && el.scrollWidth > el.clientWidth + 1) {
        flagged.push(el);
        const why = narrow ? mayScroll(el) : "content";
        if (why) found.push(`scrolls sideways (${el.scrollWidth} px of ${why === "content" ? "content" : why} in ${el.clientWidth} px): ${describe(el)}`);
      } else if (r.right > c.right + 1 || r.left < c.left - 1) {
        found.push(`wider than the column (${Math.round(r.left - c.left)}..${Math.round(r.right - c.left)} px in ${Math.round(c.width)} px): ${describe(el)}`);
        flagged.push(el);
      }
    }
    return found;
  }

  // Printed output (a cell's text output) whose longest line does not fit its block: at the block's
  // edge it wraps (a table's last column drops under the wrong heading) or scrolls. Measured with the
  // lines unwrapped for a moment.
  function printed() {
    const found = [];
    for (const pre of column().querySelectorAll(PRINTED)) {
      if (!visible(pre)) continue;
      const room = pre.clientWidth, saved = [pre.style.whiteSpace, pre.style.overflowX, pre.style.overflowWrap];
      pre.style.whiteSpace = "pre";
      pre.style.overflowX = "auto";
      pre.style.overflowWrap = "normal";
      const need = pre.scrollWidth;
      [pre.style.whiteSpace, pre.style.overflowX, pre.style.overflowWrap] = saved;
      if (need > room + 1) {
        const lines = pre.textContent.split("\n"), longest = lines.reduce((a, b) => (b.length > a.length ? b : a), "");
        const sec = pre.closest("section[id]");
        found.push(`printed output wider than its block (${need} px of text in ${room} px: it wraps or scrolls)` +
                   `${sec ? " in #" + sec.id : ""}, longest line (${longest.length} characters): ${JSON.stringify(longest.trim().slice(0, 70))}`);
      }
    }
    return found;
  }

  // The outermost elements that reach past the viewport's right edge; the page itself wider than it.
  function pageWidth() {
    const found = [], vw = document.documentElement.clientWidth, sw = document.scrollingElement.scrollWidth;
    const past = [];
    for (const el of document.body.querySelectorAll("*")) {
      if (!visible(el) || past.some((p) => p.contains(el)) || el.closest("mjx-assistive-mml")) continue;
      const r = el.getBoundingClientRect();
      if (r.width > 0 && r.height > 0 && (r.right > vw + 1) && !inScroller(el) && getComputedStyle(el).position !== "fixed") past.push(el);
    }
    if (sw > vw + 1) found.push(`the page is wider than the viewport (${sw} px in ${vw} px)` +
                               (past.length ? `: ${past.slice(0, 3).map(describe).join("; ")}` : ""));
    else past.slice(0, 5).forEach((el) => found.push(`cut off at the screen's edge (reaches ${Math.round(el.getBoundingClientRect().right)} px of ${vw}): ${describe(el)}`));
    return found;
  }
  function inScroller(el) {
    for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      const ox = getComputedStyle(p).overflowX;
      if (ox === "auto" || ox === "scroll") return true;
    }
    return false;
  }

  // Content cut off: a box that hides (overflow hidden or clip) part of what it holds, in the column.
  function cutOff() {
    const found = [], flagged = [];
    for (const el of column().querySelectorAll("*")) {
      if (!visible(el) || flagged.some((f) => f.contains(el))) continue;
      if (el.closest("mjx-assistive-mml, .headerlink, .copybtn, .toggle-button, .widget-subarea svg")) continue;
      if (el.parentElement && el.parentElement.closest("mjx-container")) continue;  // MathJax's own glyph boxes
      const cs = getComputedStyle(el);
      if (!/hidden|clip/.test(cs.overflowX) || cs.textOverflow === "ellipsis") continue;
      if (el.scrollWidth > el.clientWidth + 4 && el.clientWidth > 0) {  // (a slanted letter's overhang is not content)
        found.push(`content cut off (${el.scrollWidth} px of content shown in ${el.clientWidth} px, the rest hidden): ${describe(el)}`);
        flagged.push(el);
      }
    }
    return found;
  }

  // Widgets a finger can use: every control at least 24 px high, a slider's track at least 150 px
  // long, text in a widget's picture at least 9 px.
  function fingers() {
    const found = [];
    for (const area of widgetAreas().filter(Boolean)) {
      for (const el of area.querySelectorAll(".noUi-target, input[type=range], select, button, input[type=text], input[type=number]")) {
        if (!visible(el)) continue;
        const r = el.getBoundingClientRect(), what = describe(unit(el)).slice(0, 80);
        const slider = el.matches(".noUi-target, input[type=range]");
        const handle = el.querySelector(".noUi-handle");
        const high = Math.max(r.height, handle ? handle.getBoundingClientRect().height : 0);
        if (high < 24) found.push(`a control too small for a finger (${Math.round(high)} px high, under 24): ${what}`);
        if (slider && r.width < 150) found.push(`a slider too short for a finger (a ${Math.round(r.width)} px track, under 150): ${what}`);
      }
      let smallest = Infinity;
      for (const t of area.querySelectorAll("svg text, .widget-label, label")) {
        if (!visible(t) || !t.textContent.trim()) continue;
        const px = t instanceof SVGElement ? t.getBoundingClientRect().height / 1.15 : parseFloat(getComputedStyle(t).fontSize);
        if (px > 0) smallest = Math.min(smallest, px);
      }
      if (smallest < 9) found.push(`text in a widget drawn at ${smallest.toFixed(1)} px (under 9 px: unreadable without zooming): ${describe(area).slice(0, 80)}`);
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

  function inspect(minScale, narrow) {
    const c = column().getBoundingClientRect();
    return {math: unrenderedMath(), overflow: overflow(narrow), printed: printed(), page: pageWidth(), cutOff: cutOff(),
            fingers: narrow ? fingers() : [], images: images(minScale), widgets: widgets(),
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

  // Give control i the keyboard's focus and bring it to the middle of the viewport: the arrow keys
  // the check then presses (real key events) choose another option, as a reader's keyboard does
  // (a native drop-down's pop-up cannot be driven headless). Returns the option shown now.
  function focus(i) {
    const el = document.querySelector(`[data-nplm-control="${i}"]`);
    el.scrollIntoView({block: "center"});
    el.focus();
    return {focused: document.activeElement === el, option: el.tagName === "SELECT" ? el.options[el.selectedIndex].text : null};
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

  window.__nplm = {ready, openAll, inspect, controls, mask, focus, aim, reset};
})();
