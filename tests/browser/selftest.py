"""The browser check checked: on a few small pages, each broken in one way, it must report exactly
that, and pass the page that is fine.

    python tests/browser/selftest.py [--chromium PATH]

Run by ``make browser-check`` before it checks the book (a few seconds). Needs Chromium, not the
vendored scripts (these pages load none). Exit status 0 when the check behaves, 1 otherwise.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import check_book  # noqa: E402

PAGE = """<!doctype html><html><head><meta charset="utf-8"><link rel="icon" href="data:,">
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{{margin:0;font:16px sans-serif}} article.bd-article{{margin:0 16px}}
@media (min-width: 1100px) {{ article.bd-article{{width:752px;margin-left:256px}} }}
pre{{white-space:pre;overflow-x:auto}} .cell_output pre{{white-space:pre-wrap}}
.cue{{overflow-x:auto;background:linear-gradient(to left,#fff0,#fff0),linear-gradient(to left,#0003,#0000) right/12px 100% no-repeat}}
input[type=range]{{height:28px}} select{{height:32px}}</style></head>
<body><article class="bd-article"><section id="s"><p>{body}</p></section></article></body></html>"""

# The picture a control drives: a div whose colour follows the slider (when ``live``).
SLIDER = """<div class="cell_output"><input type="range" min="0" max="100" value="10" style="width:300px">
<div class="pic" style="width:300px;height:120px;background:hsl(10,60%,50%)"></div></div>
<script>{script}</script>"""
LIVE = """const r = document.querySelector('input'), d = document.querySelector('.pic');
r.addEventListener('input', () => { d.style.background = `hsl(${3 * r.value}, 60%, 50%)`; });"""
# A drop-down and its picture, for the keyboard (``live``: the picture follows the choice).
SELECT = """<div class="cell_output"><select class="pick"><option>red</option><option>blue</option></select>
<div class="pic2" style="width:300px;height:60px;background:red"></div></div>
<script>{script}</script>"""
LIVE_SELECT = """const s = document.querySelector('select.pick'), q = document.querySelector('.pic2');
s.addEventListener('change', () => { q.style.background = s.value; });"""
# A widget area as the widget manager draws one (the subarea, then the view's script tag).
WIDGET = """<div class="cell_output"><div class="widget-subarea">{inner}</div>
<script type="application/vnd.jupyter.widget-view+json">{{}}</script></div><script>{script}</script>"""
NUMBERS = "".join(f"<td style='white-space:nowrap'>0.1234567{k}</td>" for k in range(6))


def png(width: int, height: int) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (width, height), (200, 120, 40)).save(buf, "PNG")
    return buf.getvalue()


# page -> (body, words every reported problem of the page must include; none for a page that is fine)
CASES = {
    "fine.html": ("All is well: <code>x</code>, a small figure <img src='small.png' width='320'>"
                  + "<div class='cell_output'><pre>short   printed   lines\n1.0     2.0</pre></div>"
                  + f"<div class='cue'><table><tr>{NUMBERS}</tr></table></div>"
                  + SLIDER.format(script=LIVE) + SELECT.format(script=LIVE_SELECT), []),
    "raw_math.html": (r"The model \(P(w_t \mid h)\) never typeset.", ["raw TeX"]),
    "untypeset.html": (r'Sphinx wrote <span class="math notranslate">\(C\)</span>, MathJax never came.',
                       ["math not typeset"]),
    "console.html": ("<script>undefined_function()</script>Nothing visible is wrong.", ["uncaught exception"]),
    "missing.html": ("<img src='nowhere.png'>", ["missing image", "failed request", "404"]),
    "wide_code.html": ("<pre>" + "x = 1  # " + "a long comment " * 12 + "</pre>", ["scrolls sideways"]),
    "wide_table.html": ("<table><tr>" + "<td style='white-space:nowrap'>0.123456789</td>" * 12 + "</tr></table>",
                        ["wider than the column"]),
    "shrunk.html": ("<img src='big.png' style='width:100%'>", ["image shown at"]),
    "dead_widget.html": (SLIDER.format(script=""), ["changes nothing"]),
    "dead_select.html": (SELECT.format(script=""), ["changes nothing", "pressed down on it: 'red' -> 'blue'"]),
    "wrapped_output.html": ("<div class='cell_output'><pre>" + "method   test ppl   valid ppl   " * 4 + "</pre></div>",
                            ["printed output wider than its block"]),
    "wide_page.html": ("<div style='position:absolute;left:0;width:1500px;height:20px;background:#ccc'></div>",
                       ["the page is wider than the viewport"]),
    "cut_off.html": ("<div style='overflow:hidden;width:200px'><span style='white-space:nowrap'>"
                     + "words hidden past the edge " * 4 + "</span></div>", ["content cut off"]),
    "table_no_cue.html": (f"<div style='overflow-x:auto'><table><tr>{NUMBERS}</tr></table></div>",
                          ["a table with no cue that it scrolls"]),
    "tiny_control.html": (WIDGET.format(inner="<input type='range' style='width:100px;height:10px'>"
                                              "<label style='font-size:6px'>step</label>"
                                              "<div class='pic' style='width:300px;height:60px;background:red'></div>",
                                        script=LIVE), ["too small for a finger", "too short for a finger",
                                                       "text in a widget drawn at 6.0 px"]),
    "blank_widget.html": (WIDGET.format(inner="", script=""), ["widget areas drew nothing"]),
    "past_edge.html": ("<div style='overflow-x:clip'><div style='width:1500px;height:20px;background:#ccc'></div></div>",
                       ["cut off at the screen's edge"]),
}


def run(exe: str) -> int:
    failures = []
    with tempfile.TemporaryDirectory(prefix="nplm-selftest-") as tmp:
        root, vendor = Path(tmp) / "html", Path(tmp) / "vendor"
        root.mkdir()
        vendor.mkdir()
        (vendor / "versions.json").write_text(json.dumps({}))
        (root / "small.png").write_bytes(png(320, 160))
        (root / "big.png").write_bytes(png(1600, 400))
        for name, (body, _) in CASES.items():
            (root / name).write_text(PAGE.format(body=body))
        opt = check_book.Options(shots=Path(tmp) / "shots", timeout=5, settle_ms=400)
        problems = check_book.check_pages(root, vendor, exe, opt, report=lambda line: None)
        for name, (_, words) in CASES.items():
            found = problems.get(name, [])
            if not words and found:
                failures.append(f"{name} is fine but the check reported: {found}")
            for w in words:
                if not any(w in m for m in found):
                    failures.append(f"{name}: expected a problem mentioning {w!r}, got {found}")
            print(f"{name:<20} {'; '.join(found)[:300] if found else 'passed'}")
    if failures:
        print("\nthe browser check misjudged these pages:")
        for f in failures:
            print(f"  {f}")
        return 1
    print(f"\nthe browser check judged all {len(CASES)} test pages right")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Check that the browser check fails broken pages and passes a fine one.")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    a = ap.parse_args(argv)
    if not Path(a.chromium).exists():
        print(f"error: Chromium not found at {a.chromium}; install it: apt-get install -y chromium", file=sys.stderr)
        return 2
    return run(a.chromium)


if __name__ == "__main__":
    sys.exit(main())
