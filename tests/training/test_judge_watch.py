"""A model judge that agrees with everything is noticed: `sesa train` warns once, in the batch log and in
metrics.jsonl, when the model's Correct share runs judge.agreement_margin above exact match's."""

import json
from pathlib import Path
from types import SimpleNamespace

from sesa_graph.config import JudgeConfig
from training.judge_watch import JudgeWatch

MODEL = JudgeConfig(kind="model", endpoint="qwen")


def step(exact_correct: int, by_model: int, model_correct: int, misses: int) -> dict:
    """One step's solver verdict counts as the step metrics hold them."""
    return {
        "judge_methods": {"exact": exact_correct, "llm": by_model, "no_overlap": misses},
        "correct_by": {"exact": exact_correct, "llm": model_correct},
    }


def test_a_judge_that_calls_every_miss_correct_is_named_once():
    watch = JudgeWatch(MODEL)
    assert watch.update(step(1, 5, 5, 4)) is None  # 5 model verdicts: below agreement_min_verdicts
    warning = watch.update(step(1, 5, 5, 4))
    assert warning is not None and "called 10 of its 10 verdicts Correct (100%)" in warning
    assert "exact match found 10% of all 20 answers" in warning and "judge.agreement_margin" in warning
    assert watch.update(step(1, 5, 5, 4)) is None  # once per run


def test_a_judge_that_rescues_a_few_paraphrases_is_quiet():
    watch = JudgeWatch(MODEL)
    for _ in range(6):
        assert watch.update(step(2, 4, 1, 4)) is None  # 25% of the misses it saw, exact match 20%


def test_exact_match_alone_and_a_margin_of_one_never_warn():
    for judge in (JudgeConfig(kind="none"), JudgeConfig(kind="model", endpoint="qwen", agreement_margin=1)):
        watch = JudgeWatch(judge)
        assert all(watch.update(step(0, 10, 10, 0)) is None for _ in range(3))


def test_sesa_train_prints_the_warning_and_records_it(tmp_path: Path, capsys):
    from training import launch

    class Orchestrator:
        def run(self, start, alive, on_step):
            for s in range(3):
                metrics = {"step": s, "valid_proposals": 1, "items": 4, **step(0, 4, 4, 6)}
                on_step(SimpleNamespace(step=s, metrics=metrics))

    launch.show_steps(Orchestrator(), 0, lambda: None, [], 3, 0.0, judge=MODEL, run_dir=tmp_path)
    out = capsys.readouterr().out
    assert out.count("warning: the model judge called 8 of its 8 verdicts Correct") == 1
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["after_step"] for r in records if "judge_warning" in r] == [1]
