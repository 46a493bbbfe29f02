"""The parts of tests/browser/check_book.py that need no browser: error outputs, links, CDN rewriting.

(The browser run itself is `make browser-check`; it needs Chromium and is not in the quick suite.)"""

import importlib.util
from pathlib import Path

from bs4 import BeautifulSoup

_spec = importlib.util.spec_from_file_location("check_book", Path(__file__).parent / "browser" / "check_book.py")
cb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cb)


def _soup(html):
    return BeautifulSoup(html, "html.parser")


def test_python_errors_finds_tracebacks_and_system_messages():
    ok = _soup('<div class="cell_output"><pre>all good</pre></div>')
    assert cb.python_errors(ok) == []
    tb = _soup('<div class="cell_output docutils container"><div class="output traceback highlight-ipythontb">'
               '<pre>Traceback (most recent call last): ZeroDivisionError</pre></div></div>')
    assert len(cb.python_errors(tb)) == 1
    plain = _soup('<div class="cell_output"><pre>Traceback (most recent call last):\n  x</pre></div>')
    assert len(cb.python_errors(plain)) == 1
    sysmsg = _soup('<div class="system-message"><p>Unknown directive type "exercize".</p></div>')
    assert "Unknown directive" in cb.python_errors(sysmsg)[0]


def test_broken_links_and_anchors(tmp_path):
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "a.html").write_text('<h1 id="top">A</h1>')
    page = tmp_path / "book" / "b.html"
    page.write_text('<h1 id="here">B</h1>')
    soup = _soup('<a href="a.html#top">1</a> <a href="a.html#nope">2</a> <a href="gone.html">3</a>'
                 '<a href="#here">4</a> <a href="#missing">5</a> <a href="https://example.org/x">6</a>'
                 '<a href="mailto:x@y">7</a> <a href="../../outside.html">8</a>')
    found = cb.broken_links(soup, page, tmp_path)
    assert found == ["broken anchor: a.html#nope (no id 'nope' in a.html)",
                     "broken link: gone.html (no book/gone.html)",
                     "broken anchor: #missing (no id 'missing' in b.html)",
                     "link outside the book: ../../outside.html"]


def test_cdn_scripts_are_rewritten_to_local_copies():
    html = ('<script src="https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.4/require.min.js" '
            'integrity="sha256-abc" crossorigin="anonymous"></script>'
            '<script data-jupyter-widgets-cdn="https://cdn.jsdelivr.net/npm/" '
            'src="https://cdn.jsdelivr.net/npm/@jupyter-widgets/html-manager@1.0.6/dist/embed-amd.js"></script>'
            '<script src="_static/other.js"></script>')
    out = cb._CDN_SCRIPT.sub(cb._local_script, html)
    assert '<script src="/__vendor__/require.min.js">' in out
    assert 'src="/__vendor__/embed-amd.js"' in out and "integrity" not in out
    assert '<script src="_static/other.js">' in out
