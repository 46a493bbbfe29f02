"""Every command the README and the chapters tell a reader to run still runs as written.

The commands are read from the README's code and the chapters' markdown (code blocks and inline
code, lines continued with a backslash joined): each ``python -m nplm_edu ...`` must parse with
today's command line (the same check ``results --check`` makes of the results files' commands),
each benchmark script must exist and define every option given to it, and each ``make`` target
must be one the Makefile has.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from types import SimpleNamespace

import pytest

from nplm_edu.cli.results import stale_commands

ROOT = Path(__file__).resolve().parent.parent


def code_pieces(markdown: str) -> list[str]:
    """The lines of code in ``markdown``: its code blocks and inline code spans, with backslash-continued
    lines joined. A MyST directive's fence (```{exercise}) holds markdown, read like the rest."""
    code, prose, fences = [], [], []  # fences: True for a code block, False for a directive, innermost last
    for line in markdown.replace("\\\n", " ").splitlines():
        fence = re.match(r"\s*(`{3,})(.*)$", line)
        if fence and not fence.group(2).strip() and fences:  # a closing fence
            fences.pop()
        elif fence and not (fences and fences[-1]):  # an opening fence, outside a code block
            fences.append(not fence.group(2).strip().startswith("{"))
        elif fences and fences[-1]:
            code.append(line)
        else:
            prose.append(line)
    spans = [s.replace("\n", " ") for s in re.findall(r"(?<!`)`([^`]+)`(?!`)", "\n".join(prose))]
    return [line for line in code + spans if line.strip()]


def reader_texts() -> dict[str, str]:
    """{where: markdown} for the README and every markdown cell of every chapter."""
    texts = {"README.md": (ROOT / "README.md").read_text()}
    for path in sorted((ROOT / "book").glob("*.ipynb")):
        for i, cell in enumerate(json.loads(path.read_text())["cells"]):
            if cell["cell_type"] == "markdown":
                texts[f"{path.name} cell {i}"] = "".join(cell["source"])
    return texts


def commands(pattern: str) -> list[tuple[str, str]]:
    """(where, code line) of every line of code the reader is shown that matches ``pattern``."""
    found = [(where, line.strip()) for where, text in reader_texts().items()
             for line in code_pieces(text) if re.search(pattern, line)]
    return found


def words_of(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)  # drops a trailing # comment
    lexer.whitespace_split = True
    return list(lexer)


def test_code_pieces_finds_blocks_spans_and_continued_lines():
    md = ("Run `python -m nplm_edu corpus info` first.\n\n```bash\npython -m nplm_edu train \\\n"
          "  --epochs 2   # two\nmake book\n```\nand ``not this``.")
    assert code_pieces(md) == ["python -m nplm_edu train    --epochs 2   # two", "make book",
                               "python -m nplm_edu corpus info"]


def test_the_chapters_and_readme_show_commands():
    """The checks below read something: the README and the chapters name these commands."""
    assert len(commands(r"-m nplm_edu \w")) >= 25
    assert len(commands(r"benchmarks/bench_\w+\.py")) >= 8
    assert len(commands(r"\bmake [a-z]")) >= 5


def test_every_nplm_edu_command_shown_to_readers_parses():
    shown = commands(r"-m nplm_edu \w")
    entries = [SimpleNamespace(path=where, commands=[line]) for where, line in shown]
    assert stale_commands(entries) == []


def test_a_command_the_command_line_refuses_is_reported():
    """The check above can fail: an option that does not exist, or a value argparse refuses."""
    entries = [SimpleNamespace(path="x", commands=["python -m nplm_edu train --no-such-option 1"]),
               SimpleNamespace(path="y", commands=["mpiexec -n 2 python -m nplm_edu train --dtype float16"]),
               SimpleNamespace(path="z", commands=["python -m nplm_edu corpus info --corpus brown  # fine"])]
    bad = stale_commands(entries)
    assert len(bad) == 2 and "--no-such-option" in bad[0] and "float16" in bad[1]


def benchmark_problems(shown) -> list[str]:
    """Benchmarks that do not exist, or options they do not define, in (where, line) pairs."""
    bad = []
    for where, line in shown:
        words = words_of(line)
        for i, w in enumerate(words):
            if not re.fullmatch(r"benchmarks/bench_\w+\.py", w):
                continue
            script = ROOT / w
            if not script.exists():
                bad.append(f"{where}: {w} does not exist")
                continue
            source = script.read_text()
            for option in words[i + 1:]:
                if option in ("&&", "||", ";", "|"):
                    break
                name = option.split("=")[0]
                if name.startswith("--") and f'"{name}"' not in source:
                    bad.append(f"{where}: {w} defines no {name}")
    return bad


def test_every_benchmark_shown_to_readers_exists_with_its_options():
    assert benchmark_problems(commands(r"benchmarks/bench_\w+\.py")) == []


def test_a_missing_benchmark_or_option_is_reported():
    bad = benchmark_problems([("x", "python benchmarks/bench_scale.py --sizes 1e6 --no-such-option"),
                              ("y", "python benchmarks/bench_nothing.py")])
    assert bad == ["x: benchmarks/bench_scale.py defines no --no-such-option",
                   "y: benchmarks/bench_nothing.py does not exist"]


@pytest.mark.parametrize("where, line", commands(r"(^|\s)make [a-z]"))
def test_every_make_target_shown_to_readers_exists(where, line):
    targets = set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(), re.M))
    words = words_of(line)
    named = [words[i + 1] for i, w in enumerate(words[:-1]) if w == "make" and not words[i + 1].startswith("-")]
    assert named and set(named) <= targets, (where, line, set(named) - targets)
