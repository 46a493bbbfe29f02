"""What a chapter shows of a results file: tables that fit the page, and the command that made it.

Every heavy number of the book comes from a file in ``data/results/`` that records the command
which wrote it (:mod:`nplm_edu.experiments.common`). A chapter prints that command so a reader can
rerun it, as a reader would type it (:func:`readable_command`), and shows the numbers as HTML
tables (:func:`show_table`; the book's stylesheet gives the class ``nplm-table`` its look), and
its sentences as text that reflows to the page (:func:`show_lines`; lists of names in them by
:func:`listed`), not as lines of printed text that wrap on a narrow page.
"""

from __future__ import annotations

import html
import re
import shlex
from pathlib import Path

SCRATCH = ("--runs-dir", "--tmp")  # options that only say where scratch files (checkpoints, sorts) went
PROGRAMS = ("--lmplz",)  # options naming a program: its name is what a reader needs, not our path to it


def readable_command(command: str) -> str:
    """``command`` without its scratch locations, and with programs by name.

    >>> readable_command("python -m nplm_edu reproduce central-claim --force --runs-dir /tmp/x/runs")
    'python -m nplm_edu reproduce central-claim --force'
    >>> readable_command("python benchmarks/bench_scale.py --lmplz /opt/kenlm/bin/lmplz --tmp /tmp/s --json a.json")
    'python benchmarks/bench_scale.py --lmplz lmplz --json a.json'
    """
    try:
        words = shlex.split(command)
    except ValueError:  # a command recorded by joining its words with spaces, one of them holding a quote
        words = command.split()
    out, skip = [], False
    for i, word in enumerate(words):
        if skip:
            skip = False
            continue
        option, eq, value = word.partition("=")
        if option in SCRATCH:
            skip = not eq  # "--tmp DIR" drops two words, "--tmp=DIR" one
            continue
        if i and words[i - 1] in PROGRAMS:
            word = Path(word).name
        elif eq and option in PROGRAMS:
            word = f"{option}={Path(value).name}"
        out.append(word)
    return shlex.join(out)


def _row(cells, tag: str) -> str:
    """One <tr>: a cell is text or (text, columns it spans); numbers (and blanks) are aligned right."""
    out = ""
    for cell in cells:
        text, span = cell if isinstance(cell, tuple) else (cell, 1)
        num = ' class="num"' if re.fullmatch(r"[-+x]?[\d,.]*%?", str(text)) else ""
        out += f"<{tag}{num}{f' colspan={span}' if span > 1 else ''}>{html.escape(str(text))}</{tag}>"
    return f"<tr>{out}</tr>"


def table_html(body, head, caption: str = "") -> str:
    """Rows ``body`` under header rows ``head`` as an HTML table that fits the page.

    >>> table_html([["MLP1", "252.3"]], [["row", "test"]])
    '<table class="nplm-table"><thead><tr><th>row</th><th>test</th></tr></thead><tbody><tr><td>MLP1</td><td class="num">252.3</td></tr></tbody></table>'
    """
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return (f'<table class="nplm-table">{cap}<thead>{"".join(_row(r, "th") for r in head)}</thead>'
            f'<tbody>{"".join(_row(r, "td") for r in body)}</tbody></table>')


def show_table(body, head, caption: str = "") -> None:
    """Display :func:`table_html` in a notebook."""
    from IPython.display import HTML, display

    display(HTML(table_html(body, head, caption)))


def lines_html(*lines: str) -> str:
    """``lines`` as HTML, one line each, that reflow to the width of the page.

    >>> lines_html("valid <unk> rate", "4.24%")
    '<div class="nplm-lines"><div>valid &lt;unk&gt; rate</div><div>4.24%</div></div>'
    """
    return '<div class="nplm-lines">' + "".join(f"<div>{html.escape(str(line))}</div>" for line in lines) + "</div>"


def show_lines(*lines: str) -> None:
    """Display :func:`lines_html` in a notebook: sentences a cell reports, readable on a phone."""
    from IPython.display import HTML, display

    display(HTML(lines_html(*lines)))


def pm(stat: dict | None, digits: int = 1) -> str:
    """'251.3 ± 2.1' from a mean_std dict (the mean alone for one seed; '' for none).

    >>> pm({"mean": 251.34, "std": 2.06, "n": 3}), pm({"mean": 251.34, "std": None, "n": 1})
    ('251.3 ± 2.1', '251.3')
    """
    if not stat or stat.get("mean") is None:
        return ""
    mean = f"{stat['mean']:,.{digits}f}"
    return mean if stat.get("std") is None else f"{mean} ± {stat['std']:,.{digits}f}"


def name_cell(name, code: bool = True) -> str:
    """One item of :func:`listed`: a name as code with what follows it ('`b` (2 s)'); without ``code``, a
    number or word as text (a float by ``:g``)."""
    if not code:
        return f"{name:g}" if isinstance(name, float) else str(name)
    head, _, rest = str(name).partition(" ")
    return f"`{head}`" + (f" {rest}" if rest else "")


def listed(names, code: bool = True) -> str:
    """'`a`', '`a` and `b`', '`a`, `b` and `c`' (names as code, each with what follows it; without ``code``, words).

    >>> listed(["a"]), listed(["a", "b (2 s)", "c"]), listed([0.3, "1", 3], code=False)
    ('`a`', '`a`, `b` (2 s) and `c`', '0.3, 1 and 3')
    """
    cells = [name_cell(n, code) for n in names]
    return cells[0] if len(cells) == 1 else ", ".join(cells[:-1]) + " and " + cells[-1]
