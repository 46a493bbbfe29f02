"""Open every page of the built book in headless Chromium; screenshot it; list what is broken.

    python tests/browser/check_book.py [_build/html] [--screenshots _build/screenshots]

Not part of the quick test suite (pytest does not collect this file: no ``test_`` names, and
tests/browser/conftest.py ignores the folder). Needs Debian's Chromium:
``apt-get install -y chromium`` (executable /usr/bin/chromium; ``--chromium PATH`` for another).

How: the book folder is served on a free localhost port (``http.server`` in a thread). Each
chapter page (every ``book/*.html``) is opened twice with ``chromium --headless``:
``--screenshot`` saves a picture, and ``--dump-dom`` of a small checker page, which loads the
chapter in a same-origin iframe, lets its JavaScript run (``--virtual-time-budget``) and writes
what it finds into its own DOM, where Python reads it. Problems found:

* a Python error in an output (a traceback output, ``Traceback (most recent call last)`` in a cell
  output, or a docutils system message left in the page);
* a missing image (an ``<img>`` whose ``naturalWidth`` is 0 once the page has loaded);
* a broken internal link (an href to a local file that the server does not have, or to an anchor
  ``#id`` that the target page does not define);
* an empty widget area (a widget view output whose rendered container has no children).
  Widgets are drawn by JavaScript fetched from a CDN (require.js and @jupyter-widgets/html-manager's
  embed-amd.js). Offline, pass ``--vendor-js DIR`` with local copies of ``require.min.js`` and
  ``embed-amd.js`` (from the npm packages requirejs and @jupyter-widgets/html-manager, the
  versions the page names): the server then rewrites the pages to load those, so the widgets
  really render from the state embedded in the page. Without it, when the CDN cannot be reached,
  empty widget areas are listed as warnings, not failures, unless ``--strict-widgets`` is given.

Exit status: 0 when no problem is found, 1 otherwise (the problems are listed), 2 on bad usage.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from bs4 import BeautifulSoup

CHECKER = "/__nplm_check__.html"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

# The checker page: loads ?page=... in an iframe, waits, then reports what the browser sees.
CHECKER_HTML = """<!doctype html><html><head><meta charset="utf-8"></head><body>
<pre id="result">pending</pre>
<iframe id="f" style="width:1280px;height:20000px;border:0"></iframe>
<script>
const page = new URLSearchParams(location.search).get("page");
const wait = Number(new URLSearchParams(location.search).get("wait") || 3000);
const f = document.getElementById("f");
f.onload = () => setTimeout(() => {
  const d = f.contentDocument, out = {images: [], widgets: [], loaded: true};
  for (const img of d.querySelectorAll("img")) {
    if (!img.complete || img.naturalWidth === 0) out.images.push(img.getAttribute("src"));
  }
  for (const s of d.querySelectorAll('script[type="%s"]')) {
    const prev = s.previousElementSibling;
    const area = prev && prev.classList.contains("widget-subarea") ? prev : null;
    let model = "";
    try { model = JSON.parse(s.textContent).model_id; } catch (e) {}
    out.widgets.push({model: model, rendered: !!(area && area.children.length > 0 &&
                                                area.getBoundingClientRect().height > 0)});
  }
  document.getElementById("result").textContent = JSON.stringify(out);
}, wait);
f.src = page;
</script></body></html>""" % WIDGET_VIEW


# --------------------------------------------------------------------------- serving
VENDOR = "/__vendor__/"
# a <script src="https://.../require.min.js" ...> or <script src="https://.../embed-amd.js" ...> tag
_CDN_SCRIPT = re.compile(r'<script([^>]*?)\ssrc="https?://[^"]*/(require(?:\.min)?\.js|embed-amd\.js)"([^>]*)>')


def _local_script(m: re.Match) -> str:
    attrs = re.sub(r'\s(integrity|crossorigin)="[^"]*"', "", m.group(1) + m.group(3))  # SRI hashes are the CDN's
    name = "require.min.js" if m.group(2).startswith("require") else m.group(2)
    return f'<script{attrs} src="{VENDOR}{name}">'


class _Handler(http.server.SimpleHTTPRequestHandler):
    vendor: Path | None = None  # folder with require.min.js and embed-amd.js, or None

    def _send(self, body: bytes, ctype: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802 (http.server's name)
        path = urllib.parse.urlsplit(self.path).path
        if path == CHECKER:
            return self._send(CHECKER_HTML.encode(), "text/html; charset=utf-8")
        if self.vendor is not None and path.startswith(VENDOR):
            f = self.vendor / Path(path[len(VENDOR):]).name
            if f.is_file():
                return self._send(f.read_bytes(), "application/javascript")
        if self.vendor is not None and path.endswith(".html"):
            f = Path(self.translate_path(path))
            if f.is_file():
                html = _CDN_SCRIPT.sub(_local_script, f.read_text(encoding="utf-8", errors="replace"))
                return self._send(html.encode(), "text/html; charset=utf-8")
        super().do_GET()

    def log_message(self, *args):  # quiet
        pass


def serve(root: Path, vendor: Path | None = None) -> tuple[http.server.ThreadingHTTPServer, str]:
    """Serve ``root`` on 127.0.0.1 at a free port, in a daemon thread. Returns (server, base URL)."""
    handler = functools.partial(type("Handler", (_Handler,), {"vendor": vendor}), directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


# --------------------------------------------------------------------------- chromium
def chromium(exe: str, args: list[str], budget_ms: int, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run headless Chromium once with a throw-away profile."""
    with tempfile.TemporaryDirectory(prefix="nplm-chromium-") as profile:
        cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-dev-shm-usage", "--hide-scrollbars", f"--user-data-dir={profile}",
               f"--virtual-time-budget={budget_ms}", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def browser_view(exe: str, base: str, page_url: str, budget_ms: int, wait_ms: int) -> dict | None:
    """What the browser sees on ``page_url`` (images not drawn, widget areas), or None on failure."""
    q = urllib.parse.urlencode({"page": page_url, "wait": wait_ms})
    res = chromium(exe, ["--dump-dom", f"{base}{CHECKER}?{q}"], budget_ms)
    pre = BeautifulSoup(res.stdout, "html.parser").find(id="result")
    try:
        return json.loads(pre.get_text()) if pre is not None else None
    except json.JSONDecodeError:
        return None


