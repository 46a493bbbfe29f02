"""The package's layers, read from the source (ARCHITECTURE.md): each module imports only its own layer
and the layers below; no import cycle; no module over 400 lines; argparse only in the command line."""

import ast
import functools
import re
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "nplm_edu"
LAYERS = ["errors", "progress", "data", "models", "numerics", "training", "analysis", "experiments", "cli"]


def modules():
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(parts), path


def layer(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in ("__main__",):
        return len(LAYERS)  # the package itself and __main__ sit on top
    return LAYERS.index(parts[1])


def imports(module: str, path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    is_pkg = path.name == "__init__.py"
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("nplm_edu")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: len(module.split(".")) - node.level + (1 if is_pkg else 0)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            if name.startswith("nplm_edu"):
                out.add(name)
                for a in node.names:  # `from . import x` may import a module
                    out.add(f"{name}.{a.name}")
    known = {m for m, _ in modules()}
    return {m for m in out if m in known}


@functools.cache
def import_graph() -> dict[str, set[str]]:
    """Each module's imports of the package's modules, read once for the tests below."""
    return {m: imports(m, p) for m, p in modules()}


def test_every_import_points_down_or_across():
    bad = []
    for module, targets in import_graph().items():
        for target in targets:
            if layer(target) > layer(module):
                bad.append(f"{module} imports {target}")
    assert not bad, bad


def test_no_import_cycle():
    graph = import_graph()
    state = {}

    def visit(m, stack):
        state[m] = "open"
        for t in graph.get(m, ()):
            if t == m or t.startswith(m + "."):  # a package importing its own submodules
                continue
            if state.get(t) == "open":
                raise AssertionError("import cycle: " + " -> ".join(stack + [m, t]))
            if t not in state:
                visit(t, stack + [m])
        state[m] = "done"

    for m in graph:
        if m not in state:
            visit(m, [])


def test_modules_are_short():
    long = {m: n for m, p in modules() if (n := len(p.read_text().splitlines())) > 400}
    assert not long, long


def test_argparse_only_in_the_command_line():
    users = [m for m, p in modules() if "argparse" in p.read_text() and layer(m) != LAYERS.index("cli")]
    assert not users, users


# --------------------------------------------------------------------------- cyclomatic complexity
MAX_COMPLEXITY = 20  # radon's grade C or better: a function a reader can hold at once
# functions of the experiments and the command line still above it, each with its complexity now: this list
# only shrinks (a function leaves it when it is split; nothing new may join it)
TOO_COMPLEX: dict[str, int] = {}


def complexity(fn: ast.AST) -> int:
    """McCabe's cyclomatic complexity as radon counts it: 1, plus one per if, loop, except, assert,
    conditional expression, comprehension and its ifs, extra operand of and/or, and loop or try
    else; the branches of functions defined inside count into the one that defines them (radon
    lists those apart, so this count is never below radon's)."""
    n = 1
    for node in ast.walk(fn):
        if isinstance(node, (ast.If, ast.IfExp, ast.Assert, ast.ExceptHandler)):
            n += 1
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            n += 1 + bool(node.orelse)
        elif isinstance(node, ast.Try):
            n += bool(node.orelse)
        elif isinstance(node, ast.BoolOp):
            n += len(node.values) - 1
        elif isinstance(node, ast.comprehension):
            n += 1 + len(node.ifs)
    return n


def functions():
    """(module.qualified name, complexity) of every function and method of the package."""
    for module, path in modules():
        def visit(node, prefix):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield f"{prefix}.{child.name}", complexity(child)
                elif isinstance(child, ast.ClassDef):
                    yield from visit(child, f"{prefix}.{child.name}")

        yield from visit(ast.parse(path.read_text()), module)


def test_no_function_is_too_complex():
    found = dict(functions())
    over = {name: c for name, c in found.items() if c > MAX_COMPLEXITY and TOO_COMPLEX.get(name, 0) < c}
    assert not over, f"functions above cyclomatic complexity {MAX_COMPLEXITY} (split them): {over}"
    stale = {name for name in TOO_COMPLEX if found.get(name, 0) <= MAX_COMPLEXITY}
    assert not stale, f"no longer above {MAX_COMPLEXITY}: remove them from TOO_COMPLEX: {stale}"


def test_the_complexity_count_sees_branches():
    tree = ast.parse("def f(x):\n    if x and x > 1:\n        return [y for y in x if y]\n    while x:\n        x -= 1\n")
    assert complexity(tree.body[0]) == 1 + 1 + 1 + 2 + 1  # if, and, comprehension with its if, while


def test_training_asks_no_model_what_it_has():
    """The trainer and its backends read what a model offers from its declarations (``fused_sgd``,
    ``sparse_grads``) and what the data is from its type, never by probing attributes."""
    users = [m for m, p in modules() if m.startswith("nplm_edu.training") and "hasattr(" in p.read_text()]
    assert not users, users


def documented_modules(text: str) -> set[str]:
    """The modules named in the first cell of ARCHITECTURE.md's table rows, as paths in the package: a
    bare file name in a cell is in the folder of the path before it in that cell."""
    named = set()
    for line in text.splitlines():
        if not line.startswith("| `"):
            continue
        folder = ""
        for name in re.findall(r"`([\w/]+\.py)`|(?<![`\w])([\w]+\.py)(?![`\w])", line.split("|")[1]):
            name = name[0] or name[1]
            if "/" in name:
                folder = name.rsplit("/", 1)[0] + "/"
                named.add(name)
            else:
                named.add(folder + name)
    return named


def test_architecture_md_names_every_module():
    """ARCHITECTURE.md's table has a line for every module (an __init__.py that defines nothing, only
    a docstring or re-exports, needs none), and names no module that does not exist."""
    named = documented_modules((PKG.parent / "ARCHITECTURE.md").read_text())
    actual = {str(path.relative_to(PKG)) for _, path in modules()}
    plain = {str(path.relative_to(PKG)) for _, path in modules() if path.name == "__init__.py"
             and not any(isinstance(n, (ast.FunctionDef, ast.ClassDef)) for n in ast.parse(path.read_text()).body)}
    assert not actual - plain - named, f"ARCHITECTURE.md does not name {sorted(actual - plain - named)}"
    assert not named - actual, f"ARCHITECTURE.md names modules that do not exist: {sorted(named - actual)}"


def test_the_api_page_shows_every_module():
    """book/api.md has an automodule for every module with something to read (the package itself, whose
    one line the page's introduction says, __main__, and a subpackage's __init__.py without a
    docstring excepted)."""
    shown = set(re.findall(r"automodule:: ([\w.]+)", (PKG.parent / "book" / "api.md").read_text()))
    missing = [m for m, path in modules() if m not in shown and m != "nplm_edu" and not m.endswith("__main__")
               and (path.name != "__init__.py" or ast.get_docstring(ast.parse(path.read_text())))]
    assert not missing, f"book/api.md does not show {missing}"
