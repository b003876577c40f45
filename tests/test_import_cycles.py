"""No import circles between the project's modules. Every import counts: at module level, inside a function
and under ``if TYPE_CHECKING``. A lazy or type-only import hides a circle from Python without closing it:
the helper it reaches for sits on the wrong side of a split, and both modules must still be read together."""

import ast
from collections import deque
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("tools", "sesa_graph", "graphs", "sesa_eval", "training", "sesa_runs", "sesa_cli")
Graph = dict[
    str, dict[str, tuple[Path, int]]
]  # module -> imported module -> (file, line) of the first import

# Circles left on purpose, each with what keeps it; a new one fails, and so does one of these once it closes,
# so that the list stays true.
KNOWN = {
    # a search backend's contract and the factory of all backends share one module; each backend imports the
    # contract, and the factory imports the backend asked for, lazily (dense pulls in torch and faiss)
    frozenset({"tools.backends", "tools.bm25", "tools.dense", "tools.http"}),
}


def _modules(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    out = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _targets(node: ast.Import | ast.ImportFrom, name: str, path: Path, modules: dict[str, Path]) -> list[str]:
    """The dotted names ``node`` imports: a submodule where ``from P import X`` names one, else ``P``."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]


def import_graph(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> Graph:
    modules = _modules(root, packages)
    graph: Graph = {}
    for name, path in modules.items():
        edges: dict[str, tuple[Path, int]] = {}
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target in _targets(node, name, path, modules):
                while target and target not in modules:  # `import a.b.f` where f is a function, say
                    target = target.rpartition(".")[0]
                if target and target != name and node.lineno < edges.get(target, (path, 1 << 30))[1]:
                    edges[target] = (path, node.lineno)
        graph[name] = edges
    return graph


def _reachable(graph: Graph, start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def circles(graph: Graph) -> set[frozenset[str]]:
    """Each set of modules that reach one another through imports (the strongly connected components)."""
    reach = {m: _reachable(graph, m) for m in graph}
    return {frozenset({m} | {o for o in reach[m] if m in reach[o]}) for m in graph if m in reach[m]}


def describe(graph: Graph, circle: frozenset[str], root: Path = ROOT) -> str:
    """One shortest way around ``circle`` from its first module, each step with the import that makes it."""
    start = min(circle)
    came: dict[str, str] = {}
    todo = deque([start])
    while todo:
        here = todo.popleft()
        if start in graph[here]:
            break
        for nxt in sorted(graph[here]):
            if nxt in circle and nxt not in came and nxt != start:
                came[nxt] = here
                todo.append(nxt)
    way = [start, here]
    while way[-1] != start:
        way.append(came[way[-1]])
    way.reverse()
    steps = [f"{b} ({graph[a][b][0].relative_to(root)}:{graph[a][b][1]})" for a, b in pairwise(way)]
    return " -> ".join([start, *steps])


def test_every_kind_of_import_is_an_edge(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from .c import C\n")
    (pkg / "a.py").write_text("def f():\n    from pkg import b\n\n    return b\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    import pkg.a.f\n")
    (pkg / "c.py").write_text("from pkg.sub import C\n")
    (pkg / "sub" / "c.py").write_text("from ..c import C\nimport json\n")
    graph = import_graph(tmp_path, ("pkg",))
    assert circles(graph) == {frozenset({"pkg.a", "pkg.b"}), frozenset({"pkg.c", "pkg.sub", "pkg.sub.c"})}
    assert (
        describe(graph, frozenset({"pkg.a", "pkg.b"}), tmp_path)
        == "pkg.a -> pkg.b (pkg/a.py:2) -> pkg.a (pkg/b.py:4)"
    )


def test_no_import_circles():
    graph = import_graph()
    new = sorted(describe(graph, c) for c in circles(graph) - KNOWN)
    assert not new, "import circles:\n" + "\n".join(new)


def test_the_known_circles_are_still_there():
    closed = KNOWN - circles(import_graph())
    assert not closed, f"closed, so take them out of KNOWN: {[sorted(c) for c in closed]}"
