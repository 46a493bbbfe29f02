"""Open every page of the built book in headless Chromium, as a reader with no kernel would; list what is broken.

    python tests/browser/check_book.py [_build/html] [--vendor-js .cache/vendor-js] [--screenshots DIR]

Run by ``make browser-check`` (after ``make book`` and ``make vendor-js``); not part of the quick test
suite (tests/browser/conftest.py keeps pytest out of this folder). Needs Debian's Chromium:
``apt-get install -y chromium`` (as root; ``--chromium PATH`` for another binary).

How: the built book is served on a free localhost port. The scripts the pages load from CDNs
(require.js, @jupyter-widgets/html-manager's embed-amd.js, MathJax) are served from local copies of
their npm packages (``make vendor-js``: ``--vendor-js DIR``), at the versions the pages name, and the
browser can resolve no other host: the check sees what a reader sees, with no network. Each page
is opened at each of ``--widths`` (1280 and 390 CSS pixels: a desktop and a phone) through the
DevTools protocol (tests/browser/cdp.py), every folded block (hidden cells, solutions) is opened, and
tests/browser/inspect_page.js measures it. A page fails, at either width, on

* a console error, an uncaught exception or a failed request (any, including a 404);
* math left unrendered (raw ``\\(`` ``\\[`` ``$$`` outside code, a math element MathJax did not
  typeset, a MathJax error);
* printed output wider than its block: a cell's text output whose longest line does not fit, so
  that it wraps at the block's edge (a table's last column drops under the wrong heading) or scrolls;
* a page wider than the viewport, or anything reaching past the screen's edge;
* content cut off: a box that hides part of what it holds (overflow hidden);
* content wider than the column: an element sticking out of the article column, or one that
  hides part of its content behind a horizontal scroll bar; on a phone, code, display equations
  and tables that show a cue that they scroll (a shadow at the hidden edge) may scroll in their block;
* an image shown below ``--min-scale`` of its own size (matplotlib's 10 pt text at 100 dpi is
  13.9 px at full size; below 0.8 it falls under 11 px), on a phone below ``--min-scale-narrow``
  (0.65: 9 px), or missing;
* on a phone, a widget a finger cannot use: a control under 24 px high, a slider's track under
  150 px, text in the widget under 9 px;
* a widget area that drew nothing, and a control that changes nothing: every slider in a cell
  output is dragged with the mouse and every drop-down given the keyboard's focus and moved with
  the arrow keys (real input events through the protocol's Input domain, never a value set from
  JavaScript), and the output's picture (with the controls themselves hidden) is compared before
  and after, pixel for pixel;
* a Python error in an output or a docutils system message; a broken internal link or anchor.

One screenshot per page and width (in parts of 2000 px) and the before/after pictures of every
control go to ``--screenshots``/w1280 and /w390. Exit status: 0 when no problem is found, 1 otherwise (each problem listed),
2 on bad usage.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import functools
import http.server
import json
import re
import shutil
import sys
import threading
import time
import urllib.parse
from pathlib import Path

from bs4 import BeautifulSoup

sys.path.insert(0, str(Path(__file__).parent))
from cdp import Browser, CDPError, Page  # noqa: E402

INSPECT_JS = (Path(__file__).parent / "inspect_page.js").read_text(encoding="utf-8")

# --------------------------------------------------------------------------- serving
VENDOR = "/__vendor__/"
# The CDN addresses the built pages load scripts from (in HTML and in the book's own JavaScript),
# the name of the npm package behind each (versions.json of the vendor folder), and where its
# local copy is served. Group 1 of each pattern is the version the page names.
CDN = [
    (re.compile(r"https://cdnjs\.cloudflare\.com/ajax/libs/require\.js/([0-9][^/\"']*)/require\.min\.js"),
     "requirejs", VENDOR + "require.min.js"),
    (re.compile(r"https://cdn\.jsdelivr\.net/npm/@jupyter-widgets/html-manager@([0-9][^/\"']*)"),
     "html-manager", VENDOR + "html-manager"),
    (re.compile(r"https://cdn\.jsdelivr\.net/npm/mathjax@([0-9][^/\"']*)/es5"), "mathjax", VENDOR + "mathjax"),
]
_TAG = re.compile(r"<(?:script|link)\b[^>]*>")


def localise(text: str) -> str:
    """``text`` (a page or a script of the book) with the CDN addresses replaced by the local copies;
    subresource-integrity hashes are dropped from the tags that now load a local copy (npm's
    require.js is not the CDN's minified file)."""
    for pattern, _, local in CDN:
        text = pattern.sub(local, text)

    def strip(m: re.Match) -> str:
        tag = m.group(0)
        return re.sub(r'\s(integrity|crossorigin)="[^"]*"', "", tag) if VENDOR in tag else tag
    return _TAG.sub(strip, text)


def version_mismatches(text: str, vendored: dict) -> list[str]:
    """Scripts the page names at another version than the local copies (``3`` matches ``3.2.2``)."""
    found = []
    for pattern, name, _ in CDN:
        for want in sorted(set(pattern.findall(text))):
            have = vendored.get(name, "")
            if not (have == want or have.startswith(want + ".")):
                found.append(f"the page loads {name} {want} but the local copy is {have or 'missing'}: "
                             f"set the versions in the Makefile (vendor-js) to the page's and run make vendor-js")
    return found


class _Handler(http.server.SimpleHTTPRequestHandler):
    vendor: Path = Path(".")

    def _send(self, body: bytes, ctype: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802 (http.server's name)
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        if path.startswith(VENDOR):
            f = (self.vendor / path[len(VENDOR):]).resolve()
            if f.is_relative_to(self.vendor.resolve()) and f.is_file():
                return self._send(f.read_bytes(), self.guess_type(str(f)))
            return self.send_error(404)
        if path.endswith((".html", ".js")):
            f = Path(self.translate_path(path))
            if f.is_file():
                text = localise(f.read_text(encoding="utf-8", errors="replace"))
                return self._send(text.encode(), self.guess_type(str(f)))
        super().do_GET()

    def log_message(self, *args):  # quiet
        pass


def serve(root: Path, vendor: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    """Serve ``root`` (and ``vendor`` under /__vendor__/) on 127.0.0.1 at a free port, in a thread."""
    handler = functools.partial(type("Handler", (_Handler,), {"vendor": vendor}), directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


# --------------------------------------------------------------------------- static checks
def python_errors(soup: BeautifulSoup) -> list[str]:
    """Error outputs and docutils system messages in a page's HTML."""
    found = []
    for el in soup.select("div.cell_output .traceback, div.output.error, div.output.traceback, "
                          ".output_error, div.system-message, .system-message"):
        text = " ".join(el.get_text(" ", strip=True).split())
        found.append(f"error output: {text[:160]}")
    for el in soup.select("div.cell_output"):
        if "Traceback (most recent call last)" in el.get_text() and not el.select(".traceback"):
            found.append("a cell output contains 'Traceback (most recent call last)'")
    return found


@functools.lru_cache(maxsize=None)
def _ids_of(path: Path) -> frozenset:
    soup = BeautifulSoup(path.read_text(encoding="utf-8", errors="replace"), "html.parser")
    return frozenset([el["id"] for el in soup.find_all(id=True)] + [el["name"] for el in soup.find_all("a", attrs={"name": True})])


def broken_links(soup: BeautifulSoup, page: Path, root: Path) -> list[str]:
    """Internal hrefs whose file is missing from the build, or whose #anchor the target lacks."""
    found = []
    for a in soup.find_all("a", href=True):
        href = a["href"].strip()
        parts = urllib.parse.urlsplit(href)
        if parts.scheme or parts.netloc or href.startswith(("mailto:", "javascript:")) or href in ("", "#"):
            if re.search(r"/\.\.?/", href):  # a launch or repository link built from a path like ./book
                found.append(f"malformed link: {href}")
            continue  # external (not fetched: the machine may be offline) or empty
        target = page if not parts.path else (page.parent / urllib.parse.unquote(parts.path)).resolve()
        if target.is_dir():
            target = target / "index.html"
        try:
            target.relative_to(root.resolve())
        except ValueError:
            found.append(f"link outside the book: {href}")
            continue
        if not target.exists():
            found.append(f"broken link: {href} (no {target.relative_to(root.resolve())})")
        elif parts.fragment and target.suffix == ".html":
            frag = urllib.parse.unquote(parts.fragment)
            if frag not in _ids_of(target):
                found.append(f"broken anchor: {href} (no id {frag!r} in {target.name})")
    return found


# --------------------------------------------------------------------------- in the browser
def save_full_page(page: Page, out: Path, part_height: int = 2000, max_parts: int = 0) -> list[Path]:
    """Screenshots of the page as a reader scrolls it, at the viewport's width, in parts of
    ``part_height`` pixels (the viewport is made that tall while they are taken); all of it, or
    its first ``max_parts`` parts."""
    for old in [out, *out.parent.glob(out.stem + "-[0-9]*.png")]:
        old.unlink(missing_ok=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    page.send("Emulation.setDeviceMetricsOverride",
              {"width": page.width, "height": part_height, "deviceScaleFactor": 1, "mobile": page.mobile})
    files = []
    try:
        height = int(page.evaluate("document.documentElement.scrollHeight"))
        for k, y in enumerate(range(0, height, part_height)):
            if max_parts and k >= max_parts:
                break
            page.evaluate(f"window.scrollTo(0, {y})")
            time.sleep(0.15)
            f = out if k == 0 else out.with_name(f"{out.stem}-{k + 1}.png")
            f.write_bytes(base64.b64decode(page.send("Page.captureScreenshot", {"format": "png"}, timeout=60)["data"]))
            files.append(f)
    finally:
        page.send("Emulation.setDeviceMetricsOverride",
                  {"width": page.width, "height": page.height, "deviceScaleFactor": 1, "mobile": page.mobile})
    return files


def stable_shot(page: Page, box: dict, settle_ms: int, tries: int = 6) -> bytes:
    """A screenshot of ``box`` (controls and pinned bars hidden) once two in a row agree: a picture
    still drawing must not pass for one that responded."""
    page.evaluate("__nplm.mask(true)")
    try:
        shot = page.screenshot(box)
        for _ in range(tries):
            time.sleep(settle_ms / 4000)
            again = page.screenshot(box)
            if again == shot:
                break
            shot = again
        return shot
    finally:
        page.evaluate("__nplm.mask(false)")


def exercise_controls(page: Page, shots: Path, stem: str, settle_ms: int) -> tuple[list[str], list[str]]:
    """Move every control in the page's outputs; a control whose picture does not change is a problem.

    Returns (problems, notes)."""
    problems, notes = [], []
    controls = page.evaluate("__nplm.controls()")
    for c in controls:
        i, what = c["index"], f"{c['kind']} {c['label']!r}" if c["label"] else c["kind"]
        if c["kind"] == "select" and (c["options"] or 0) < 2:
            continue
        before = stable_shot(page, c["picture"], settle_ms)
        if c["kind"] == "select":  # the keyboard's arrows, as a reader without a pop-up would
            f = page.evaluate(f"__nplm.focus({i})")
            down = c["selected"] + 1 < c["options"]
            page.key(*(("ArrowDown", "ArrowDown", 40) if down else ("ArrowUp", "ArrowUp", 38)))
            now = page.evaluate(f"__nplm.focus({i})")["option"]
            moved = (f"pressed {'down' if down else 'up'} on it: {f['option']!r} -> {now!r}" if f["focused"]
                     else "could not give it the keyboard's focus")
        else:
            a = page.evaluate(f"__nplm.aim({i})")
            if a["isRange"]:  # a native range input moves to where it is clicked
                page.mouse("mousePressed", a["x1"], a["y1"], 1)
                page.mouse("mouseReleased", a["x1"], a["y1"])
            else:
                page.drag(a["x0"], a["y0"], a["x1"], a["y1"])
            moved = "dragged it"
        time.sleep(settle_ms / 1000)
        after_box = next((d["picture"] for d in page.evaluate("__nplm.controls()") if d["index"] == i), c["picture"])
        after = stable_shot(page, after_box, settle_ms)
        for tag, png in (("before", before), ("after", after)):
            (shots / f"{stem}__control{i}-{tag}.png").write_bytes(png)
        if before == after:
            problems.append(f"the {what} changes nothing: {moved}, and the output's picture stayed "
                            f"identical ({shots / f'{stem}__control{i}-after.png'})")
        else:
            notes.append(f"{what}: {moved}, the picture changed")
    return problems, notes


@dataclasses.dataclass
class Options:
    """How the pages are looked at (see main's flags)."""
    shots: Path = Path("_build/screenshots")
    width: int = 1280
    widths: tuple = (1280, 390)
    narrow_below: int = 600  # a viewport narrower than this is a phone's
    min_scale: float = 0.8
    min_scale_narrow: float = 0.65
    timeout: float = 20.0
    settle_ms: int = 800
    full_shots: str = r"^(book/|index\.html$)"  # pages screenshotted whole; the others, their first screen


def browser_problems(page: Page, url: str, stem: str, opt: Options, whole: bool) -> tuple[list[str], dict]:
    """Open ``url`` and list what a reader would find broken; also save the screenshots."""
    found = page.goto(url, opt.timeout)
    page.evaluate(INSPECT_JS)
    page.evaluate(f"__nplm.ready({int(opt.timeout * 1000)})", timeout=opt.timeout + 10)
    page.evaluate("__nplm.openAll()")
    time.sleep(0.3)
    narrow = page.width < opt.narrow_below
    least = opt.min_scale_narrow if narrow else opt.min_scale
    view = page.evaluate(f"__nplm.inspect({least}, {'true' if narrow else 'false'})")
    for rule in ("math", "page", "printed", "cutOff", "overflow", "fingers"):
        found += view[rule]
    for im in view["images"]:
        if im.get("missing"):
            found.append(f"missing image: {im['src']}")
        elif im["small"]:
            found.append(f"image shown at {im['scale']:.0%} of its size ({im['shown']} of {im['natural']} px; "
                         f"under {least:.0%} its text is too small to read): {im['where']}")
    empty = sum(not w["rendered"] for w in view["widgets"])
    if empty:
        found.append(f"{empty} of {len(view['widgets'])} widget areas drew nothing")
    moved, notes = exercise_controls(page, opt.shots, stem, opt.settle_ms)
    found += moved
    page.evaluate("__nplm.reset()")
    files = save_full_page(page, opt.shots / f"{stem}.png", 2000 if whole else page.height, 0 if whole else 1)
    found += page.console_problems()  # last: includes anything the controls set off
    return found, {"widgets": len(view["widgets"]), "controls": notes, "screenshots": files}


# --------------------------------------------------------------------------- driver
def _book_scripts(soup: BeautifulSoup, page: Path, root: Path) -> list[str]:
    """The text of the book's own scripts a page loads (they may name CDN addresses too)."""
    out = []
    for s in soup.find_all("script", src=True):
        parts = urllib.parse.urlsplit(s["src"])
        if not parts.scheme and parts.path.endswith(".js"):
            f = (page.parent / urllib.parse.unquote(parts.path)).resolve()
            if f.is_file() and f.is_relative_to(root) and "_static/nplm" in f.as_posix():
                out.append(f.read_text(encoding="utf-8", errors="replace"))
    return out


def book_pages(root: Path) -> list[Path]:
    """Every HTML page of the build but the root redirect: chapters, API, bibliography, index pages,
    highlighted module sources."""
    pages = [p for p in sorted(root.rglob("*.html")) if not p.relative_to(root).parts[0].startswith(("_static", "_sources"))]
    return [p for p in pages if not (p.parent == root and p.name == "index.html" and "http-equiv" in p.read_text()[:500])]


def check_pages(root: Path, vendor: Path, exe: str, opt: Options, only: str | None = None,
                report=print) -> dict[str, list[str]]:
    """Every page's problems ({relative path: [problem, ...]}); ``report`` gets one line per page."""
    pages = [p for p in book_pages(root) if not only or re.search(only, p.relative_to(root).as_posix())]
    vendored = json.loads((vendor / "versions.json").read_text())
    server, base = serve(root, vendor)
    problems: dict[str, list[str]] = {p.relative_to(root).as_posix(): [] for p in pages}
    try:
        with Browser(exe) as browser:
            for width in opt.widths:
                for rel, found in _check_at(browser, width, root, base, pages, vendored, opt, report).items():
                    problems[rel] += [f"at {width} px: {m}" for m in found]
    finally:
        server.shutdown()
    return problems


def _check_at(browser, width: int, root: Path, base: str, pages: list[Path], vendored: dict, opt: Options,
              report) -> dict[str, list[str]]:
    """Every page's problems at one viewport width (screenshots in ``opt.shots``/w<width>)."""
    wopt = dataclasses.replace(opt, shots=opt.shots / f"w{width}", width=width)
    wopt.shots.mkdir(parents=True, exist_ok=True)
    problems: dict[str, list[str]] = {}
    report(f"-- at {width} px")
    page = browser.new_page(width, 900 if width >= opt.narrow_below else 844, mobile=width < opt.narrow_below)
    try:
        for p in pages:
            rel = p.relative_to(root).as_posix()
            found = []
            if width == opt.widths[0]:  # what the HTML says (errors, links, versions): once
                html = p.read_text(encoding="utf-8", errors="replace")
                soup = BeautifulSoup(html, "html.parser")
                found = python_errors(soup) + broken_links(soup, p.resolve(), root)
                found += version_mismatches(html + "".join(_book_scripts(soup, p, root)), vendored)
            stem = Path(rel).with_suffix("").as_posix().replace("/", "__")
            try:
                seen, info = browser_problems(page, f"{base}/{rel}", stem, wopt, bool(re.search(opt.full_shots, rel)))
                found += seen
            except CDPError as e:
                found.append(f"the browser could not inspect the page: {e}")
                info = None
            status = "ok" if not found else f"{len(found)} problem(s)"
            extra = (f"widgets {info['widgets']}, controls moved {len(info['controls'])}, "
                     f"screenshots {len(info['screenshots'])}") if info else "not inspected"
            report(f"{rel:<42} {status:<14} {extra}")
            for note in (info or {}).get("controls", []):
                report(f"    {note}")
            problems[rel] = found
    finally:
        page.close()
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Check the built book in headless Chromium, as a reader with no kernel sees it.")
    ap.add_argument("html", nargs="?", default="_build/html", help="the built book (default _build/html)")
    ap.add_argument("--vendor-js", default=".cache/vendor-js", metavar="DIR",
                    help="local copies of require.js, the widget manager and MathJax (make vendor-js; default .cache/vendor-js)")
    ap.add_argument("--screenshots", default="_build/screenshots", help="folder for the screenshots")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium",
                    help="Chromium executable (default: chromium on PATH)")
    ap.add_argument("--widths", default="1280,390",
                    help="viewport widths in CSS pixels, comma-separated (default 1280,390: a desktop and a phone)")
    ap.add_argument("--min-scale", type=float, default=0.8,
                    help="smallest share of its own width an image may be shown at (default 0.8)")
    ap.add_argument("--min-scale-narrow", type=float, default=0.65,
                    help="the same on a phone (default 0.65: 10 pt text at 100 dpi shown at 9 px)")
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds a page may take to load and draw (default 20)")
    ap.add_argument("--settle", type=int, default=800, help="ms to wait after moving a control (default 800)")
    ap.add_argument("--pages", default=None, metavar="REGEX", help="only the pages whose path matches REGEX")
    a = ap.parse_args(argv)
    try:
        widths = tuple(int(w) for w in a.widths.split(","))
    except ValueError:
        print(f"error: --widths takes whole numbers separated by commas, got {a.widths!r}", file=sys.stderr)
        return 2
    root, vendor = Path(a.html), Path(a.vendor_js)
    if not root.is_dir():
        print(f"error: {root} is not a folder; build the book first (make book)", file=sys.stderr)
        return 2
    need = ["require.min.js", "html-manager/dist/embed-amd.js", "mathjax/tex-mml-chtml.js", "versions.json"]
    if not all((vendor / f).is_file() for f in need):
        print(f"error: {vendor} must hold {', '.join(need)}: run make vendor-js", file=sys.stderr)
        return 2
    if not Path(a.chromium).exists():
        print(f"error: Chromium not found at {a.chromium}; install it: apt-get install -y chromium", file=sys.stderr)
        return 2
    opt = Options(shots=Path(a.screenshots), widths=widths, min_scale=a.min_scale, min_scale_narrow=a.min_scale_narrow,
                  timeout=a.timeout, settle_ms=a.settle)
    t0 = time.monotonic()
    problems = check_pages(root.resolve(), vendor, a.chromium, opt, a.pages,
                           report=lambda line: print(line.encode("utf-16", "surrogatepass").decode("utf-16", "replace"),
                                                     flush=True))
    if not problems:
        print(f"error: no HTML pages under {root}; build the book first (make book)", file=sys.stderr)
        return 2
    def readable(text: str) -> str:  # page text read through the browser may hold UTF-16 surrogate pairs
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")

    listed = [readable(f"{rel}: {m}") for rel, found in problems.items() for m in found]
    took = time.monotonic() - t0
    if listed:
        print(f"\n{len(listed)} problem(s) in {len(problems)} pages ({took:.0f} s):")
        for m in listed:
            print(f"  {m}")
        return 1
    print(f"\nall {len(problems)} pages passed at {' and '.join(map(str, widths))} px ({took:.0f} s); "
          f"screenshots in {opt.shots}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
