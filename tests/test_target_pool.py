"""Pool files (SSP's answer-pool format): read bounded, each bad row one error naming file, line and field;
hop counts per row; `sesa targets build` from a question/answer file; the GPU configs' pool."""

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sesa_cli.main import build_app
from sesa_graph.config import load_config
from sesa_graph.corpus.target_build import build_pool
from sesa_graph.corpus.targets import Target, check_pool, load_pool, load_pool_file
from tools.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
GPU = ["qwen3-4b-8xa100", "qwen3-4b-h200", "qwen3-8b-2x8h100"]


def _write(path: Path, *rows) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_a_pool_file_gives_each_target_its_own_hop_count(tmp_path):
    p = _write(
        tmp_path / "pool.jsonl",
        {
            "ground_truth": ["Richard Strauss", "R. Strauss"],
            "search_turns": 3,
            "sys_question_example": "Who ...?",
        },
        "",
        {"ground_truth": "Paris", "search_turns": "1"},  # a hop count written as text
    )
    assert load_pool_file(p) == [Target("Richard Strauss", 3, "Who ...?"), Target("Paris", 1, None)]
    assert load_pool(str(p), max_hops=1) == load_pool_file(p)  # max_hops is for the embedded pool only


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("not json", "line 2: not JSON"),
        ("[1, 2]", "line 2: a JSON list, not an object"),
        ('{"answer": "x", "search_turns": 1}', "line 2: field 'ground_truth'"),
        ('{"ground_truth": [], "search_turns": 1}', "line 2: field 'ground_truth'"),
        ('{"ground_truth": "  ", "search_turns": 1}', "line 2: field 'ground_truth'"),
        ('{"ground_truth": "x"}', "line 2: field 'search_turns' must be a hop count 1..5, got None"),
        ('{"ground_truth": "x", "search_turns": 9}', "line 2: field 'search_turns'"),
        ('{"ground_truth": "x", "search_turns": true}', "line 2: field 'search_turns'"),
        (
            '{"ground_truth": "x", "search_turns": 2, "sys_question_example": 3}',
            "field 'sys_question_example'",
        ),
    ],
)
def test_a_bad_row_is_one_error_naming_file_line_and_field(tmp_path, line, says):
    p = _write(tmp_path / "pool.jsonl", {"ground_truth": "ok", "search_turns": 1}, line)
    with pytest.raises(UserError, match="pool.jsonl") as err:
        load_pool_file(p)
    assert says in str(err.value)


def test_unreadable_pools_are_refused(tmp_path, monkeypatch):
    with pytest.raises(
        UserError, match="does not exist: use SSP's released answer pool .*sesa targets build"
    ):
        load_pool_file(tmp_path / "missing.jsonl")
    (tmp_path / "bad.jsonl").write_bytes(b'{"ground_truth": "\xff", "search_turns": 1}\n')
    with pytest.raises(UserError, match="line 1: not UTF-8"):
        load_pool_file(tmp_path / "bad.jsonl")
    with pytest.raises(UserError, match="has no rows"):
        load_pool_file(_write(tmp_path / "empty.jsonl", ""))
    with pytest.raises(UserError, match="is a directory"):
        load_pool_file(tmp_path)
    os.mkfifo(tmp_path / "fifo")  # would block a plain read forever
    with pytest.raises(UserError, match="not a regular file"):
        load_pool_file(tmp_path / "fifo")
    monkeypatch.setattr("sesa_graph.corpus.targets.MAX_POOL_BYTES", 64)
    with pytest.raises(UserError, match="larger than"):
        load_pool_file(_write(tmp_path / "huge.jsonl", *[{"ground_truth": "x", "search_turns": 1}] * 4))


def test_gpu_configs_name_a_pool_and_refuse_to_start_without_it(tmp_path, monkeypatch):
    for name in GPU:
        cfg = load_config(ROOT / "configs" / f"{name}.yaml")  # loads: the file is read when a run starts
        assert cfg.train.target_pool.endswith(".jsonl") and not cfg.proposer.force_final_question
        (tmp_path / name).mkdir()
        monkeypatch.chdir(tmp_path / name)
        with pytest.raises(
            UserError, match=r"target pool runs/targets/\S+ does not exist.*sesa targets build"
        ):
            check_pool(cfg.train.target_pool)
        pool = tmp_path / name / cfg.train.target_pool
        pool.parent.mkdir(parents=True, exist_ok=True)
        _write(pool, {"ground_truth": "Paris", "search_turns": 2})
        check_pool(cfg.train.target_pool)  # with the file there it starts
    assert load_config(None).train.target_pool == "embedded"  # the CPU default needs no file
    check_pool("embedded")


def test_build_takes_hop_counts_from_a_field_an_id_or_the_kind(tmp_path):
    src = _write(
        tmp_path / "qa.jsonl",
        {"question": "Q1?", "golden_answers": ["A1", "a1b"], "data_source": "nq"},
        {"question": "Q2?", "answer": "A2", "data_source": "hotpotqa"},
        {"question": "Q3?", "answers": ["A3"], "id": "4hop1__1_2_3_4"},
        {"question": "Q4?", "answer": "A4", "hops": 3},
        {"question": "Q5?", "answer": "a1"},  # a repeated answer: the first row wins
        {"question": "Q6?", "answer": "A6"},
    )
    rows = build_pool(src, hops=2)
    assert [(r["ground_truth"], r["search_turns"]) for r in rows] == [
        ("A1", 1),
        ("A2", 2),
        ("A3", 4),
        ("A4", 3),
        ("A6", 2),
    ]
    # examples are questions of other rows with the same hop count, never the row's own
    by = {r["ground_truth"]: r for r in rows}
    assert by["A2"]["sys_question_example"] == "Q6?" and by["A6"]["sys_question_example"] == "Q2?"
    assert "sys_question_example" not in by["A1"]  # no other 1-hop row
    with pytest.raises(UserError, match="line 1: no hop count.*--kind"):
        build_pool(_write(tmp_path / "nohops.jsonl", {"question": "Q?", "answer": "A"}))
    with pytest.raises(UserError, match="line 1: no answer field"):
        build_pool(_write(tmp_path / "noans.jsonl", {"question": "Q?"}), hops=1)
    with pytest.raises(UserError, match="--kind 'squad' is not known"):
        build_pool(src, kind="squad")


def test_cli_builds_a_pool_that_loads(tmp_path):
    out = tmp_path / "pool" / "targets.jsonl"
    qa = ROOT / "tests" / "training" / "smoke_qa.jsonl"
    app = build_app()
    res = CliRunner().invoke(app, ["targets", "build", "--from", str(qa), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "7 targets; by hop count {1: 3, 2: 3, 3: 1}" in res.output
    targets = load_pool_file(out)
    assert len(targets) == 7 and all(t.example for t in targets if t.hops < 3)
    res = CliRunner().invoke(app, ["targets", "build", "--from", str(qa), "-o", str(out)])
    assert res.exit_code != 0 and "exists" in res.output and "--force" in res.output
    res = CliRunner().invoke(app, ["targets", "show", str(out)])
    assert res.exit_code == 0 and "7 targets" in res.output and "6 with example questions" in res.output
