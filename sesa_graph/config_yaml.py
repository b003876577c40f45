"""Reading a run config's YAML and its command-line overrides, and turning every problem with them into one
:class:`ConfigError` line that names where the bad value came from: the file and line, or the flag.

Kept apart from :mod:`sesa_graph.config` (the schema) so each stays small; ``sesa_graph.config`` re-exports
:class:`ConfigError`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from tools.config_model import error_text
from tools.errors import UserError
from tools.inputs import MAX_NESTING, read_bytes_bounded

# A config is a few KiB of hand-written YAML; these bound what a hostile one can make the parser do (an
# alias "billion laughs" expands exponentially; a deep nesting exhausts the stack; a huge file the memory).
MAX_CONFIG_BYTES = 1 * 2**20
MAX_DEPTH = MAX_NESTING


class ConfigError(UserError, ValueError):
    """A config file or override that cannot be used; the message names the file (and line) or the flag,
    and the offending key."""


def _at(where: str, line: int, column: int | None = None) -> str:
    """``file:line[:column]``; a flag's value is one line, so only its column."""
    if where.startswith("--"):
        return f"{where} (column {column})" if column else where
    return f"{where}:{line}" + (f":{column}" if column else "")


class _ConfigLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (plain YAML keeps the last one, so a config that sets a key
    twice would silently run with whichever came second), anchors and aliases (a few hundred bytes of
    nested aliases expand to more than any memory: refused outright, a config can write its values out)
    and nesting deeper than :data:`MAX_DEPTH`."""

    where = "<config>"
    depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        event = self.peek_event()
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            sign = "*" if isinstance(event, yaml.AliasEvent) else "&"
            raise ConfigError(
                f"{_at(self.where, event.start_mark.line + 1)}: YAML anchors and aliases ({sign}{anchor}) are "
                "not allowed in a config; write the value out where it is used"
            )
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise ConfigError(
                    f"{_at(self.where, event.start_mark.line + 1)}: nested deeper than {MAX_DEPTH} levels; a "
                    "config's sections are a few levels deep"
                )
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[tuple[str, str], int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            line = key_node.start_mark.line + 1
            key = (key_node.tag, key_node.value)
            if key in seen:
                raise ConfigError(
                    f"{_at(self.where, line)}: duplicate key {key_node.value!r} (first set on line {seen[key]}); "
                    "keep one of them"
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


# YAML 1.1 (PyYAML's) reads yes/no/on/off as booleans, so `mode: off` became false and `use_seeds: yes`
# a guess; only true/false are booleans here (YAML 1.2's rule), the rest stay the text they are.
_ConfigLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_ConfigLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def _lines(node: yaml.Node | None, prefix: str = "") -> dict[str, int]:
    """Dotted key -> the line (1-based) that sets it, for the mappings of a composed document."""
    out: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                key = prefix + key_node.value
                out[key] = key_node.start_mark.line + 1
                out.update(_lines(value_node, key + "."))
    return out


def parse_yaml(text: str, where: str) -> tuple[Any, dict[str, int]]:
    """The value of one YAML document and the line of each dotted mapping key. Any syntax problem or a
    duplicate key is a :class:`ConfigError` naming ``where`` and the line."""
    try:
        loader = _ConfigLoader(text)  # (its reader already refuses control characters)
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        raise ConfigError(
            f"{_at(where, line)}: not valid YAML: character {exc.character:#x} is not allowed"
        ) from None
    loader.where = where
    try:
        node = loader.get_single_node()
        return (loader.construct_document(node) if node is not None else None), _lines(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = _at(where, mark.line + 1, mark.column + 1) if mark else where
        what = "; ".join(str(p) for p in (exc.context, exc.problem) if p)
        raise ConfigError(f"{at}: not valid YAML: {what}") from None
    except yaml.YAMLError as exc:  # (a reader error: a control character the YAML spec forbids)
        raise ConfigError(f"{where}: not valid YAML: {' '.join(str(exc).split())}") from None
    except RecursionError:
        raise ConfigError(f"{where}: not valid YAML: nested too deeply") from None
    finally:
        loader.dispose()


def read_yaml_file(path: Path, what: str, max_bytes: int = MAX_CONFIG_BYTES) -> tuple[Any, dict[str, int]]:
    """The value of the YAML file ``path`` and the line of each dotted key, read as a config is: a regular
    file of at most ``max_bytes``, UTF-8, no anchors or aliases, bounded nesting, no duplicate keys. Every
    problem is a :class:`ConfigError` naming ``what`` and the file. For every YAML file a user names."""
    if not path.exists():
        raise ConfigError(f"{what} {path} does not exist")
    try:  # a FIFO, device or directory is refused before it is opened; a huge file before it is read
        raw = read_bytes_bounded(path, what, max_bytes)
    except ConfigError:
        raise
    except UserError as exc:
        raise ConfigError(str(exc)) from None
    try:
        text = raw.decode("utf-8-sig")  # (a byte-order mark some editors write is no content)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    return parse_yaml(text, str(path))


def read_config_file(path: Path) -> tuple[dict[str, Any], dict[str, int]]:
    """The mapping a config file holds (empty for an empty file) and the line of each key."""
    if not path.exists():
        raise ConfigError(f"config file {path} does not exist (configs/ holds the shipped ones)")
    data, lines = read_yaml_file(path, "config file")
    if data is None:
        return {}, {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: the top level must be a mapping of sections (solver:, train:, ...), got a "
            f"{type(data).__name__}"
        )
    return data, lines


LITERAL_CHARS = 120  # an echoed value past this is cut, so the message's point stays on screen


def literal(text: str) -> str:
    """``text`` as it is, or quoted with escapes when it holds a line break or a control character (an error
    message stays one readable line); cut past :data:`LITERAL_CHARS`."""
    cut = f"...[{len(text)} characters]" if len(text) > LITERAL_CHARS else ""
    text = text[:LITERAL_CHARS]
    return (text if text.isprintable() else repr(text)) + cut


def _plain_scalar(text: str) -> Any:
    """What YAML reads ``text`` as, unquoted (None for text it cannot read)."""
    try:
        return yaml.load(text, Loader=_ConfigLoader)
    except (yaml.YAMLError, ConfigError, RecursionError):
        return None


def show(value: Any) -> str:
    """An override value as the user would have typed it."""
    if isinstance(value, str):
        # a string YAML would read as something else was quoted when typed ("4"): shown quoted
        quoted = len(value) < 80 and not isinstance(_plain_scalar(value), str)
        return json.dumps(value) if quoted else literal(value)
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return str(value)


def flag_of(key: str, overrides: dict[str, Any], flags: dict[str, str]) -> str:
    """The flag that set override ``key``: ``flags[key]`` (e.g. ``--steps 3``), else ``--set KEY=VALUE``."""
    if key in flags:
        flag, value = flags[key], overrides[key]
        plain = isinstance(value, (str, int, float)) and not isinstance(value, bool)  # not a switch's value
        return f"{flag} {show(value)}" if plain and " " not in flag and "=" not in flag else flag
    return f"--set {literal(f'{key}={show(overrides[key])}')}"


def apply_overrides(data: dict[str, Any], overrides: dict[str, Any], flags: dict[str, str]) -> None:
    """Set each dotted override key in ``data`` (in place), creating sections as needed."""
    import copy

    for dotted, value in overrides.items():
        parts = str(dotted).split(".")
        if not all(p.strip() for p in parts):
            raise ConfigError(
                f"{flag_of(dotted, overrides, flags)}: {dotted!r} is not a dotted key (e.g. solver.max_turns)"
            )
        node = data
        for i, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                section = ".".join(parts[: i + 1])
                raise ConfigError(
                    f"{flag_of(dotted, overrides, flags)}: {section} is a value ({show(child)}), not a section, "
                    f"so it has no key {parts[i + 1]!r}; set {section} itself or a key of a section"
                )
            node = child
        node[parts[-1]] = copy.deepcopy(value)


def validation_message(
    exc: ValidationError,
    path: Path,
    lines: dict[str, int],
    overrides: dict[str, Any],
    flags: dict[str, str],
) -> str:
    """One line for every error of a failed validation, each blamed on the flag or the file line it came
    from."""
    parts = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"])
        msg = error_text(err)
        if err["type"] == "extra_forbidden":
            msg = "unknown key (not a field of this section; `sesa config show` lists them)"
        exact = [k for k in overrides if key == k or key.startswith(k + ".")]
        inside = [k for k in overrides if not key or k.startswith(key + ".")]
        if exact:
            where = flag_of(exact[-1], overrides, flags)
            parts.append(f"{where}: {key}: {msg} (set on the command line)")
        elif inside:  # a check across keys (a model validator) that a flag may have tripped
            named = ", ".join(flag_of(k, overrides, flags) for k in inside)
            parts.append(f"{path} with {named}: {key + ': ' if key else ''}{msg}")
        else:
            line = lines.get(key) or next(
                (lines[k] for k in sorted(lines, key=len, reverse=True) if key.startswith(k + ".")), None
            )
            parts.append(f"{path}{f':{line}' if line else ''}: {key + ': ' if key else ''}{msg}")
    return "; ".join(" ".join(p.split()) for p in parts)
