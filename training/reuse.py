"""The pool of earlier valid questions that refills the solver's batch (the reference's "reuse" strategy).

Each entry remembers the step that proposed it and the solver group success rate p it got at every step it
was asked, so a resumed run can rewind the pool to the state it had before the step it re-runs, and the
``frontier`` strategy can ask again the questions that last split their group (0 < p < 1): a group where
every rollout scored the same gives GRPO a zero advantage, so it teaches the solver nothing.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from sesa_graph.fsutil import write_json_atomic
from tools.errors import UserError

KEEP = 500  # newest entries kept on disk; older questions are rarely asked again


class ReusePool:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        raw = _load(self.path)
        # files from before rates were kept: step -1 (always earlier), no rates
        self.entries: list[dict[str, Any]] = [dict({"step": -1, "rates": {}}, **e) for e in raw]

    def __len__(self) -> int:
        return len(self.entries)

    def rewind(self, step: int) -> None:
        """Forget what steps >= ``step`` added: a step killed after saving the pool runs again from scratch."""
        self.entries = [
            dict(e, rates={k: v for k, v in e["rates"].items() if int(k) < step})
            for e in self.entries
            if e["step"] < step
        ]

    def add(self, step: int, items: Iterable[Mapping[str, Any]]) -> None:
        known = {e["question"] for e in self.entries}
        for it in items:
            if it["question"] not in known:
                known.add(it["question"])
                self.entries.append(
                    {
                        "question": it["question"],
                        "target": it["target"],
                        "hops": it["hops"],
                        "step": step,
                        "rates": {},
                    }
                )

    def record(self, step: int, rates: Mapping[str, float]) -> None:
        """The success rate each question's solver group got at ``step`` (question text -> p)."""
        for e in self.entries:
            if e["question"] in rates:
                e["rates"][str(step)] = rates[e["question"]]

    def pick(
        self,
        step: int,
        n: int,
        exclude: Iterable[str] = (),
        strategy: Literal["uniform", "frontier"] = "uniform",
        seed: int = 0,
    ) -> list[dict[str, Any]]:
        """Up to ``n`` distinct questions proposed before ``step`` and not in ``exclude``.

        ``uniform`` draws at random; ``frontier`` first draws those whose last group had 0 < p < 1, then
        those never asked yet, then the rest.
        """
        skip = set(exclude)
        cands = [e for e in self.entries if e["step"] < step and e["question"] not in skip]
        rng = random.Random(f"reuse:{seed}:{step}:{len(skip)}")
        rng.shuffle(cands)
        if strategy == "frontier":
            cands.sort(key=_frontier_rank)  # stable: random order within a rank
        return [{"question": e["question"], "target": e["target"], "hops": e["hops"]} for e in cands[:n]]

    def save(self) -> None:
        write_json_atomic(self.path, self.entries[-KEEP:])


def _load(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        ok = isinstance(raw, list) and all(
            isinstance(e, dict) and {"question", "target", "hops"} <= set(e) for e in raw
        )
        why = "" if ok else "expected a list of {question, target, hops, step, rates} objects"
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        why = f"not valid JSON ({exc})"
    if why:
        raise UserError(
            f"{path} is damaged: {why}. It is the pool of earlier questions; move it away to start an empty "
            "pool (the run goes on, reusing only questions proposed from now on)"
        )
    return raw


def _frontier_rank(e: Mapping[str, Any]) -> int:
    if not e["rates"]:
        return 1
    last = e["rates"][max(e["rates"], key=int)]
    return 0 if 0 < last < 1 else 2
