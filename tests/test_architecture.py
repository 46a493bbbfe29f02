"""The package's layers, read from the source (ARCHITECTURE.md): each module imports only its own layer
and the layers below; no import cycle; no module over 400 lines; argparse only in the command line."""

import ast
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


def test_every_import_points_down_or_across():
    bad = []
    for module, path in modules():
        for target in imports(module, path):
            if layer(target) > layer(module):
                bad.append(f"{module} imports {target}")
    assert not bad, bad


def test_no_import_cycle():
    graph = {m: imports(m, p) for m, p in modules()}
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
