"""The layering in docs/ARCHITECTURE.md, enforced: module-level imports only point down, only the CLI imports
typer, and no source file grows past 500 lines."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# package -> rank; a module may import its own rank or below at module level (function-level imports are the
# way a lower layer reaches an optional part above it, e.g. a command that starts training)
LAYERS = {
    "tools": 0,
    "sesa_graph": 1,
    "graphs": 2,
    "training": 3,
    "sesa_eval": 3,
    "sesa_runs": 4,
    "sesa_cli": 5,
}
SOURCES = sorted(p for pkg in LAYERS for p in (ROOT / pkg).rglob("*.py"))


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
