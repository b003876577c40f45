"""The training step's walk through the code, read with ``ast`` (nothing is imported or run).

Starts at ``training.orchestrator`` ``Orchestrator.run_step`` and follows every call it can resolve
statically: a name defined in the module or imported into it (module level or inside the function), a
``self.``/``cls.`` method of the enclosing class, ``module.f`` through an imported module and
``Class.method`` through an imported class, and ``self.attr.method`` where the class sets ``self.attr =
Class(...)``; a call to a class enters its ``__init__`` (or ``__post_init__``). Calls on other objects are not
followed, so the walk is a lower bound.

A reader follows the calls depth first, in source order, reading each function once. Prints the modules in
the order the reader stays in them (a stay: reading goes on in another module than the last one read, also
when it comes back to a caller to read its next call), the climbs back up (a stay in a package ranked above the one read just before it, ranks of tests/test_layers.py),
and the stays in ``training.warmup``.

    .venv/bin/python benchmarks/step_walk.py [--start training.orchestrator:Orchestrator.run_step]
"""

from __future__ import annotations

import argparse
import ast
from dataclasses import dataclass, field
from pathlib import Path

from structure import absolute_module, layer_ranks, module_name, package_sources


@dataclass
class Module:
    """What a module defines and imports, by name."""

    name: str
    path: Path
    functions: dict[str, ast.AST] = field(default_factory=dict)  # "f" and "Class.method"
    classes: set[str] = field(default_factory=set)
    imported: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (module, name)
    modules: dict[str, str] = field(default_factory=dict)  # alias -> module
    attributes: dict[str, str] = field(
        default_factory=dict
    )  # "Class.attr" -> the class name it is built from


def imports_into(nodes: list[ast.AST], path: Path) -> tuple[dict, dict]:
    """Names imported from modules (name -> (module, name)) and modules imported whole (alias -> module)."""
    names, modules = {}, {}
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                modules[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            source = absolute_module(path, node)
            for a in node.names:
                names[a.asname or a.name] = (source, a.name)
    return names, modules


def index() -> dict[str, Module]:
    out = {}
    for path in package_sources():
        tree = ast.parse(path.read_text())
        mod = Module(module_name(path), path)
        mod.imported, mod.modules = imports_into(tree.body, path)
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                mod.functions[node.name] = node
            elif isinstance(node, ast.ClassDef):
                mod.classes.add(node.name)
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        mod.functions[f"{node.name}.{item.name}"] = item
                mod.attributes.update(built_attributes(node))
        out[mod.name] = mod
    return out


def built_attributes(cls: ast.ClassDef) -> dict[str, str]:
    """``self.attr = Name(...)`` anywhere in the class: {"Class.attr": "Name"}."""
    out = {}
    for node in ast.walk(cls):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
        ):
            for t in node.targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                    out[f"{cls.name}.{t.attr}"] = node.value.func.id
    return out


def resolve(mods: dict[str, Module], module: str, name: str, hops: int = 0) -> tuple[str, str] | None:
    """``(module, qualname)`` where ``module.name`` is defined, following re-exports; a module imported by
    name (``from pkg import mod``) resolves to ``(pkg.mod, "")``."""
    mod = mods.get(module)
    if mod is None or hops > 5:
        return (f"{module}.{name}", "") if f"{module}.{name}" in mods else None
    if name in mod.functions or name in mod.classes:
        return module, name
    if name in mod.imported:
        return resolve(mods, *mod.imported[name], hops + 1)
    return (f"{module}.{name}", "") if f"{module}.{name}" in mods else None


def entry(mods: dict[str, Module], module: str, name: str) -> tuple[str, str] | None:
    """The function a call to ``module.name`` runs: the function, or a class's ``__init__``."""
    if name in mods[module].functions:
        return module, name
    for init in ("__init__", "__post_init__"):
        if f"{name}.{init}" in mods[module].functions:
            return module, f"{name}.{init}"
    return (module, "") if name in mods[module].classes else None


def callees(mods: dict[str, Module], module: str, qualname: str) -> list[tuple[str, str]]:
    mod = mods[module]
    fn = mod.functions[qualname]
    local, local_mods = imports_into(list(ast.walk(fn)), mod.path)
    names, aliases = {**mod.imported, **local}, {**mod.modules, **local_mods}
    cls = qualname.split(".")[0] if "." in qualname else None
    out = []
    calls = sorted(
        (n for n in ast.walk(fn) if isinstance(n, ast.Call)), key=lambda n: (n.lineno, n.col_offset)
    )
    for call in calls:
        f, target = call.func, None
        if isinstance(f, ast.Name):
            if f.id in mod.functions or f.id in mod.classes:
                target = (module, f.id)
            elif f.id in names:
                target = resolve(mods, *names[f.id])
        elif (
            isinstance(f, ast.Attribute)
            and isinstance(f.value, ast.Attribute)
            and isinstance(f.value.value, ast.Name)
            and f.value.value.id == "self"
            and cls
            and (built := mod.attributes.get(f"{cls}.{f.value.attr}"))
        ):
            owner = resolve(mods, *names[built]) if built in names else (module, built)
            if owner and owner[1]:
                target = (owner[0], f"{owner[1]}.{f.attr}")
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            base = f.value.id
            if base in ("self", "cls") and cls and f"{cls}.{f.attr}" in mod.functions:
                target = (module, f"{cls}.{f.attr}")
            elif base in aliases:
                target = resolve(mods, aliases[base], f.attr)
            elif base in names or base in mod.classes:
                owner = resolve(mods, *names[base]) if base in names else (module, base)
                if owner and owner[1]:
                    target = (owner[0], f"{owner[1]}.{f.attr}")
                elif owner:  # a module imported by name
                    target = resolve(mods, owner[0], f.attr)
        if target and target[0] in mods:
            target = entry(mods, target[0], target[1]) if "." not in target[1] else target
            if target and (not target[1] or target[1] in mods[target[0]].functions):
                out.append(target)
    return out


def walk(start: str) -> list[str]:
    """The modules a reader stays in, in order: the start's first, consecutive repeats merged."""
    mods = index()
    module, qualname = start.split(":")
    seen, order = set(), []

    def read(here: tuple[str, str]) -> None:
        if here in seen or not here[1]:
            return
        seen.add(here)
        if not order or order[-1] != here[0]:
            order.append(here[0])
        for there in callees(mods, *here):
            if there in seen:
                continue
            if not order or order[-1] != here[0]:
                order.append(here[0])  # back in this function to read its next call
            if not there[1]:
                if order[-1] != there[0]:
                    order.append(there[0])  # a class with no __init__ of its own: a glance at its module
                continue
            read(there)

    read((module, qualname))
    return order or [module]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--start", default="training.orchestrator:Orchestrator.run_step")
    order, ranks = walk(parser.parse_args().start), layer_ranks()
    stays = order[1:]
    climbs = [(a, b) for a, b in zip(order, stays) if ranks[b.split(".")[0]] > ranks[a.split(".")[0]]]
    warm = [m for m in stays if m.startswith("training.warmup")]
    print(
        f"step walk: {len(stays)} stays, {len(climbs)} climbs back up, {len(warm)} stays in training.warmup"
    )
    print("  stays: " + " > ".join(order))
    for a, b in climbs:
        print(f"  climb: {a} -> {b}")


if __name__ == "__main__":
    main()
