"""Structure figures for package code, read with ``ast`` (nothing is imported or run).

Prints: functions and methods over 60 and 80 lines (the longest first), files between 450 and the
500-line cap, private names (``_x``) imported from another project module, the layer ranks the layer test
enforces, and which packages import which (module level and inside functions), so a loop shows.

    .venv/bin/python benchmarks/structure.py [--list 20]
"""

from __future__ import annotations

import argparse
import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("tools", "sesa_graph", "graphs", "training", "sesa_eval", "sesa_runs", "sesa_cli")
CAP = 500


def package_sources() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def function_lengths(path: Path) -> list[tuple[int, str]]:
    """(lines, "file:line name") for every function and method, nested ones included."""
    rel = path.relative_to(ROOT)
    return [
        (node.end_lineno - node.lineno + 1, f"{rel}:{node.lineno} {node.name}")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]


def absolute_module(path: Path, node: ast.ImportFrom) -> str:
    """The module an ``from ... import`` names, relative imports resolved against ``path``."""
    if not node.level:
        return node.module or ""
    base = module_name(path).split(".")
    if path.name != "__init__.py":
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def private_imports(path: Path) -> list[str]:
    """``from project.module import _name`` lines: a private name used outside the module that owns it."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom):
            continue
        source = absolute_module(path, node)
        if source.split(".")[0] not in PACKAGES:
            continue
        for alias in node.names:
            if alias.name.startswith("_") and not alias.name.startswith("__"):
                out.append(f"{path.relative_to(ROOT)}:{node.lineno} {source}.{alias.name}")
    return out


def layer_ranks() -> dict[str, int]:
    """The LAYERS table of tests/test_layers.py, read as a literal."""
    tree = ast.parse((ROOT / "tests" / "test_layers.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "LAYERS" for t in node.targets):
            return ast.literal_eval(node.value)
    raise SystemExit("tests/test_layers.py has no LAYERS table")


def package_imports(path: Path) -> tuple[set[str], set[str]]:
    """Project packages this file imports at module level, and inside functions or classes."""
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}

    def names(node: ast.AST) -> list[str]:
        if isinstance(node, ast.Import):
            return [a.name for a in node.names]
        if isinstance(node, ast.ImportFrom):
            return [absolute_module(path, node)]
        return []

    module_level, nested = set(), set()
    for node in ast.walk(tree):
        for name in names(node):
            pkg = name.split(".")[0]
            if pkg in PACKAGES:
                (module_level if id(node) in top else nested).add(pkg)
    return module_level, nested


def print_report(limit: int) -> None:
    sources = package_sources()
    lengths = sorted((f for p in sources for f in function_lengths(p)), reverse=True)
    over60 = [f for f in lengths if f[0] > 60]
    over80 = [f for f in over60 if f[0] > 80]
    print(f"functions over 60 lines: {len(over60)}; over 80 lines: {len(over80)}")
    for n, where in over60[:limit]:
        print(f"  {n:4d}  {where}")
    near_cap = sorted(
        (n, str(p.relative_to(ROOT))) for p in sources if 450 < (n := len(p.read_text().splitlines())) <= CAP
    )
    print(f"package files between 450 and {CAP} lines: {len(near_cap)}")
    for n, rel in reversed(near_cap):
        print(f"  {n:4d}  {rel}")
    private = [line for p in sources for line in private_imports(p)]
    print(f"private names imported across modules: {len(private)}")
    for line in private:
        print(f"  {line}")
    ranks = layer_ranks()
    print("layer ranks (tests/test_layers.py): " + ", ".join(f"{k} {v}" for k, v in ranks.items()))
    edges: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for p in sources:
        pkg = p.relative_to(ROOT).parts[0]
        top, nested = package_imports(p)
        for other in top - {pkg}:
            edges[pkg]["module level"].add(other)
        for other in nested - top - {pkg}:
            edges[pkg]["in functions"].add(other)
    print("package imports (module level | in functions; ^ marks one pointing up or sideways):")
    for pkg in sorted(edges, key=lambda k: ranks.get(k, -1)):

        def shown(targets: set[str], pkg: str = pkg) -> str:
            up = ranks.get(pkg, -1)
            return " ".join(f"{t}{'^' if ranks.get(t, -1) >= up else ''}" for t in sorted(targets))

        print(f"  {pkg}: {shown(edges[pkg]['module level'])} | {shown(edges[pkg]['in functions'])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", type=int, default=20, help="how many of the longest functions to name")
    print_report(parser.parse_args().list)


if __name__ == "__main__":
    main()
