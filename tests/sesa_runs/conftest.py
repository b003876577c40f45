"""A tiny training run and a tiny eval, written by the project's own writers (TrajectoryStore + Trajectory
records, the real SkillBank with a hashing encoder, metrics lines as the orchestrator writes them,
sesa_eval's RecordStore / make_record / build_report), so every reader is tested against the real
schema. Built once per session; the tests only read them (report tests write plots/ and report.html).

The run ``tiny`` has steps 0-3 committed and step 4 written but not committed (a run in progress), a
bank with versions v0 (seeds), v1 (+1 distilled skill at step 2) and v2 (that skill evicted at step 3),
and solver rollouts of every outcome: correct, wrong with the gold in a retrieved document, wrong with
the gold never retrieved, max turns, malformed, search error.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from sesa_graph.trajectory import Trajectory

GOLD_DOC = {
    "id": "d1",
    "title": "Richard Strauss",
    "text": "Richard Strauss composed the opera Salome in 1905.",
    "score": 12.5,
}
OTHER_DOC = {
    "id": "d2",
    "title": "Salome (play)",
    "text": "Salome is a tragedy by Oscar Wilde <b>in one act</b>.",
    "score": 9.1,
}
NOISE_DOC = {"id": "d3", "title": "Vienna", "text": "Vienna is the capital of Austria.", "score": 3.0}


class HashEncoder:
    """Deterministic bag-of-words embeddings (no model download)."""

    dim = 64

    def _one(self, text):
        v = np.zeros(self.dim, np.float32)
        for w in re.findall(r"[a-z]+", text.lower()):
            v[int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
        n = np.linalg.norm(v)
        return v / n if n else v

    def encode_queries(self, texts):
        return np.stack([self._one(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    encode_documents = encode_queries


def _turn(text, kind, content="", think="", reason=None, finish="stop"):
    return {
        "text": text,
        "kind": kind,
        "content": content,
        "think": think,
        "reason": reason,
        "finish": finish,
    }


def _search(query, think="I should look this up."):
    return _turn(f"<think>{think}</think><search>{query}</search>", "search", query, think)


def _answer(ans, think="The passage says so."):
    return _turn(f"<think>{think}</think><answer>{ans}</answer>", "answer", ans, think)


def solver_rollout(kind: str, gold: str):
    """(turns, searches, status, final, correct) for one outcome kind."""
    if kind == "correct":
        return (
            [_search("composer of Salome"), _answer(gold)],
            [{"query": "composer of Salome", "docs": [GOLD_DOC, NOISE_DOC]}],
            "answered",
            gold,
            True,
        )
    if kind == "wrong_gold_retrieved":
        return (
            [_search("Salome opera"), _answer("Oscar Wilde", "The play is by Wilde.")],
            [{"query": "Salome opera", "docs": [OTHER_DOC, GOLD_DOC]}],
            "answered",
            "Oscar Wilde",
            False,
        )
    if kind == "wrong_gold_not_retrieved":
        return (
            [_search("Salome"), _answer("Gustav Mahler", "Probably Mahler.")],
            [{"query": "Salome", "docs": [OTHER_DOC, NOISE_DOC]}],
            "answered",
            "Gustav Mahler",
            False,
        )
    if kind == "max_turns":
        return (
            [_search("Salome"), _search("Salome composer")],
            [{"query": "Salome", "docs": [NOISE_DOC]}, {"query": "Salome composer", "docs": [OTHER_DOC]}],
            "max_turns",
            None,
            False,
        )
    if kind == "malformed":
        return (
            [_turn("I think the answer is <ans", "invalid", reason="no_action", finish="length")] * 2,
            [],
            "malformed",
            None,
            False,
        )
    if kind == "search_error":
        return [_search("Salome composer")], [], "search_error", None, False
    raise ValueError(kind)


# Per committed step: the outcome of each solver sample of the step's one group (G = 3).
STEP_GROUPS = {
    0: ["correct", "wrong_gold_retrieved", "malformed"],
    1: ["wrong_gold_not_retrieved", "max_turns", "malformed"],
    2: ["correct", "correct", "correct"],
    3: ["search_error", "wrong_gold_retrieved", "correct"],
    4: ["correct", "max_turns", "wrong_gold_not_retrieved"],  # written, not committed
}


def _solver_trajs(step: int, skills: list[str], bank_version: int) -> list[Trajectory]:
    kinds = STEP_GROUPS[step]
    qid = f"{step}-0"
    p = sum(k == "correct" for k in kinds) / len(kinds)
    out = []
    for i, kind in enumerate(kinds):
        turns, searches, status, final, correct = solver_rollout(kind, "Richard Strauss")
        verdict = {
            "correct": correct,
            "score": float(correct),
            "em": float(correct),
            "f1": 1.0 if correct else 0.0,
            "method": "exact" if final else "none",
            "raw": None,
        }
        out.append(
            Trajectory(
                role="solver",
                run="tiny",
                step=step,
                question_id=qid,
                group_id=f"{step}:{qid}:s",
                sample=i,
                prompt_ids=[1, 2, 3],
                completion_ids=[4, 5, 6, 7],
                env_mask=[1, 1, 0, 1],
                logprobs=[-0.1, -0.2, 0.0, -0.3],
                turns_json=json.dumps(turns),
                searches_json=json.dumps(searches),
                n_turns=len(turns),
                n_searches=len(searches),
                status=status,
                final=final,
                question="Who composed the opera based on the play <Salome> by Oscar Wilde?",
                target="Richard Strauss",
                hops=2 if step % 2 else 1,
                skill_ids=skills if i < 2 else [],
                skill_bank_version=bank_version,
                verdict_json=json.dumps(verdict),
                correct=correct,
                reward=float(correct),
                success_rate=p,
                trainable=status != "search_error",
                reused=step == 1,
                policy_version=step,
            )
        )
    return out


def _proposer_trajs(step: int) -> list[Trajectory]:
    good = Trajectory(
        role="proposer",
        run="tiny",
        step=step,
        question_id=f"{step}-0",
        group_id=f"{step}:{step}-0:p",
        prompt_ids=[1],
        completion_ids=[2, 3],
        env_mask=[1, 1],
        logprobs=[-0.5, -0.5],
        turns_json=json.dumps(
            [
                _search("Richard Strauss operas", "Find a work by the target."),
                _turn("<question>Who composed Salome?</question>", "question", "Who composed Salome?"),
            ]
        ),
        searches_json=json.dumps([{"query": "Richard Strauss operas", "docs": [GOLD_DOC]}]),
        n_turns=2,
        n_searches=1,
        status="answered",
        final="Who composed Salome?",
        question="Who composed Salome?",
        target="Richard Strauss",
        hops=1 + step % 3,
        valid=True,
        reward=0.5,
        success_rate=0.5,
    )
    bad = Trajectory(
        role="proposer",
        run="tiny",
        step=step,
        question_id=f"{step}-1",
        group_id=f"{step}:{step}-1:p",
        prompt_ids=[1],
        completion_ids=[2],
        env_mask=[1],
        logprobs=[-1.0],
        turns_json=json.dumps([_turn("<question>Who is Vienna?</question>", "question", "Who is Vienna?")]),
        n_turns=1,
        status="answered",
        final="Who is Vienna?",
        question="Who is Vienna?",
        target="Vienna",
        hops=3,
        valid=False,
        invalid_reason="spoiler",
        reward=-1.0,
    )
    return [good, bad]


def build_run(root: Path, name: str = "tiny") -> Path:
    from sesa_graph.config import load_config
    from sesa_graph.memory import MemoryConfig, Skill, SkillBank
    from training.store import TrajectoryStore

    run = root / name
    run.mkdir(parents=True)
    cfg = load_config(None).model_dump(mode="json")
    cfg["name"] = name
    cfg["train"]["steps"] = 6
    (run / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    enc = HashEncoder()
    bank = SkillBank.create(run / "bank", MemoryConfig(), enc)
    store = TrajectoryStore(run)
    skills = [s.id for s in bank.skills()[:3]]
    distilled = Skill(
        id="d2-abc",
        description="Search the adapted work's author before the adaptation's creator.",
        trigger="A question about an opera or film adapted from a play or novel.",
        avoid="Naming the play's author for the opera.",
        queries=["[work] opera composer"],
        category="decomposition",
        created_step=2,
        source="distilled",
    )
    metrics = []
    for step in range(5):
        bank_skills = skills + (["d2-abc"] if step == 3 else [])
        solver = _solver_trajs(step, bank_skills[-3:], bank.version)
        proposer = _proposer_trajs(step)
        store.write(step, "proposer", proposer)
        store.write(step, "solver", solver)
        if step == 4:
            break  # in progress: shards written, the step is not committed
        bank.apply_outcomes([(t.skill_ids, bool(t.correct), t.status) for t in solver])
        line = {
            "step": step,
            "items": 2,
            "valid_proposals": 1,
            "valid_rate": 0.5,
            "reused_groups": int(step == 1),
            "invalid_reasons": {"spoiler": 1},
            "proposer_reward_mean": -0.25 + 0.1 * step,
            "solver_reward_mean": sum(t.reward for t in solver) / len(solver),
            "solver_success_rates": [solver[0].success_rate],
            "frontier_groups": int(0 < solver[0].success_rate < 1),
            "solver_status": {s: sum(t.status == s for t in solver) for s in {t.status for t in solver}},
            "failures": 1,
            "bank_size": len(bank),
            "bank_version": bank.version,
            "queue": 2,
            "consolidation_started": step == 1,
            "seconds": 1.5,
            "time": 1.0 + step,
        }
        if step == 2:
            v = bank.commit(
                step=2,
                admit=[(distilled, enc.encode_documents([distilled.embed_text()])[0])],
                evict={},
                report={"picked": 3, "admitted": 1, "rejected": {"duplicate": 1}},
            )
            line["consolidation"] = {
                "version": v,
                "admitted": 1,
                "evicted": 0,
                "rejected": {"duplicate": 1},
                "picked": 3,
                "error": None,
            }
        if step == 3:
            v = bank.commit(
                step=3, admit=[], evict={"d2-abc": "low_score"}, report={"picked": 2, "admitted": 0}
            )
            line["consolidation"] = {
                "version": v,
                "admitted": 0,
                "evicted": 1,
                "rejected": {},
                "picked": 2,
                "error": None,
            }
        line["bank_size"], line["bank_version"] = len(bank), bank.version
        if step in (0, 2):  # the learning curve's probe evals (train.probe_every=2)
            cells = {
                m: {"em": 10.0 + step + (m == "on"), "score": 11.0, "n": 8, "errors": 0}
                for m in ("off", "on")
            }
            probe = {"dataset": "probe", "questions": 8, "policy_version": step, **cells}
        metrics.append(line)
        if step in (0, 2):  # as a run writes it: its own record after the step's (training.metrics_log)
            metrics.append({"probe_of": step, "probe": probe})
    bank.close()
    with open(run / "metrics.jsonl", "w") as f:
        f.writelines(json.dumps(m) + "\n" for m in metrics)
    return run


def build_eval(root: Path, bank_dir: Path, name: str = "tiny-eval") -> Path:
    """Two datasets x modes off/on; records through sesa_eval's writer, report.json by build_report."""
    from sesa_eval.datasets import EvalQuestion
    from sesa_eval.harness import EvalSettings, RecordStore
    from sesa_eval.report import build_report
    from sesa_eval.report_markdown import write_report
    from sesa_eval.tasks import Task, make_record
    from sesa_graph.rollout.judge import Verdict

    settings = EvalSettings(
        name=name, out_root=root, datasets=["alpha", "bamboogle"], bank_modes=["off", "on"], bank=bank_dir
    )
    out = settings.out_dir
    out.mkdir(parents=True)
    (out / "eval.json").write_text(
        json.dumps({"identity": settings.identity(), "settings": settings.model_dump(mode="json")})
    )
    store = RecordStore(out / "records.jsonl")
    bank = {"path": str(bank_dir), "version": 2, "n_skills": 15, "embedder": "embedded"}
    plan = {  # (dataset, id): (off outcome, on outcome)
        ("alpha", "a1"): ("correct", "correct"),
        ("alpha", "a2"): ("wrong_gold_not_retrieved", "correct"),
        ("alpha", "a3"): ("malformed", "max_turns"),
        ("bamboogle", "b1"): ("correct", "wrong_gold_retrieved"),
        ("bamboogle", "b2"): ("search_error", "wrong_gold_not_retrieved"),
    }
    skills = ["seed-bridge-entity", "seed-answer-type"]
    records = []
    for (ds, qid), outcomes in plan.items():
        q = EvalQuestion(ds, qid, "Who composed the opera Salome?", ("Richard Strauss",))
        for mode, kind in zip(("off", "on"), outcomes):
            turns, searches, status, final, correct = solver_rollout(kind, "Richard Strauss")
            state = {
                "status": status,
                "final": final,
                "n_turns": len(turns),
                "turns": turns,
                "searches": searches,
                "error": "ConnectionError: refused" if status == "search_error" else None,
            }
            verdict = (
                None
                if status == "search_error"
                else Verdict(
                    correct=correct,
                    score=float(correct),
                    em=float(correct),
                    f1=float(correct),
                    method="exact" if final else "none",
                )
            )
            task = Task(q, mode, None, skills if mode == "on" else [])
            rec = make_record(task, state, verdict, model="scripted", bank=bank, elapsed_s=0.1)
            store.append(rec)
            records.append(rec)
    report = build_report(
        records, settings=settings, datasets=["alpha", "bamboogle"], bank=bank, planned=len(records)
    )
    write_report(out, report)
    return out


@pytest.fixture(scope="session")
def dirs(tmp_path_factory):
    """{"run": the tiny run, "eval": the tiny eval, "empty_run": config.yaml only, "empty_eval": eval.json only}."""
    root = tmp_path_factory.mktemp("reports")
    run = build_run(root / "runs")
    ev = build_eval(root / "evals", run / "bank")
    empty_run = root / "runs" / "empty"
    empty_run.mkdir()
    (empty_run / "config.yaml").write_text((run / "config.yaml").read_text())
    empty_eval = root / "evals" / "empty"
    empty_eval.mkdir()
    (empty_eval / "eval.json").write_text((ev / "eval.json").read_text())
    return {"run": run, "eval": ev, "empty_run": empty_run, "empty_eval": empty_eval}
