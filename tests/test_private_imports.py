"""No package module uses another module's private (``_x``) names: a name another module needs is public
(or lives where it is used). Checked in package code, both ways of reaching one: ``from m import _x`` and
``import m`` followed by ``m._x``."""

import ast
from pathlib import Path

import pytest

from tests.test_layers import LAYERS, ROOT, SOURCES


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _source(path: Path, node: ast.ImportFrom) -> str:
    """The module a ``from ... import`` reads, a relative one resolved against ``path``."""
    if not node.level:
        return node.module or ""
    base = _module(path).split(".")
    base = base if path.name == "__init__.py" else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_project_module(dotted: str) -> bool:
    rel = ROOT.joinpath(*dotted.split("."))
    return dotted.split(".")[0] in LAYERS and (rel.with_suffix(".py").is_file() or rel.is_dir())


def private_uses(path: Path) -> list[str]:
    """``line: module._name`` for each private name of another project module ``path`` reaches."""
    tree = ast.parse(path.read_text())
    found, aliases = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname and _is_project_module(a.name):
                    aliases[a.asname] = a.name
        elif isinstance(node, ast.ImportFrom):
            source = _source(path, node)
            if source.split(".")[0] not in LAYERS:
                continue
            for a in node.names:
                if _is_private(a.name):
                    found.append(f"{node.lineno}: {source}.{a.name}")
                elif _is_project_module(f"{source}.{a.name}"):
                    aliases[a.asname or a.name] = f"{source}.{a.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            base = node.value
            if isinstance(base, ast.Name) and base.id in aliases and aliases[base.id] != _module(path):
                found.append(f"{node.lineno}: {aliases[base.id]}.{node.attr}")
    return found


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_private_name_of_another_module(path):
    uses = private_uses(path)
    assert not uses, f"{path.relative_to(ROOT)} uses private names of other modules: {uses}"


def test_the_check_sees_both_ways(tmp_path, monkeypatch):
    monkeypatch.setattr("tests.test_private_imports.ROOT", tmp_path)
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "a.py").write_text("_hidden = 1\n")
    user = tmp_path / "tools" / "b.py"
    user.write_text(
        "from tools.a import _hidden\nfrom tools import a\nimport tools.a as aa\nx = a._hidden + aa._h\n"
    )
    assert private_uses(user) == ["1: tools.a._hidden", "4: tools.a._hidden", "4: tools.a._h"]
    user.write_text("from tools.a import __doc__\nfrom os import _exit\nfrom . import a\nb = a.public\n")
    assert private_uses(user) == []
