"""The loading API (sesa_runs.load) against a run and an eval written by the real writers."""

import json
import shutil

import pytest

from sesa_runs import load
from sesa_runs.load import RunNotFoundError

# ---- opening and bad input ----------------------------------------------------------------------------


def test_not_a_run_names_what_is_missing(tmp_path, dirs):
    (tmp_path / "stuff.txt").write_text("x")
    with pytest.raises(RunNotFoundError, match="config.yaml is missing.*stuff.txt"):
        load.open_run(tmp_path)
    with pytest.raises(RunNotFoundError, match="not a directory"):
        load.open_run(tmp_path / "nope")
    with pytest.raises(RunNotFoundError, match="records.jsonl and eval.json are both missing"):
        load.open_eval(tmp_path)
    with pytest.raises(RunNotFoundError, match="neither a run directory"):
        load.open_dir(tmp_path)
    # the wrong kind of directory says which it looks like
    with pytest.raises(RunNotFoundError, match="looks like an eval directory"):
        load.open_run(dirs["eval"])
    with pytest.raises(RunNotFoundError, match="looks like a run directory"):
        load.open_eval(dirs["run"])


def test_open_dir_dispatches(dirs):
    assert isinstance(load.open_dir(dirs["run"]), load.Run)
    assert isinstance(load.open_dir(dirs["eval"]), load.Eval)
    assert load.latest(dirs["run"].parent, "run") is not None
    assert load.latest(dirs["eval"].parent, "eval") is not None
    assert load.latest(dirs["run"] / "missing") is None


# ---- steps, in progress ---------------------------------------------------------------------------------


def test_steps_committed_so_far(dirs):
    run = load.open_run(dirs["run"])
    assert run.steps() == [0, 1, 2, 3]
    assert run.shard_steps() == [0, 1, 2, 3, 4]
    assert run.pending_steps() == [4]  # written, no metrics line yet
    assert not run.finished and run.summary is None
    assert set(run.rollouts()["step"]) == {0, 1, 2, 3}
    assert set(run.rollouts(uncommitted=True)["step"]) == {0, 1, 2, 3, 4}
    assert "in progress" in repr(run)


def test_metrics_lines_torn_and_repeated(tmp_path, dirs):
    run_dir = tmp_path / "r"
    shutil.copytree(dirs["run"], run_dir)
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    again = json.loads(lines[-1]) | {"seconds": 99.0}  # a resumed step writes its line again: the last wins
    text = "\n".join(
        lines + [json.dumps(again), json.dumps({"final_consolidation": {"version": 3}}), '{"step": 4, "it']
    )
    (run_dir / "metrics.jsonl").write_text(text)
    run = load.open_run(run_dir)
    m = run.metrics()
    assert list(m["step"]) == [0, 1, 2, 3]  # the torn line is skipped, the repeat counted once
    assert m.set_index("step").loc[3, "seconds"] == 99.0
    assert run.final_consolidation == {"version": 3}


def test_metrics_frame(dirs):
    m = load.open_run(dirs["run"]).metrics()
    assert list(m["consolidation_version"].fillna(-1)) == [-1, -1, 1, 2]
    assert list(m["consolidation_admitted"]) == [0, 0, 1, 0]
    assert list(m["consolidation_evicted"]) == [0, 0, 0, 1]
    assert m["consolidation_rejected"].iloc[2] == 1
    assert list(m["n_groups"]) == [1, 1, 1, 1]
    assert m["frontier_share"].iloc[0] == 1.0 and m["frontier_share"].iloc[2] == 0.0


def test_empty_run(dirs):
    run = load.open_run(dirs["empty_run"])
    assert run.steps() == [] and run.pending_steps() == []
    assert run.metrics().empty and run.bank_history().empty and run.skills().empty
    df = run.rollouts()
    assert df.empty and list(df.columns) == list(load.COLUMNS)
    assert load.select(df, role="solver", correct=False, skill="x").empty


# ---- rollouts -------------------------------------------------------------------------------------------


def test_rollouts_schema_and_ids(dirs):
    df = load.open_run(dirs["run"]).rollouts()
    assert list(df.columns) == list(load.COLUMNS)
    assert len(df) == 4 * (2 + 3)
    assert df["id"].is_unique
    assert "solver/0/0-0/1" in set(df["id"])
    assert df[df.role == "solver"]["golds"].map(lambda g: list(g) == ["Richard Strauss"]).all()
    with_tokens = load.open_run(dirs["run"]).rollouts("solver", tokens=True)
    assert with_tokens["completion_ids"].iloc[0] == [4, 5, 6, 7]
    assert "completion_ids" not in df.columns


def test_failure_taxonomy(dirs):
    df = load.open_run(dirs["run"]).rollouts("solver")
    kinds = df.set_index("id")["failure"]
    assert kinds["solver/0/0-0/0"] == "correct"
    assert kinds["solver/0/0-0/1"] == "wrong_gold_retrieved"
    assert kinds["solver/1/1-0/0"] == "wrong_gold_not_retrieved"
    assert kinds["solver/1/1-0/1"] == "max_turns"
    assert kinds["solver/0/0-0/2"] == "malformed"
    assert kinds["solver/3/3-0/0"] == "search_error"
    retrieved = df.set_index("id")["gold_retrieved"]
    assert bool(retrieved["solver/0/0-0/1"])
    assert not retrieved["solver/1/1-0/0"]
    table = load.failure_table(df)
    assert dict(zip(table["outcome"], table["n"])) == {
        "correct": 5,
        "malformed": 2,
        "max_turns": 1,
        "search_error": 1,
        "wrong_gold_retrieved": 2,
        "wrong_gold_not_retrieved": 1,
    }
    assert table["share"].sum() == pytest.approx(1.0)


