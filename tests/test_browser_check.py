"""The parts of the browser check that need no browser (tests/browser/check_book.py: error outputs, links,
the CDN addresses served from local copies, versions), and what the rendered book needs to work with
no kernel: the embedding explorer driven by links that run in the browser, labels that do not pile up.

(The browser run itself is `make browser-check`; it needs Chromium and is not in the quick suite.)"""

import importlib.util
import re
import sys
from pathlib import Path

import numpy as np

from bs4 import BeautifulSoup

_spec = importlib.util.spec_from_file_location("check_book", Path(__file__).parent / "browser" / "check_book.py")
cb = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = cb  # (dataclasses look their module up)
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
                 '<a href="mailto:x@y">7</a> <a href="../../outside.html">8</a>'
                 '<a href="https://mybinder.org/v2/gh/o/r/main?urlpath=lab/tree/./book/a.ipynb">9</a>')
    found = cb.broken_links(soup, page, tmp_path)
    assert found == ["broken anchor: a.html#nope (no id 'nope' in a.html)",
                     "broken link: gone.html (no book/gone.html)",
                     "broken anchor: #missing (no id 'missing' in b.html)",
                     "link outside the book: ../../outside.html",
                     "malformed link: https://mybinder.org/v2/gh/o/r/main?urlpath=lab/tree/./book/a.ipynb"]


def test_cdn_addresses_are_served_from_local_copies():
    html = ('<script src="https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.4/require.min.js" '
            'integrity="sha256-abc" crossorigin="anonymous"></script>'
            '<script data-jupyter-widgets-cdn="https://cdn.jsdelivr.net/npm/" '
            'src="https://cdn.jsdelivr.net/npm/@jupyter-widgets/html-manager@1.0.6/dist/embed-amd.js"></script>'
            '<script defer src="https://cdn.jsdelivr.net/npm/mathjax@3.2.2/es5/tex-mml-chtml.js"></script>'
            '<script src="_static/other.js" integrity="sha256-kept"></script>')
    out = cb.localise(html)
    assert '<script src="/__vendor__/require.min.js">' in out
    assert 'src="/__vendor__/html-manager/dist/embed-amd.js"' in out
    assert 'src="/__vendor__/mathjax/tex-mml-chtml.js"' in out
    assert "sha256-abc" not in out and 'src="_static/other.js" integrity="sha256-kept"' in out
    # the book's own script names the widget manager's CDN folder: mapped too
    js = 'var HTML_MANAGER = "https://cdn.jsdelivr.net/npm/@jupyter-widgets/html-manager@1.0.6";'
    assert cb.localise(js) == 'var HTML_MANAGER = "/__vendor__/html-manager";'


def test_versions_the_page_names_must_match_the_local_copies():
    have = {"requirejs": "2.3.4", "html-manager": "1.0.6", "mathjax": "3.2.2"}
    page = ('https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.4/require.min.js '
            'https://cdn.jsdelivr.net/npm/@jupyter-widgets/html-manager@1.0.6/dist/embed-amd.js '
            'https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js')
    assert cb.version_mismatches(page, have) == []  # mathjax@3 is any 3.x
    wrong = page.replace("html-manager@1.0.6", "html-manager@1.0.7").replace("mathjax@3/", "mathjax@4/")
    found = cb.version_mismatches(wrong, have)
    assert len(found) == 2 and "html-manager 1.0.7" in found[0] and "mathjax 4" in found[1]


