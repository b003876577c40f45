"""The layering in docs/ARCHITECTURE.md, enforced: every package has a rank of its own, module-level imports
only point down, no two packages import each other (not even inside functions), only the CLI imports typer,
and no source file grows past 500 lines."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# package -> rank, one rank a package; a module may import its own package or lower ranks at module level
# (function-level imports are the way a lower layer reaches an optional part above it, e.g. a command that
# starts training, as long as the upper package does not import the lower one back)
LAYERS = {
    "tools": 0,
    "sesa_graph": 1,
    "graphs": 2,
    "sesa_eval": 3,
    "training": 4,
    "sesa_runs": 5,
    "sesa_cli": 6,
}
SOURCES = sorted(p for pkg in LAYERS for p in (ROOT / pkg).rglob("*.py"))


def _imported_packages(path: Path) -> set[str]:
    """Packages of the table this file imports anywhere: module level, inside functions, under ``if``."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return {n.split(".")[0] for n in names} & set(LAYERS)


def _module_level_imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If):  # `if TYPE_CHECKING:` blocks are not run
            continue
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
    return out


def test_the_layer_table_covers_every_package():
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests", "benchmarks", "notebooks"}
    assert packages <= set(LAYERS), packages - set(LAYERS)


def test_every_package_has_a_rank_of_its_own():
    # a tie would let two packages import each other at module level and hide a loop
    assert len(set(LAYERS.values())) == len(LAYERS), LAYERS


def test_no_two_packages_import_each_other():
    imports: dict[str, set[str]] = {pkg: set() for pkg in LAYERS}
    for path in SOURCES:
        pkg = path.relative_to(ROOT).parts[0]
        imports[pkg] |= _imported_packages(path) - {pkg}
    loops = sorted(f"{a} <-> {b}" for a in LAYERS for b in imports[a] if a < b and a in imports[b])
    assert not loops, loops


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_module_level_imports_point_down(path):
    rank = LAYERS[path.relative_to(ROOT).parts[0]]
    upward = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for line, name in _module_level_imports(path)
        if LAYERS.get(name.split(".")[0], -1) > rank
    ]
    assert not upward, upward


def test_only_the_cli_imports_typer():
    offenders = [
        str(p.relative_to(ROOT))
        for p in SOURCES
        if p.relative_to(ROOT).parts[0] != "sesa_cli"
        and any(
            name.split(".")[0] == "typer"
            for n in ast.walk(ast.parse(p.read_text()))
            if isinstance(n, (ast.Import, ast.ImportFrom))
            for name in ([a.name for a in n.names] if isinstance(n, ast.Import) else [n.module or ""])
        )
    ]
    assert not offenders, offenders


def test_no_source_file_over_500_lines():
    files = SOURCES + sorted((ROOT / "benchmarks").glob("*.py")) + sorted((ROOT / "tests").rglob("*.py"))
    long = {str(p.relative_to(ROOT)): n for p in files if (n := len(p.read_text().splitlines())) > 500}
    assert not long, long
