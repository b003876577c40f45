"""The learning curve: every ``train.probe_every`` steps, a greedy eval of the served solver on the probe set.

After step t is committed (``training.orchestrator``), :class:`ProbeEval` runs :func:`sesa_eval.harness.evaluate`
on ``train.probe_dataset`` with the policy client the run already has (the solver's vLLM server or local
model, serving the weights that ran step t: policy version t), the run's search backend and judge, in bank
mode ``off`` and ``on`` (the run's live bank, opened read-only, with the memory's own encoder). Nothing new is
loaded, and it runs while the trainers update on step t, so the orchestrator's wait for them absorbs part of
it (the two share the CPU).

Where it goes:

- ``runs/NAME/probe/<set>.jsonl``: the questions every probe of the run asks (``train.probe_limit`` of them,
  evenly spaced over the set);
- ``runs/NAME/probe/step-N/``: the eval directory (``records.jsonl`` per question and mode, ``report.*``),
  openable like any eval (``sesa report runs/NAME/probe/step-N``);
- ``metrics.jsonl``: ``{"probe_of": t, "probe": {...}}`` (EM and score in % per mode, with n), appended
  through :func:`training.metrics_log.append_record` after step t's record; it has no ``step`` key, so the
  file keeps one line per step, and :func:`training.metrics_log.read_metrics` gives it out as step t's
  ``probe``.

Resume: a step whose latest record has a probe is not probed again. A probe killed half-way leaves a partial
``probe/step-N/`` and no probe in the metrics; its step is committed, so it is not run again, and its
weights are gone by then (the trainer has moved on): the curve has a gap there, nothing is wrong. A
directory left by such an attempt is cleared before a probe of that step starts, so records made with
other weights are never reused.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from pathlib import Path
from typing import Any

from sesa_graph.config import RunConfig
from sesa_graph.fsutil import write_jsonl_atomic
from tools.errors import UserError
from training.metrics_log import append_record, read_metrics

log = logging.getLogger(__name__)

PROBE_DIR = "probe"


def probe_steps(every: int, steps: int) -> list[int]:
    """The steps probed: 0 (the starting weights), every ``every``-th, and the last one; none when 0."""
    if every <= 0:
        return []
    return sorted({s for s in range(0, steps, every)} | {steps - 1})


def spread(questions: list[Any], limit: int | None) -> list[Any]:
    """``limit`` questions evenly spaced over the set, in its order (the probe set is ordered by hops and
    question form, so its first ``limit`` would all be of one kind); all of them without a limit."""
    if limit is None or limit >= len(questions):
        return list(questions)
    return [questions[i * len(questions) // limit] for i in range(limit)]


def probe_dir(run_dir: str | Path, step: int) -> Path:
    return Path(run_dir) / PROBE_DIR / f"step-{step}"


def probe_modes(cfg: RunConfig) -> list[str]:
    """``train.probe_bank_modes`` less ``on`` when the run keeps no bank."""
    return [m for m in cfg.train.probe_bank_modes if m == "off" or cfg.memory.mode != "off"]


class ProbeEval:
    """The probe evals of one orchestrator; built only when ``train.probe_every`` > 0."""

    def __init__(
        self,
        cfg: RunConfig,
        run_dir: str | Path,
        *,
        policy: Any,
        search: Any,
        judge: Any,
        encoder: Any = None,
    ) -> None:
        from sesa_eval.datasets import load_datasets

        self.cfg, self.run_dir = cfg, Path(run_dir)
        self.policy, self.search, self.judge, self.encoder = policy, search, judge, encoder
        self.steps = set(probe_steps(cfg.train.probe_every, cfg.train.steps))
        self.modes = probe_modes(cfg)
        try:  # now, not after the first step's rollouts
            ((name, questions),) = load_datasets([cfg.train.probe_dataset], None).items()
        except UserError as exc:
            raise UserError(
                f"train.probe_dataset: {exc}\n(set train.probe_every=0 to train without the learning curve)"
            ) from None
        picked = spread(questions, cfg.train.probe_limit)
        self.questions = len(picked)
        # the questions every probe of this run asks, as a dataset file of the probe set's name
        self.dataset = self.run_dir / PROBE_DIR / f"{name}.jsonl"
        self.dataset.parent.mkdir(parents=True, exist_ok=True)
        write_jsonl_atomic(
            self.dataset,
            [{"id": q.id, "question": q.question, "golden_answers": list(q.golds)} for q in picked],
        )

    def due(self, step: int) -> bool:
        return step in self.steps

    def done(self, step: int) -> bool:
        """Step ``step``'s latest metrics record already holds a probe."""
        return "probe" in read_metrics(self.run_dir).by_step.get(step, {})

    def after_step(self, step: int, record: dict[str, Any], policy_version: int, bank_version: Any) -> Any:
        """Probe the solver after step ``step`` was committed with ``record`` when it is due and not done:
        append it as step ``step``'s probe record and return it (None when nothing ran)."""
        if not self.due(step) or self.done(step):
            return None
        t0 = time.perf_counter()
        probe: dict[str, Any] = {
            "dataset": self.cfg.train.probe_dataset,
            "questions": self.questions,
            "policy_version": policy_version,
            "bank_version": bank_version,
            "dir": str(probe_dir(self.run_dir, step).relative_to(self.run_dir)),
        }
        try:
            probe.update(self._evaluate(step))
        except Exception as exc:  # noqa: BLE001 - a failed probe is recorded; training goes on
            log.warning("probe eval of step %d failed: %s", step, exc)
            probe["error"] = f"{type(exc).__name__}: {exc}"
        probe["seconds"] = round(time.perf_counter() - t0, 2)
        append_record(self.run_dir, {"probe_of": step, "probe": probe})
        return probe

    def _evaluate(self, step: int) -> dict[str, Any]:
        from sesa_eval.harness import evaluate
        from sesa_eval.settings import EvalSettings

        cfg, out = self.cfg, probe_dir(self.run_dir, step)
        shutil.rmtree(out, ignore_errors=True)  # a killed attempt's records: other weights
        settings = EvalSettings(
            name=out.name,
            out_root=out.parent,
            datasets=[str(self.dataset)],
            bank_modes=self.modes,
            bank=self.run_dir / "bank" if "on" in self.modes else None,
            top_k=cfg.memory.top_k,
            policy=cfg.solver_policy,
            search=cfg.search,
            solver=cfg.solver,
            judge=cfg.judge,
            models=dict(cfg.models),
        )
        outcome = asyncio.run(
            evaluate(
                settings,
                policy=self.policy,
                search=self.search,
                judge=self.judge,
                encoder=self.encoder,
                overwrite=True,
            )
        )
        return summarize(outcome.report, self.modes)


def summarize(report: dict[str, Any], modes: list[str]) -> dict[str, Any]:
    """Per mode EM and score (%, the unweighted mean over the report's datasets) with n and errors."""
    metrics = report["metrics"]
    # the answerable subset (a gold answer within the search's reach, sesa_eval.answerability), where known
    answerable = (report.get("answerable") or {}).get("metrics", {}).get("em", {})
    out: dict[str, Any] = {"complete": report.get("complete"), "aborted": report.get("aborted")}
    for mode in modes:
        em, score = metrics["em"][mode]["mean"], metrics["judge"][mode]["mean"]
        out[mode] = {
            "em": _round(em["mean"]),
            "score": _round(score["mean"]),
            "n": em["n"],
            "errors": em["errors"],
        }
        if mode in answerable:
            sub = answerable[mode]["mean"]
            out[mode].update(em_answerable=_round(sub["mean"]), n_answerable=sub["n"])
    return out


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 2)
