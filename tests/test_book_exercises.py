"""Every chapter asks its reader to build something, and shows its answer only on request.

An exercise's solution is a ``{solution}`` directive with ``:class: dropdown`` (hidden until the
reader opens it); an implement-or-extend exercise's solution is followed by a code cell tagged
``hide-cell`` that does the work. That cell is stored executed, without an error, and nbval holds
its outputs equal to a fresh run (``make test``), so every solution shown is one that runs and
gives what it prints. This file checks the structure: each chapter (its page and the pages of its
sections, as _toc.yml lists them) has at least one such solution (chapters 10 and 11: at least five
exercises, three of them implement-and-check, solved by a hidden code cell that asserts its result;
``MANY``), and no solution shows without a toggle. Every hidden code cell of a solution asserts something
that could fail: at least one ``assert`` statement (found with ``ast``, so not one in a comment or a
string), none of them true whatever the solution computed (``trivial_asserts``).
"""

import ast
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


def markdown(cells: list[dict]) -> str:
    """The text of a page's markdown cells, joined: where its exercises and solutions are written."""
    return "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


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
    text = markdown(json.loads(path.read_text(encoding="utf-8"))["cells"])
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


def trivial_asserts(source: str) -> list[str]:
    """The asserts of a cell that cannot fail: a constant (``assert True``), a comparison of an expression
    with itself (equal ``ast.dump``), a name compared with the constant the cell just set it to
    (``x = 3`` ... ``assert x == 3``), or an ``and`` with such a part; and ``["no assert"]`` if there is
    none. The ``ast`` module finds the statements, so an assert in a comment or a string does not count."""
    tree = ast.parse(source)
    constants = {(t.id, ast.dump(node.value)) for node in ast.walk(tree) if isinstance(node, ast.Assign)
                 and isinstance(node.value, ast.Constant) for t in node.targets if isinstance(t, ast.Name)}

    def trivial(test: ast.expr) -> bool:
        if isinstance(test, ast.Constant):
            return True
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            return any(trivial(v) for v in test.values)
        if isinstance(test, ast.Compare):
            sides = [test.left, *test.comparators]
            dumps = [ast.dump(e) for e in sides]
            names = {(e.id, d) for e, d in zip(sides, dumps) if isinstance(e, ast.Name)}
            return len(set(dumps)) < len(dumps) or any((n, d) in constants for n, _ in names for d in dumps)
        return False

    asserts = [node for node in ast.walk(tree) if isinstance(node, ast.Assert)]
    return [ast.unparse(a.test) for a in asserts if trivial(a.test)] if asserts else ["no assert"]


