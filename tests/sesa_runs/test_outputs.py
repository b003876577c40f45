"""sesa_runs.outputs: where a command may write a file a user named."""

import errno

import pytest

from sesa_runs.outputs import output_file, owner_of, writing
from tools.errors import UserError


@pytest.fixture
def tree(tmp_path):
    bank = tmp_path / "bank"
    (bank / "snapshots").mkdir(parents=True)
    (bank / "state.json").write_text("{}")
    run = tmp_path / "runs" / "r"
    (run / "trajectories").mkdir(parents=True)
    (run / "config.yaml").write_text("name: r\n")
    ev = tmp_path / "evals" / "e"
    ev.mkdir(parents=True)
    (ev / "eval.json").write_text("{}")
    (tmp_path / "old.yaml").write_text("x")
    return tmp_path


def test_owners(tree):
    assert owner_of(tree / "bank" / "state.json") == ("skill bank", tree / "bank")
    assert owner_of(tree / "runs" / "r" / "plots") == ("run", tree / "runs" / "r")
    assert owner_of(tree / "evals" / "e") == ("eval", tree / "evals" / "e")
    assert owner_of(tree) is None
    (tree / "configs").mkdir()
    (tree / "configs" / "config.yaml").write_text("a: 1\n")
    assert owner_of(tree / "configs") is None  # a config.yaml alone is no run


@pytest.mark.parametrize(
    "rel, force, message",
    [
        ("bank/state.json", True, "inside the skill bank"),
        ("runs/r/new.yaml", True, "inside the run"),
        ("evals/e/report.json", True, "inside the eval"),
        ("old.yaml", False, "already exists; pass --force"),
        ("bank", True, "is a directory"),
        ("old.yaml/x.yaml", True, "is a file, not a directory"),
    ],
)
def test_refused(tree, rel, force, message):
    with pytest.raises(UserError, match=message):
        output_file(tree / rel, "-o", force=force)


def test_allowed(tree):
    assert output_file(tree / "old.yaml", "-o", force=True) == tree / "old.yaml"
    assert output_file(tree / "new" / "x.yaml", "-o") == tree / "new" / "x.yaml"


def test_a_symlink_into_a_bank_is_refused(tree):
    (tree / "link.json").symlink_to(tree / "bank" / "state.json")
    with pytest.raises(UserError, match="skill bank"):
        output_file(tree / "link.json", "-o", force=True)


def test_write_errors_name_the_file(tree):
    with (
        pytest.raises(UserError, match="cannot write the report .*out.html: No space left"),
        writing(tree / "out.html", "report"),
    ):
        raise OSError(errno.ENOSPC, "No space left on device", str(tree / "out.html"))
