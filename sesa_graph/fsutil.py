"""Atomic state-file writes: write a temp file in the same directory, fsync, rename over the target.

A process killed at any point leaves either the old file or the new one, never a torn one.

Also the one JSONL reader (:func:`read_jsonl`, :func:`parse_jsonl`) with the one error policy: a bad line
is an error naming ``file:line``; a torn last line (an append cut by a kill) is skipped and counted.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from tools.errors import UserError


def write_bytes_atomic(path: Path, data: bytes) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:  # make the rename itself durable
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
    return path


def write_text_atomic(path: Path, text: str) -> Path:
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: Path, obj: Any) -> Path:
    return write_text_atomic(path, json.dumps(obj, ensure_ascii=False, indent=1) + "\n")


def write_jsonl_atomic(path: Path, rows: Iterable[Any]) -> Path:
    return write_text_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


class _PlainDumper(yaml.SafeDumper):
    """Writes a value shared by two keys out twice: config readers refuse anchors and aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump_yaml(obj: Any, **kw: Any) -> str:
    """``obj`` as YAML without anchors or aliases, keys in their order (the one YAML writer of the project)."""
    return yaml.dump(
        obj, Dumper=_PlainDumper, **{"sort_keys": False, "allow_unicode": True, "width": 110, **kw}
    )


def write_yaml_atomic(path: Path, obj: Any) -> Path:
    return write_text_atomic(path, dump_yaml(obj))


class JsonlError(UserError, ValueError):
    """A JSONL file with a line that is not a JSON object; the message names the file and line
    (also kept apart: ``path``, ``line``, ``reason``)."""

    def __init__(
        self, message: str, *, path: Path | str | None = None, line: int | None = None, reason: str = ""
    ) -> None:
        super().__init__(message)
        self.path, self.line, self.reason = path, line, reason


class JsonlRows(list):
    """The JSON objects of a JSONL file (a list of dicts) plus how it was read.

    ``path``: the file; ``line_numbers``: the 1-based line of each row; ``torn``: torn last lines skipped
    (0 or 1), so that a caller can say "1 torn line skipped"."""

    def __init__(self, rows: Iterable[dict] = (), *, path: Path | None = None) -> None:
        super().__init__(rows)
        self.path = path
        self.line_numbers: list[int] = []
        self.torn = 0


def replace_dir(tmp: Path, final: Path) -> Path:
    """Put the complete directory ``tmp`` at ``final``, replacing what was there: readers see the old
    directory or the new one, never a mix (a moment with neither when one existed)."""
    old = final.with_name(f".{final.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)
    return final


def parse_jsonl(data: bytes | str, path: Path | str) -> JsonlRows:
    """The JSON objects of JSONL ``data`` (the contents of ``path``), skipping blank lines.

    The one error policy of every JSONL reader: a line that is not a JSON object raises :class:`JsonlError`
    naming ``path:line``, except the last line when it lacks its newline -- what a process killed (or still
    busy) mid-append leaves --, which is skipped and counted in ``torn``. A complete last line without a
    newline is kept."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    lines = raw.split(b"\n")
    out = JsonlRows(path=Path(path))
    last = len(lines)  # the final piece has no newline after it ('' when the data ends with one)
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line.decode("utf-8"))
            bad = None if isinstance(row, dict) else f"expected a JSON object, got {type(row).__name__}"
        except UnicodeDecodeError:
            bad = "not valid UTF-8"
        except json.JSONDecodeError as exc:
            bad = f"not valid JSON ({exc.msg})"
        if bad is not None:
            if n == last:
                out.torn += 1
                continue
            raise JsonlError(f"{path}:{n}: {bad}", path=path, line=n, reason=bad)
        out.append(row)
        out.line_numbers.append(n)
    return out


def read_jsonl(path: Path | str, *, missing_ok: bool = False) -> JsonlRows:
    """The JSON objects of a JSONL file under :func:`parse_jsonl`'s policy (a bad line is an error naming
    ``file:line``; a torn last line is skipped and counted in ``.torn``). ``missing_ok``: a file that does
    not exist reads as no rows."""
    path = Path(path)
    if missing_ok and not path.is_file():
        return JsonlRows(path=path)
    return parse_jsonl(path.read_bytes(), path)