@pytest.mark.parametrize("path", PAGES, ids=[p.stem for p in PAGES])
def test_every_hidden_solution_asserts_something(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    bad = {cells[i].get("id", i): trivial_asserts("".join(cells[i]["source"])) for i in solved_in_code(path)}
    bad = {cell: asserts for cell, asserts in bad.items() if asserts}
    assert not bad, f"{path.name}: hidden solutions whose asserts check nothing (cell id: what): {bad}"


def test_trivial_asserts_are_found():
    assert trivial_asserts("x = f(1)\nprint(x)  # assert x == 2\ns = 'assert x'") == ["no assert"]
    assert trivial_asserts("assert True\nassert f(x) == f(x)\nassert 0 < g(y) < 1") == ["True", "f(x) == f(x)"]
    assert trivial_asserts("k = 4\nassert k == 4 and f(k) > 0\nassert f(k) == 4") == ["k == 4 and f(k) > 0"]
    assert trivial_asserts("x = f(1)\nassert abs(x - 2) < 1e-12, x") == []


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
    with pytest.raises(AssertionError, match="check nothing"):
        test_every_hidden_solution_asserts_something(path)


# what a chapter (its pages together) asks its reader to build, by chapter number: at least so many
# (exercises, solved by a hidden code cell, implement-and-check: solved by a hidden code cell that
# asserts its result); any other chapter at least one exercise solved in code (implement or extend)
MANY = {"10": (5, 3, 3), "11": (5, 3, 3)}
OTHERWISE = (1, 1, 0)
CHECKS = re.compile(r"^\s*assert\b|np\.testing\.assert", re.MULTILINE)


def counts(pages: list[Path]) -> dict[str, tuple[int, int, int]]:
    """Each page's (exercises, exercises solved by a hidden code cell, those whose cell asserts its result)."""
    out = {}
    for path in pages:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        text = markdown(cells)
        solved = solved_in_code(path)
        checked = [i for i in solved if CHECKS.search("".join(cells[i]["source"]))]
        out[path.stem] = (len(re.findall(r"`{3,}\{exercise\}", text)), len(solved), len(checked))
    return out


def test_the_chapters_asked_for_many_exist():
    assert set(MANY) <= {chapter[:2] for chapter in CHAPTERS}, (sorted(MANY), sorted(CHAPTERS))


@pytest.mark.parametrize("chapter", CHAPTERS, ids=list(CHAPTERS))
def test_every_chapter_asks_for_enough_builds(chapter, pages=None):
    per_page = counts(pages or CHAPTERS[chapter])
    have = tuple(sum(c[i] for c in per_page.values()) for i in range(3))
    need = MANY.get(chapter[:2], OTHERWISE)
    assert all(h >= n for h, n in zip(have, need)), (
        f"chapter {chapter[:2]} has {have[0]} exercises, {have[1]} of them solved by a hidden code cell, {have[2]} "
        f"of those checked by an assert (per page: {per_page}); it needs at least {need[0]}, {need[1]} and {need[2]}")


def test_the_counts_can_fail(tmp_path):
    """A fake chapter 10 of two pages: four exercises fail, five with two solved in code fail, five with
    three solved but two checked fail, five with three checked pass; a fake chapter 99 passes with one
    exercise solved in code (no assert needed) and fails with it explained only."""
    def page(name: str, checked: int, explained: int, solved: int = 0) -> Path:
        cells = []
        for k in range(checked + solved + explained):
            cells.append({"cell_type": "markdown", "metadata": {}, "source": [f"```{{exercise}}\n:label: {name}-{k}\nDo it.\n```\n"]})
            cells.append({"cell_type": "markdown", "metadata": {}, "source": [f"```{{solution}} {name}-{k}\n:class: dropdown\nDone.\n```\n"]})
            if k < checked + solved:
                cells.append({"cell_type": "code", "metadata": {"tags": ["hide-cell"]}, "execution_count": 1, "outputs": [],
                              "source": ["x = 1 + 1\n", "assert x == 2" if k < checked else "print(x)"]})
        path = tmp_path / f"{name}.ipynb"
        path.write_text(json.dumps({"cells": cells}))
        return path

    def fails(says: str, chapter: str, *pages):
        with pytest.raises(AssertionError, match=says):
            test_every_chapter_asks_for_enough_builds(chapter, list(pages))

    fails("chapter 10 has 4 exercises, 3 of them solved .* needs at least 5, 3 and 3", "10_x", page("10_x", 2, 1),
          page("10_1_y", 1, 0))
    fails("chapter 10 has 5 exercises, 2 of them solved", "10_x", page("10_x", 1, 2), page("10_1_y", 1, 1))
    fails("chapter 10 has 5 exercises, 3 of them solved by a hidden code cell, 2 of those checked", "10_x",
          page("10_x", 1, 2, solved=1), page("10_1_y", 1, 0))
    test_every_chapter_asks_for_enough_builds("10_x", [page("10_x", 2, 2), page("10_1_y", 1, 0)])
    test_every_chapter_asks_for_enough_builds("99_x", [page("99_x", 0, 0, solved=1)])
    fails("chapter 99 has 1 exercises, 0 of them solved", "99_x", page("99_x", 0, 1))