def test_the_books_pinned_versions_are_the_vendored_ones():
    """_config.yml, the widget glue script and the Makefile name the same versions."""
    root = Path(__file__).resolve().parents[1]
    config = (root / "_config.yml").read_text()
    glue = (root / "book" / "_static" / "nplm-widgets.js").read_text()
    make = (root / "Makefile").read_text()
    versions = {m.group(1): m.group(2) for m in re.finditer(r"^(\w+)_VERSION := (\S+)$", make, re.M)}
    assert f"require.js/{versions['REQUIREJS']}/" in config
    assert f"html-manager@{versions['HTML_MANAGER']}/dist/embed-amd.js" in config
    assert f"html-manager@{versions['HTML_MANAGER']}\"" in glue
    assert f"mathjax@{versions['MATHJAX']}/es5/" in config
    assert cb.version_mismatches(config + glue, {"requirejs": versions["REQUIREJS"], "html-manager":
                                                 versions["HTML_MANAGER"], "mathjax": versions["MATHJAX"]}) == []


# --------------------------------------------------------------------------- what the static page needs
def _snapshots(n_snaps=7, N=6, seed=0):
    from nplm_edu.analysis import viz

    rng = np.random.default_rng(seed)
    snaps = viz.Snapshots()

    class Fake:
        params = {}

    for t in range(n_snaps):
        Fake.params = {"C": rng.standard_normal((N, 2)) * (t + 1)}
        snaps(25 * t, Fake)
    return snaps


WORDS = ["cat", "dog", "the", "a", "<p>", "room"]
LABELS = ["animal", "animal", "det", "det", None, "place"]


def test_explorer_works_without_a_kernel():
    """Slider and word picker are tied to what is shown by jslink (which runs in the browser), not
    by Python callbacks: a static page responds as a live notebook does."""
    import ipywidgets as widgets

    from nplm_edu.analysis import viz

    snaps = _snapshots()
    box = viz.explorer(snaps, WORDS, LABELS, k=2, start="dog")
    (slider, picker), (pictures, legend), styles = box.children[0].children, box.children[1].children, box.children[2]
    assert isinstance(pictures, widgets.Stack) and isinstance(styles, widgets.Stack)
    assert len(pictures.children) == len(snaps) and slider.max == len(snaps) - 1
    assert pictures.selected_index == slider.value == len(snaps) - 1
    assert len(styles.children) == len(WORDS) + 1 and styles.selected_index == picker.index == 2
    links = {(ln.source[0].model_id, ln.source[1], ln.target[0].model_id, ln.target[1]) for ln in box.links}
    assert links == {(slider.model_id, "value", pictures.model_id, "selected_index"),
                     (picker.model_id, "index", styles.model_id, "selected_index")}
    assert all(ln._model_name == "LinkModel" for ln in box.links)  # links in the browser, not Python observers
    frame = pictures.children[-1].value
    assert "after 150 updates" in frame and "&lt;p&gt;" in frame and "<p>" not in frame  # words escaped
    for j in range(len(WORDS)):
        assert f"class='hl w{j}'" in frame  # every word's neighbour lines, hidden until chosen
    uid = frame.split("'")[1]
    assert styles.children[0].value == "<style></style>"  # "(none)": nothing highlighted
    assert f".{uid} .hl.w1{{display:inline}}" in styles.children[2].value  # "dog" is word 1
    assert f".{uid} .hl{{display:none;" in legend.value


def test_explorer_draws_at_most_frames_snapshots_early_ones_densest():
    from nplm_edu.analysis import viz

    from nplm_edu.analysis.explorer import _frame_indices

    which = _frame_indices(301, 40)
    assert which[:20] == list(range(20)) and which[-1] == 300 and len(which) <= 40
    assert np.all(np.diff(which) > 0) and np.all(np.diff(np.diff(which[19:])) >= -1)  # gaps grow
    box = viz.explorer(_snapshots(n_snaps=12), WORDS, LABELS, frames=5)
    assert len(box.children[1].children[0].children) == 5


