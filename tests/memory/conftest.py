import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the embedder loads from the wheel; never reach the hub
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))  # fakes.py

from sesa_graph.memory import MemoryConfig, SkillBank, SkillMemory


@pytest.fixture(scope="session")
def encoder():
    """The real embedded MiniLM, loaded once, its embeddings memoized per text (the seeds are embedded
    by almost every test)."""
    from fakes import MemoEncoder

    from tools.encoder import Encoder

    return MemoEncoder(Encoder("embedded"))


@pytest.fixture
def make_bank(tmp_path, encoder):
    banks = []

    def make(name="bank", **cfg):
        bank = SkillBank.create(tmp_path / name, MemoryConfig(**cfg), encoder)
        banks.append(bank)
        return bank

    yield make
    for b in banks:
        b.close()


@pytest.fixture
def make_memory(tmp_path, encoder):
    mems = []

    def make(distiller=None, name="mem", **cfg):
        mem = SkillMemory.create(tmp_path / name, MemoryConfig(**cfg), encoder=encoder, distiller=distiller)
        mems.append(mem)
        return mem

    yield make
    for m in mems:
        m.close()
