"""`sesa bank` commands (show, diff, export, mine) on a real bank."""

import json

import pytest
from fakes import ScriptedDistiller, by_index, failure
from typer.testing import CliRunner

from sesa_cli.bank import bank_app
from sesa_graph.memory import MemoryConfig, SkillBank
from sesa_graph.memory.skill import load_skill_file

runner = CliRunner(env={"COLUMNS": "200"})


@pytest.fixture
def grown_bank(make_memory, tmp_path):
    mem = make_memory(ScriptedDistiller(by_index), name="run/memory", consolidate_min_pending=3)
    mem.add_failures([failure(i) for i in range(3)])
    mem.maybe_consolidate(10)
    admitted = mem.commit(10, wait=True, timeout=60).admitted
    mem.apply_outcomes(
        [(["seed-dates-exact", admitted[0]], True, "answered")] * 2
        + [(["seed-location-chain"], False, "answered")]
    )
    mem.add_failures([failure(i) for i in range(3, 6)])
    mem.maybe_consolidate(20)
    mem.commit(20, wait=True, timeout=60)
    return tmp_path / "run", admitted


def test_show_sorts_and_summarizes(grown_bank):
    run, admitted = grown_bank
    res = runner.invoke(bank_app, ["show", str(run), "--top", "3", "--sort", "helpful"])  # a run dir works
    assert res.exit_code == 0, res.output
    assert "version 2" in res.output and "skills 21 (15 seeds)" in res.output
    lines = [ln for ln in res.output.splitlines() if "│" in ln and ("seed-" in ln or "d-" in ln)]
    assert len(lines) == 3 and ("seed-dates-exact" in lines[0] or admitted[0] in lines[0])
    res = runner.invoke(bank_app, ["show", str(run / "memory"), "--sort", "hurt", "-n", "1"])
    assert "seed-location-chain" in res.output
    assert "admitted=6" in res.output


def test_diff_between_snapshots(grown_bank):
    run, admitted = grown_bank
    res = runner.invoke(bank_app, ["diff", "0", "2", "--bank", str(run)])
    assert res.exit_code == 0, res.output
    assert "+6 admitted, -0 evicted" in res.output and "seed-dates-exact: retrieved 0->2" in res.output
    assert "(temporal)" in res.output  # categories print literally, not as rich markup
    res = runner.invoke(
        bank_app,
        ["diff", str(run / "memory/snapshots/v0001.jsonl"), str(run / "memory/snapshots/v0002.jsonl")],
    )
    assert "+3 admitted" in res.output and f"{admitted[0]}: retrieved 0->2, helpful 0->2" in res.output
    res = runner.invoke(bank_app, ["diff", "0", "9", "--bank", str(run)])
    assert res.exit_code == 2 and "v0009.jsonl" in res.output


def test_export_yaml_primes_a_new_bank(grown_bank, tmp_path, encoder):
    run, _ = grown_bank
    out = tmp_path / "exported.yaml"
    res = runner.invoke(bank_app, ["export", str(run), "--out", str(out)])
    assert res.exit_code == 0, res.output
    _, skills = load_skill_file(out)
    assert len(skills) == 6 and not any(s.seed for s in skills)
    bank = SkillBank.create(tmp_path / "primed", MemoryConfig(priming_files=[out]), encoder)
    assert len(bank) == 21
    bank.close()
    res = runner.invoke(bank_app, ["export", str(run), "--format", "jsonl"])
    rows = [json.loads(x) for x in res.output.splitlines()]
    assert len(rows) == 21 and {"retrieved", "helpful", "hurt", "seed"} <= set(rows[0])


def test_show_on_a_missing_bank_names_the_path(tmp_path):
    res = runner.invoke(bank_app, ["show", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "nope" in res.output


def test_mine_deduplicates_and_writes_a_priming_file(tmp_path, encoder):
    run = tmp_path / "boot"
    run.mkdir()
    records = (
        [failure(i) for i in range(12)]
        + [failure(3), failure(4, correct=True)]
        + [failure(20, status="malformed")]
    )
    (run / "failures.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "priming.yaml"
    res = runner.invoke(
        bank_app, ["mine", str(run), "--out", str(out), "--distiller", "fakes:mining_distiller"]
    )
    assert res.exit_code == 0, res.output
    assert "distilled 12 failures" in res.output and "8 admitted" in res.output
    _, skills = load_skill_file(out)
    assert len(skills) == 8 and all(s.source == "mined" and s.id.startswith("m-") for s in skills)
    assert all(s.source_failures for s in skills)
    (run / "failures.jsonl").write_text('{"question": "q"}\nnot json\n')
    res = runner.invoke(  # (--force: the first mine wrote that file)
        bank_app, ["mine", str(run), "--out", str(out), "--distiller", "fakes:mining_distiller", "--force"]
    )
    assert res.exit_code == 2 and "failures.jsonl:2" in res.output


def test_an_unset_distiller_credential_is_an_error_not_a_disabled_bank(tmp_path, monkeypatch):
    monkeypatch.delenv("SESA_TEST_UNSET_KEY", raising=False)
    res = runner.invoke(
        bank_app,
        [
            "mine",
            str(tmp_path),
            "--distiller",
            "openai:m@http://127.0.0.1:9/v1",
            "--api-key-env",
            "SESA_TEST_UNSET_KEY",
        ],
    )
    assert res.exit_code == 2 and "SESA_TEST_UNSET_KEY is not set" in res.output


def test_mine_reads_the_per_step_files_sesa_train_writes_and_keeps_the_first_n(tmp_path):
    from sesa_graph.fsutil import write_jsonl_atomic
    from sesa_graph.memory.mining import failures_path

    run = tmp_path / "boot"
    write_jsonl_atomic(failures_path(run, 0), [failure(i) for i in range(6)])
    write_jsonl_atomic(failures_path(run, 1), [failure(i) for i in range(6, 12)])
    out = tmp_path / "priming.yaml"
    args = ["mine", str(run), "--out", str(out), "--distiller", "fakes:mining_distiller", "--keep", "3"]
    res = runner.invoke(bank_app, args)
    assert res.exit_code == 0, res.output
    assert "distilled 12 failures" in res.output  # both steps' records were read
    assert len(load_skill_file(out)[1]) == 3
    empty = tmp_path / "empty"
    empty.mkdir()
    res = runner.invoke(bank_app, ["mine", str(empty), "--distiller", "fakes:mining_distiller"])
    assert res.exit_code == 2 and "written by `sesa train`" in res.output


def test_a_bank_without_seeds_starts_empty(tmp_path, encoder):
    bank = SkillBank.create(tmp_path / "bank", MemoryConfig(use_seeds=False), encoder)
    assert bank.skills() == []
