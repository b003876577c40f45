"""Atomic state-file writes: write a temp file in the same directory, fsync, rename over the target.

A process killed at any point leaves either the old file or the new one, never a torn one.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml


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


def write_yaml_atomic(path: Path, obj: Any) -> Path:
    return write_text_atomic(path, yaml.safe_dump(obj, sort_keys=False, allow_unicode=True, width=110))


class JsonlError(ValueError):
    """A JSONL file with a line that is not a JSON object; the message names the file and line."""


def read_jsonl(path: Path) -> Iterator[dict]:
    """Yield the JSON objects of a JSONL file, skipping blank lines; a bad line raises JsonlError."""
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise JsonlError(f"{path}:{n}: not valid JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise JsonlError(f"{path}:{n}: expected a JSON object, got {type(row).__name__}")
            yield row