@pytest.mark.parametrize(
    "filters, expect",
    [
        ({"role": "proposer"}, 8),  # 2 per committed step
        ({"role": "solver", "status": "answered"}, 8),
        ({"role": "solver", "status": ["max_turns", "malformed"]}, 3),
        ({"role": "solver", "correct": True}, 5),
        ({"role": "solver", "correct": False}, 7),
        ({"min_reward": 0.5}, 9),  # 5 correct solver rollouts + 4 valid proposals (0.5)
        ({"max_reward": -0.5}, 4),  # the invalid proposals
        ({"skill": "d2-abc"}, 2),  # the distilled skill was in the prompt at step 3 only
        ({"role": "solver", "guided": False}, 4),  # sample 2 of each group had no skills
        ({"failure": "wrong_gold_retrieved"}, 2),
        ({"step": [2, 3], "role": "solver"}, 6),
        ({"dataset": "selfplay", "role": "solver"}, 12),
    ],
)
def test_select(dirs, filters, expect):
    assert len(load.open_run(dirs["run"]).rollouts(**filters)) == expect


def test_rollout_lookup(dirs):
    run = load.open_run(dirs["run"])
    row = run.rollout("solver/4/4-0/0")  # uncommitted rollouts can still be looked up
    assert row["step"] == 4
    with pytest.raises(KeyError, match="ids look like: solver/0/0-0/"):
        run.rollout("solver/0/0-0/9")


# ---- the bank -------------------------------------------------------------------------------------------


def test_bank_history_and_skills(dirs):
    run = load.open_run(dirs["run"])
    h = run.bank_history()
    assert list(h["version"]) == [0, 1, 2]
    assert list(h["n_skills"]) == [15, 16, 15]
    assert list(h["admitted_ids"]) == [[], ["d2-abc"], []]
    assert list(h["evicted_ids"]) == [[], [], ["d2-abc"]]
    assert list(h["step"]) == [0, 2, 3]
    assert h["rejected"].iloc[1] == 1
    sk = run.skills()
    assert len(sk) == 15 and "d2-abc" not in set(sk["id"])
    assert (sk["score"] == sk["helpful"] - sk["hurt"]).all()
    assert sk["retrieved"].sum() > 0  # credited through the real SkillBank.apply_outcomes
    assert "d2-abc" in set(run.snapshot(1)["id"])
    texts = run.bank.skill_texts(["d2-abc", "seed-answer-type", "unknown"], version=1)
    assert texts[0]["description"].startswith("Search the adapted") and texts[0]["evicted"]
    assert texts[2] == {"id": "unknown"}


# ---- evals ----------------------------------------------------------------------------------------------


def test_eval_records(dirs):
    ev = load.open_eval(dirs["eval"])
    df = ev.records()
    assert len(df) == 10 and set(df["mode"]) == {"off", "on"}
    assert set(ev.records(dataset="alpha")["question_id"]) == {"a1", "a2", "a3"}
    assert len(ev.records(mode="on", skill="seed-bridge-entity")) == 5
    err = df.set_index("id").loc["bamboogle/b2/off/greedy"]
    assert err["status"] == "error" and err["failure"] == "search_error"
    # records keep the queries but not the documents: the retrieval half of the taxonomy is unknown
    assert df.set_index("id").loc["alpha/a2/off/greedy", "failure"] == "wrong_retrieval_unknown"
    assert ev.report is not None and ev.settings["bank_modes"] == ["off", "on"]


def test_eval_off_on(dirs):
    t = load.open_eval(dirs["eval"]).off_on().set_index("dataset")
    assert t.loc["alpha", "off"] == pytest.approx(100 / 3) and t.loc["alpha", "on"] == pytest.approx(200 / 3)
    assert t.loc["bamboogle", "n_off"] == 1  # the search-error record is not a score
    assert t.loc["bamboogle", "on - off"] == pytest.approx(-100.0)
    assert t.loc["mean", "on"] == pytest.approx((200 / 3 + 0) / 2)


def test_eval_pairs_and_skills(dirs):
    ev = load.open_eval(dirs["eval"])
    p = ev.paired().set_index("question_id")
    assert (
        p.loc["a2", "change"] == "fixed"
        and p.loc["b1", "change"] == "broken"
        and p.loc["a1", "change"] == "same"
    )
    fx = ev.skill_effects().set_index("skill_id")
    assert fx.loc["seed-bridge-entity", "fired"] == 5
    assert fx.loc["seed-bridge-entity", "helped"] == 1 and fx.loc["seed-bridge-entity", "hurt"] == 1
    firing = ev.skill_firing()
    assert firing.loc["seed-answer-type", "alpha"] == 3


def test_eval_searches_with_documents():
    """A record that keeps its documents gets the full taxonomy."""
    rec = {
        "key": "d/q/on/greedy",
        "dataset": "d",
        "id": "q",
        "mode": "on",
        "golds": ["Paris"],
        "prediction": "Lyon",
        "status": "answered",
        "correct": False,
        "score": 0.0,
        "search_results": [
            {"query": "capital of France", "docs": [{"title": "France", "text": "Its capital is Paris."}]}
        ],
    }
    row = load.Eval._row(rec)
    assert row["gold_retrieved"] is True and row["failure"] == "wrong_gold_retrieved"
    assert load.eval_searches({"queries": ["a"]}) == [{"query": "a", "docs": None}]


def test_empty_eval(dirs):
    ev = load.open_eval(dirs["empty_eval"])
    assert ev.records().empty and ev.off_on().empty and ev.skill_effects().empty and ev.skill_firing().empty
    assert ev.paired().empty and not ev.finished
