"""Fixtures of the eval tests; the test doubles are in eval_fakes.py."""

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))  # eval_fakes.py

from eval_fakes import write_jsonl


@pytest.fixture(autouse=True)
def sesa_home(tmp_path, monkeypatch):
    home = tmp_path / "sesa_home"
    monkeypatch.setenv("SESA_HOME", str(home))
    return home


@pytest.fixture
def data_dir(tmp_path):
    """Two datasets: 'alpha' (4 questions, 2 scripted right) and 'bamboogle' (3 questions, 1 right)."""
    d = tmp_path / "data"
    d.mkdir()
    write_jsonl(
        d / "alpha.jsonl",
        [
            {"id": "a1", "question": "Capital of France? answer: Paris", "golden_answers": ["Paris"]},
            {"id": "a2", "question": "Largest planet? answer: Saturn", "golden_answers": ["Jupiter"]},
            {
                "id": "a3",
                "question": "Author of Hamlet? answer: William Shakespeare",
                "golden_answers": ["Shakespeare", "William Shakespeare"],
            },
            {"id": "a4", "question": "Boiling point of water in C? answer: 90", "golden_answers": ["100"]},
        ],
    )
    write_jsonl(
        d / "bamboogle.jsonl",
        [
            {
                "id": "b1",
                "question": "Who painted the Mona Lisa? answer: Leonardo da Vinci",
                "golden_answers": ["Leonardo da Vinci"],
            },
            {"id": "b2", "question": "Tallest mountain? answer: K2", "golden_answers": ["Mount Everest"]},
            {"id": "b3", "question": "Chemical symbol of gold? answer: Ag", "golden_answers": ["Au"]},
        ],
    )
    return d
