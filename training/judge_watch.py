"""A model judge that calls (nearly) everything Correct raises no error: its rewards just train the run toward
noise. :class:`JudgeWatch` adds up a run's solver verdicts step by step (the step metrics' ``judge_methods``:
verdicts by method, ``correct_by``: Correct ones by method) and says so once, when the model's Correct share
runs ``judge.agreement_margin`` above exact match's."""

from __future__ import annotations

from collections import Counter
from typing import Any

MODEL_METHOD = "llm"  # the verdict method of a model judge's answer (sesa_graph.rollout.judge)


class JudgeWatch:
    def __init__(self, judge: Any) -> None:
        self.judge = judge
        self.verdicts: Counter[str] = Counter()
        self.correct: Counter[str] = Counter()
        self.warned = False

    def update(self, metrics: dict[str, Any]) -> str | None:
        """Count one committed step; the warning, the first time the shares part by more than the margin."""
        self.verdicts.update(metrics.get("judge_methods") or {})
        self.correct.update(metrics.get("correct_by") or {})
        if self.warned or self.judge.kind == "none":
            return None
        by_model, total = self.verdicts[MODEL_METHOD], sum(self.verdicts.values())
        if by_model < self.judge.agreement_min_verdicts or not total:
            return None
        model_share = self.correct[MODEL_METHOD] / by_model
        exact_share = self.correct["exact"] / total
        if model_share - exact_share <= self.judge.agreement_margin:
            return None
        self.warned = True
        return (
            f"warning: the model judge called {self.correct[MODEL_METHOD]} of its {by_model} verdicts Correct "
            f"({model_share:.0%}), where exact match found {exact_share:.0%} of all {total} answers Correct: "
            f"read its verdicts (`sesa trace RUN`, judge_method llm) before trusting the rewards; "
            f"judge.agreement_margin is {self.judge.agreement_margin}"
        )
