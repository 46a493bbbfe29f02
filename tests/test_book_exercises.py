"""Every chapter asks its reader to build something, and shows its answer only on request.

An exercise's solution is a ``{solution}`` directive with ``:class: dropdown`` (hidden until the
reader opens it); an implement-or-extend exercise's solution is followed by a code cell tagged
``hide-cell`` that does the work. That cell is stored executed, without an error, and nbval holds
its outputs equal to a fresh run (``make test``), so every solution shown is one that runs and
gives what it prints. This file checks the structure: each chapter (its page and the pages of its
sections, as _toc.yml lists them) has at least one such solution, and no solution shows without a toggle.
"""

import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SOLUTION = re.compile(r"```\{solution\}[^\n]*\n:class: dropdown\n")


def chapters() -> dict[str, list[Path]]:
    """Each numbered chapter of _toc.yml with its pages: the chapter's notebook, then its sections'."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    out = {}
    for part in toc["parts"]:
        for ch in part["chapters"]:
            pages = [ROOT / f"{f}.ipynb" for f in [ch["file"], *[s["file"] for s in ch.get("sections", [])]]]
            if pages[0].exists() and pages[0].stem[:2].isdigit():
                out[pages[0].stem] = pages
    return out


CHAPTERS = chapters()
PAGES = sorted(p for pages in CHAPTERS.values() for p in pages)


def solved_in_code(path: Path) -> list[int]:
    """Indices of the hidden code cells that carry out a solution (the cell right after its text)."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [i + 1 for i, c in enumerate(cells[:-1])
            if c["cell_type"] == "markdown" and SOLUTION.search("".join(c["source"]))
            and cells[i + 1]["cell_type"] == "code" and "hide-cell" in cells[i + 1]["metadata"].get("tags", [])]


def test_the_book_has_chapters():
    assert len(CHAPTERS) >= 11


@pytest.mark.parametrize("path", PAGES, ids=[p.stem for p in PAGES])
def test_every_solution_is_hidden(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    text = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    assert text.count("```{solution}") == len(SOLUTION.findall(text)), f"{path.name}: a solution shows without a toggle"
    assert text.count("```{exercise}") >= text.count("```{solution}"), f"{path.name}: a solution without its exercise"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=list(CHAPTERS))
def test_every_chapter_has_a_solution_that_runs(chapter, pages=None):
    solved = [(path, i) for path in (pages or CHAPTERS[chapter]) for i in solved_in_code(path)]
    assert solved, f"{chapter}: no exercise whose solution is carried out by a hidden code cell"
    for path, i in solved:
        outputs = json.loads(path.read_text(encoding="utf-8"))["cells"][i].get("outputs", [])
        assert outputs, f"{path.name}: the solution in cell {i} is stored unexecuted"
        assert not [o for o in outputs if o["output_type"] == "error"], f"{path.name}: the solution in cell {i} fails"


def test_the_checks_can_fail(tmp_path):
    shown = {"cell_type": "markdown", "metadata": {}, "source": ["```{solution} ex-1\n", "The answer.\n", "```\n"]}
    code = {"cell_type": "code", "metadata": {"tags": ["hide-cell"]}, "source": ["1 / 0"], "outputs": [],
            "execution_count": None}
    path = tmp_path / "99_x.ipynb"
    path.write_text(json.dumps({"cells": [shown, code]}))
    with pytest.raises(AssertionError, match="without a toggle"):
        test_every_solution_is_hidden(path)
    with pytest.raises(AssertionError, match="no exercise"):
        test_every_chapter_has_a_solution_that_runs("99_x", [path])
    shown["source"].insert(1, ":class: dropdown\n")
    code["outputs"] = [{"output_type": "error", "ename": "ZeroDivisionError", "evalue": "", "traceback": []}]
    path.write_text(json.dumps({"cells": [shown, code]}))
    with pytest.raises(AssertionError, match="fails"):
        test_every_chapter_has_a_solution_that_runs("99_x", [path])


# pages that ask for more than one thing built: (exercises at least, of which solved by a hidden code cell)
MANY = {"11_recurrent": (5, 3), "10_1_bands": (2, 2)}


@pytest.mark.parametrize("page", MANY)
def test_pages_asking_for_several_builds(page):
    path = ROOT / "book" / f"{page}.ipynb"
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    text = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    exercises, solved = len(re.findall(r"`{3,}\{exercise\}", text)), len(solved_in_code(path))
    assert exercises >= MANY[page][0] and solved >= MANY[page][1], f"{page}: {exercises} exercises, {solved} solved in code"