def screenshot(exe: str, url: str, out: Path, budget_ms: int) -> bool:
    out.parent.mkdir(parents=True, exist_ok=True)
    chromium(exe, [f"--screenshot={out}", "--window-size=1280,2000", url], budget_ms)
    return out.exists() and out.stat().st_size > 0


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
            continue  # external (not checked: the machine may be offline) or empty
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


@functools.lru_cache(maxsize=None)
def reachable(url: str) -> bool:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=5) as r:
            return r.status < 400
    except (urllib.error.URLError, OSError, ValueError):
        return False


def widget_scripts(soup: BeautifulSoup) -> list[str]:
    """External scripts a page loads to draw widgets (require.js, the html-manager bundle)."""
    return [s["src"] for s in soup.find_all("script", src=True)
            if s["src"].startswith("http") and ("require" in s["src"] or "html-manager" in s["src"])]


# --------------------------------------------------------------------------- driver
def chapter_pages(root: Path) -> list[Path]:
    pages = sorted((root / "book").glob("*.html"))
    if not pages:  # a book built without a book/ folder
        pages = sorted(p for p in root.glob("*.html") if p.stem not in ("genindex", "search", "py-modindex"))
    return pages


def check(root: Path, shots: Path, exe: str, budget_ms: int, wait_ms: int, strict_widgets: bool,
          vendor: Path | None = None) -> int:
    pages = chapter_pages(root)
    if not pages:
        print(f"error: no HTML pages under {root}; build the book first (make book)", file=sys.stderr)
        return 2
    server, base = serve(root, vendor)
    problems: list[str] = []
    warnings: list[str] = []
    try:
        for page in pages:
            rel = page.relative_to(root).as_posix()
            url = f"{base}/{rel}"
            soup = BeautifulSoup(page.read_text(encoding="utf-8", errors="replace"), "html.parser")
            found = python_errors(soup) + broken_links(soup, page.resolve(), root)
            view = browser_view(exe, base, url, budget_ms, wait_ms)
            if view is None:
                found.append("the page did not load in Chromium (no result from the checker page)")
            else:
                found += [f"missing image: {src}" for src in view["images"]]
                empty = [w["model"] for w in view["widgets"] if not w["rendered"]]
                if empty:
                    scripts = widget_scripts(soup)
                    offline = [] if vendor is not None else [s for s in scripts if not reachable(s)]
                    msg = f"{len(empty)} of {len(view['widgets'])} widget areas rendered nothing"
                    if offline and not strict_widgets:
                        warnings.append(f"{rel}: {msg}: the widget JavaScript cannot be fetched from this "
                                        f"machine ({offline[0]}); check it online or pass --strict-widgets")
                    else:
                        found.append(msg)
            shot = shots / (Path(rel).with_suffix(".png").as_posix().replace("/", "__"))
            if not screenshot(exe, url, shot, budget_ms):
                found.append("no screenshot was written")
            n_widgets = len(view["widgets"]) if view else 0
            status = "ok" if not found else f"{len(found)} problem(s)"
            print(f"{rel:<40} {status:<14} images/widgets checked in browser: "
                  f"{'yes' if view else 'no'}, widgets {n_widgets}, screenshot {shot}", flush=True)
            problems += [f"{rel}: {p}" for p in found]
    finally:
        server.shutdown()
    for w in warnings:
        print(f"warning: {w}")
    if problems:
        print(f"\n{len(problems)} problem(s) in {len(pages)} pages:")
        for p in problems:
            print(f"  {p}")
        return 1
    print(f"\nall {len(pages)} pages passed; screenshots in {shots}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Check the built book in headless Chromium.")
    ap.add_argument("html", nargs="?", default="_build/html", help="the built book (default _build/html)")
    ap.add_argument("--screenshots", default="_build/screenshots", help="folder for one PNG per page")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium",
                    help="Chromium executable (default: chromium on PATH)")
    ap.add_argument("--budget", type=int, default=8000, help="virtual time budget per page, ms (default 8000)")
    ap.add_argument("--wait", type=int, default=3000, help="ms after load before inspecting (default 3000)")
    ap.add_argument("--strict-widgets", action="store_true",
                    help="fail on empty widget areas even when the widget JavaScript is unreachable")
    ap.add_argument("--vendor-js", default=None, metavar="DIR",
                    help="serve require.min.js and embed-amd.js from DIR instead of the CDN (offline checks)")
    a = ap.parse_args(argv)
    vendor = Path(a.vendor_js) if a.vendor_js else None
    if vendor is not None and not all((vendor / f).is_file() for f in ("require.min.js", "embed-amd.js")):
        print(f"error: --vendor-js {vendor} must hold require.min.js and embed-amd.js", file=sys.stderr)
        return 2
    root = Path(a.html)
    if not root.is_dir():
        print(f"error: {root} is not a folder; build the book first (make book)", file=sys.stderr)
        return 2
    if not Path(a.chromium).exists():
        print(f"error: Chromium not found at {a.chromium}; install it: apt-get install -y chromium", file=sys.stderr)
        return 2
    return check(root.resolve(), Path(a.screenshots), a.chromium, a.budget, a.wait, a.strict_widgets, vendor)


if __name__ == "__main__":
    sys.exit(main())
