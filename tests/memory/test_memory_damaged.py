"""Damaged bank files, seen by `sesa bank show` and by a writer's open: an error naming the file and how
to recover (exit 2), never a traceback and never a silently shorter bank; what the writer can rebuild
(skills.jsonl, from Chroma) it rebuilds. A pending change is named by show, diff and export."""

import json

import pytest
from bank_faults import Killed, arm, grown_bank
from hash_encoder import HashEncoder
from typer.testing import CliRunner

from sesa_cli.bank import bank_app
from sesa_graph.memory import BankCorruptError, MemoryConfig, SkillBank, SkillMemory

runner = CliRunner(env={"COLUMNS": "300"})


@pytest.fixture
def bank_path(tmp_path):
    bank = SkillBank.create(tmp_path / "bank", MemoryConfig(), HashEncoder())
    bank.apply_outcomes([(["seed-dates-exact"], True, "answered")])
    bank.close()
    return tmp_path / "bank"


def _cut_last_line(p):
    data = (p / "skills.jsonl").read_bytes()
    (p / "skills.jsonl").write_bytes(data[:-40])


def _bad_middle_line(p):
    lines = (p / "skills.jsonl").read_text().splitlines(True)
    lines[3] = "{oops\n"
    (p / "skills.jsonl").write_text("".join(lines))


UNREBUILDABLE = [  # (file, damage, what the message says is wrong, how it says to recover)
    ("queue.json", "[]", "'entries' list", "echo"),
    ("queue.json", '{"entries": [', "not valid JSON", "echo"),
    ("queue.json", '{"entries": [{"key": 1}]}', "entry 0: key", "echo"),
    ("queue.json", b"\xff\xfe{}", "utf-8", "echo"),
    ("state.json", "[]", "expected a JSON object", "@v0"),
    ("state.json", "{trunc", "not valid JSON", "@v0"),
    ("state.json", '{"format": 1}', "are missing", "@v0"),
    ("state.json", b"\xff\xfe", "utf-8", "@v0"),
    ("journal.json", "{}", "are missing", "delete it"),
    ("journal.json", "[]", "expected a JSON object", "delete it"),
    ("journal.json", '{"state": ', "not readable JSON", "delete it"),
    ("journal.json", '{"kind": "counters", "counters": {"x": {}}}', "'counters'", "delete it"),
]


@pytest.mark.parametrize("name, data, what, fix", UNREBUILDABLE)
def test_a_damaged_file_is_one_clear_error_for_readers_and_the_writer(bank_path, name, data, what, fix):
    (bank_path / name).write_bytes(data if isinstance(data, bytes) else data.encode())
    res = runner.invoke(bank_app, ["show", str(bank_path)])
    assert res.exit_code == 2, res.output  # a one-line error; a traceback would exit 1
    msg = " ".join(res.output.split())
    assert f"{bank_path / name}" in msg and what in msg and fix in msg
    with pytest.raises(BankCorruptError, match=name) as e:
        SkillMemory.open(bank_path, MemoryConfig(mode="static"), encoder=HashEncoder())
    assert fix in str(e.value)


@pytest.mark.parametrize(
    "damage, where",
    [
        (_cut_last_line, "skills.jsonl: its last line is cut short"),
        (_bad_middle_line, "skills.jsonl:4: not valid JSON"),
        (lambda p: (p / "skills.jsonl").write_text('{"id": 3}\n'), "skills.jsonl:1: not a skill"),
    ],
)
def test_a_damaged_skills_file_is_an_error_for_readers_and_rebuilt_by_the_writer(bank_path, damage, where):
    damage(bank_path)
    res = runner.invoke(bank_app, ["show", str(bank_path)])
    msg = " ".join(res.output.split())
    assert res.exit_code == 2 and where in msg and f"{bank_path}@v0" in msg, res.output  # never 14 skills
    res = runner.invoke(bank_app, ["show", f"{bank_path}@v0"])  # the way out it names works
    assert res.exit_code == 0 and "skills 15 (15 seeds)" in res.output
    SkillBank.open(bank_path, MemoryConfig(), HashEncoder()).close()  # rewrites it from Chroma
    res = runner.invoke(bank_app, ["show", str(bank_path), "--sort", "helpful", "-n", "1"])
    assert res.exit_code == 0 and "skills 15 (15 seeds)" in res.output and "seed-dates-exact" in res.output


def test_show_export_and_diff_name_a_pending_commit_and_show_the_last_finished_one(tmp_path, monkeypatch):
    from bank_faults import second_commit

    bank, queue = grown_bank(tmp_path / "bank")
    arm(bank, monkeypatch, 8)  # stopped with skills.jsonl rewritten, state.json not yet
    with pytest.raises(Killed):
        second_commit(bank, queue)
    bank.close()
    monkeypatch.undo()
    path = tmp_path / "bank"
    assert "m-c" in (path / "skills.jsonl").read_text()  # the raw file is already ahead of the state
    res = runner.invoke(bank_app, ["show", str(path), "-n", "0"])
    out = " ".join(res.output.split())
    assert res.exit_code == 0 and "unfinished commit to version 2 (consolidation at step 2) is pending" in out
    assert "version 1 skills 17 (15 seeds)" in out and "pending failures 4" in out and "m-c" not in out
    res = runner.invoke(bank_app, ["export", str(path), "--format", "jsonl"])
    ids = [json.loads(x)["id"] for x in res.stdout.splitlines()]
    assert "m-b" in ids and "m-c" not in ids and "pending" in res.stderr
    res = runner.invoke(bank_app, ["diff", "0", "1", "--bank", str(path)])
    assert res.exit_code == 0 and "unfinished commit to version 2" in res.stderr
    SkillBank.open(path, MemoryConfig(), HashEncoder()).close()  # the next writer finishes it
    res = runner.invoke(bank_app, ["show", str(path), "-n", "0"])
    assert "pending" not in res.stderr and "version 2 skills 17" in " ".join(res.output.split())
