"""No code cell of the book continues a statement with a deep indent, which a phone wraps into a tall gap.

The rule. In every code cell whose input a reader can see (all but those tagged ``remove-input`` or
``remove-cell``; a ``hide-input`` cell is folded, but a reader may open it), no continuation line
is indented more than LIMIT = 16 spaces. A continuation line is a line of a statement begun on an
earlier line: inside an open bracket, after a backslash, or inside a multi-line string. Code
aligned under an opening bracket (``show_table(body, [[...],`` then ``                  [...]]``)
breaks after the bracket instead and hangs its lines by 4 (or 8, under a ``for``/``if``/``with``
line, as PEP 8 advises).

Why 16. book/_static/nplm.css lets a code block's long lines wrap at the column's edge
(``white-space: break-spaces``), and book/_static/nplm.js continues each wrapped row of a line
indented k spaces at k + 4 columns (its hanging indent, ``HANG``). On a phone 390 px wide the
code block's inner width is 322 px and its 14 px monospace digit 8.43 px: 38 columns (measured
in Chromium at 390 px; 77 columns at 1280 px). A line indented k therefore leaves 38 - (k + 4)
columns to each wrapped row: 18 at k = 16, half the block; 10 at k = 24; none from k = 34 on,
where every character takes a row of its own, a tall blank gap down the page. Sixteen is a
statement three blocks deep (12 spaces) with a hanging indent of 4; deeper code takes its
continuation out of the block (a name for a list, a helper) rather than across the column.

Long lines as such are not a rule here: a line longer than the phone's 38 columns wraps, under
its own start, and reads on; one longer than 77 wraps on a desktop too. The book has hundreds
of them, which its CSS and script are made to show.

The test reads the notebooks' JSON only (no kernel) and lists every offending line.
"""

import io
import json
import re
import tokenize
from pathlib import Path

import pytest

BOOK = Path(__file__).resolve().parents[1] / "book"
NOTEBOOKS = sorted(BOOK.glob("*.ipynb"))
LIMIT = 16  # spaces; see the module's docstring
NOT_SHOWN = {"remove-input", "remove-cell"}  # tags whose cell input the built page never shows


def shown_code_cells(nb: dict):
    """(index, source) of every code cell whose input the built page shows, folded or not."""
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code" and not NOT_SHOWN & set(cell.get("metadata", {}).get("tags", [])):
            yield i, "".join(cell["source"])


def continuation_lines(source: str) -> set[int]:
    """Line numbers (from 1) of the lines that continue a statement begun on an earlier line."""
    lines = source.split("\n")
    # IPython's magics and shell escapes are no Python: read them as an empty statement
    python = "\n".join("pass" if re.match(r"\s*[%!]", line) else line for line in lines)
    rows, depth, seen = set(), 0, set()
    for tok in tokenize.generate_tokens(io.StringIO(python + "\n").readline):
        row = tok.start[0]
        if row not in seen:  # the first token of a row: is a bracket still open?
            seen.add(row)
            if depth > 0:
                rows.add(row)
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
        elif tok.type != tokenize.OP and tok.end[0] > tok.start[0]:  # a multi-line string (or f-string part)
            rows.update(range(row + 1, tok.end[0] + 1))
    rows.update(k + 1 for k, line in enumerate(lines[:-1], start=1) if line.rstrip().endswith("\\"))
    return rows


def deep_lines(source: str) -> list[tuple[int, int, str]]:
    """(line number, indent, line) of every continuation line indented more than LIMIT spaces."""
    lines = source.split("\n")
    found = []
    for k in sorted(continuation_lines(source)):
        line = lines[k - 1]
        indent = len(line) - len(line.lstrip(" "))
        if line.strip() and indent > LIMIT:
            found.append((k, indent, line))
    return found


def test_continuation_lines_are_found():
    source = (
        "x = f(a,\n"
        "      b)\n"
        "if x:\n"
        "                    y = 1\n"  # deep, but a statement of its own
        's = """one\n'
        '                         two"""\n'
        "z = 1 + \\\n"
        "    2\n"
        "%matplotlib inline\n"
        "w = g([1,\n"
        "       2])\n")
    assert continuation_lines(source) == {2, 6, 8, 11}
    assert [(k, indent) for k, indent, _ in deep_lines(source)] == [(6, 25)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_no_deeply_indented_continuation_line(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    found = [f"cell {i}, line {k}: indented {indent}: {line.strip()[:60]}"
             for i, source in shown_code_cells(nb) for k, indent, line in deep_lines(source)]
    assert not found, (
        f"{path.name}: {len(found)} continuation line(s) indented more than {LIMIT} spaces, which a phone "
        "wraps into a tall gap; break after the opening bracket and hang the lines by 4:\n"
        + "\n".join(found))