def test_spread_labels_keeps_labels_apart_and_in_bounds():
    from nplm_edu.analysis import viz

    rng = np.random.default_rng(1)
    xy = 200 + rng.standard_normal((30, 2)) * 25  # a crowded cluster in a 400 x 400 area
    w, h = rng.uniform(20, 60, 30), 14
    c = viz.spread_labels(xy, w, h, (0, 0, 400, 400))
    boxes = np.hstack([c - np.stack([w / 2, np.full(30, h / 2)], 1), c + np.stack([w / 2, np.full(30, h / 2)], 1)])
    ix = np.minimum(boxes[:, None, 2], boxes[None, :, 2]) - np.maximum(boxes[:, None, 0], boxes[None, :, 0])
    iy = np.minimum(boxes[:, None, 3], boxes[None, :, 3]) - np.maximum(boxes[:, None, 1], boxes[None, :, 1])
    overlap = (ix > 0.5) & (iy > 0.5)
    np.fill_diagonal(overlap, False)
    assert not overlap.any()
    assert boxes[:, :2].min() >= 0 and boxes[:, 2:].max() <= 400


def test_spread_labels_keeps_clear_of_points_drawn_larger():
    from nplm_edu.analysis import viz

    rng = np.random.default_rng(2)
    xy = 200 + rng.standard_normal((12, 2)) * 50
    w, h = np.full(12, 30.0), 12
    radius = np.full(12, 3.0)
    radius[:3] = 12.0  # three points drawn large (a ring, a star)
    c = viz.spread_labels(xy, w, h, (0, 0, 400, 400), point=radius)
    for i in range(3):  # no label box overlaps the square around a large point
        ix = np.minimum(c[:, 0] + w / 2, xy[i, 0] + radius[i]) - np.maximum(c[:, 0] - w / 2, xy[i, 0] - radius[i])
        iy = np.minimum(c[:, 1] + h / 2, xy[i, 1] + radius[i]) - np.maximum(c[:, 1] - h / 2, xy[i, 1] - radius[i])
        assert not np.any((ix > 0.5) & (iy > 0.5)), i
    same = viz.spread_labels(xy, w, h, (0, 0, 400, 400), point=3.0)
    assert np.array_equal(same, viz.spread_labels(xy, w, h, (0, 0, 400, 400), point=np.full(12, 3.0)))


def test_the_check_reads_every_page_at_a_desktop_and_a_phone_width_and_each_rule_has_a_failing_page():
    """Each rule the browser check applies (tests/browser/inspect_page.js) is exercised by a page of its
    self-test that must fail it; the widths are a desktop's and a phone's."""
    _st = importlib.util.spec_from_file_location("selftest", Path(__file__).parent / "browser" / "selftest.py")
    selftest = importlib.util.module_from_spec(_st)
    _st.loader.exec_module(selftest)
    assert cb.Options().widths == (1280, 390) and cb.Options().narrow_below > 390
    expected = [w for _, words in selftest.CASES.values() for w in words]
    rules = ["printed output wider than its block", "the page is wider than the viewport", "content cut off",
             "a table with no cue that it scrolls", "too small for a finger", "too short for a finger",
             "scrolls sideways", "wider than the column", "image shown at", "changes nothing", "raw TeX",
             "cut off at the screen's edge", "text in a widget drawn at", "widget areas drew nothing"]
    for phrase in rules:
        assert phrase in cb.INSPECT_JS or phrase in Path(cb.__file__).read_text(), phrase
        assert any(phrase in w for w in expected), f"no self-test page must fail {phrase!r}"
    # controls are moved by input events (the protocol's Input domain), never by a value set in JavaScript
    assert "selectedIndex =" not in cb.INSPECT_JS and ".value =" not in cb.INSPECT_JS
    assert "no-check" not in cb.INSPECT_JS  # no class of block is exempt from the printed-width rule
    assert "page.key(" in Path(cb.__file__).read_text() and "page.drag(" in Path(cb.__file__).read_text()


def test_bad_widths_are_refused(tmp_path, capsys):
    (tmp_path / "html").mkdir()
    assert cb.main([str(tmp_path / "html"), "--widths", "1280,phone", "--vendor-js", str(tmp_path)]) == 2
    assert "--widths takes whole numbers separated by commas, got '1280,phone'" in capsys.readouterr().err
