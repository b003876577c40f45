"""The judge: is a predicted answer correct?

Normalized exact match first (cheap, and a hit is never overruled); on a miss, an LLM semantic match
with ``prompts.JUDGE_PROMPT`` (greedy, a few tokens, reply "Correct" or "Wrong"). The LLM is either our
``PolicyClient`` (all pending items in one ``generate`` call, so the local policy micro-batches them) or
any langchain-core chat model (configure it for greedy decoding and a small ``max_tokens`` yourself, e.g.
``ChatOpenAI(temperature=0, max_tokens=16)``). A judge call that raises or times out falls back to the
exact-match verdict, is marked ``judge_unavailable`` and counted, so a run can report how many verdicts
were EM-only instead of silently drifting.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from pydantic import BaseModel, ConfigDict

from sesa_graph.policy.base import GenerationRequest, PolicyClient, SamplingParams
from sesa_graph.prompts import render_judge_prompt
from sesa_graph.scoring import exact_match, f1_score

JudgeMethod = Literal["exact", "llm", "judge_unavailable", "none"]


class Verdict(BaseModel):
    """One judgment; its fields are logged as metrics and ``rewards.solver_reward`` maps it to a reward.

    ``method`` says what decided it: ``exact`` = exact match (a hit, or a miss when no LLM judge is
    configured); ``llm`` = the LLM judge; ``judge_unavailable`` = the LLM judge failed or timed out and
    the exact-match miss stands; ``none`` = there was no prediction to judge.
    """

    model_config = ConfigDict(frozen=True)

    correct: bool
    score: float
    em: float
    f1: float
    method: JudgeMethod
    raw: str | None = None


class JudgeItem(NamedTuple):
    question: str
    prediction: str | None
    golds: Sequence[str]


_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL)
_NEGATED_CORRECT = re.compile(r"\b(?:not|isn[’']?t|never)\s+(?:\w+\s+)?correct\b")


def parse_judgment(text: str) -> bool:
    """True only for an unambiguous "Correct"; anything else (Wrong, both, neither, "not correct") is
    False, because a false positive would reward a wrong answer.

    >>> parse_judgment(" **Correct.**"), parse_judgment("Wrong"), parse_judgment("Correct or Wrong")
    (True, False, False)
    """
    text = _THINK_BLOCK.sub(" ", text).lower()
    if "<think>" in text:  # reasoning cut off by the token budget: no verdict yet
        return False
    if _NEGATED_CORRECT.search(text):
        return False
    words = set(re.findall(r"[a-z]+", text))
    return "correct" in words and not words & {"wrong", "incorrect"}


class Judge:
    """Judges predictions against gold answers; ``model=None`` means exact match only."""

    def __init__(
        self,
        model: PolicyClient | BaseChatModel | None = None,
        *,
        timeout_s: float = 60.0,
        max_tokens: int = 16,
        max_concurrency: int = 16,
    ) -> None:
        if model is not None and not isinstance(model, (BaseChatModel, PolicyClient)):
            raise TypeError(
                f"Judge needs a PolicyClient, a langchain-core BaseChatModel or None, got {type(model).__name__}"
            )
        self.model = model
        self.timeout_s = timeout_s
        self.max_tokens = max_tokens
        self.max_concurrency = max_concurrency
        self.unavailable_count = 0  # LLM judgments that failed and fell back to exact match
        self.llm_count = 0  # LLM judgments requested

    async def judge(self, question: str, prediction: str | None, golds: str | Sequence[str]) -> Verdict:
        return (await self.judge_many([JudgeItem(question, prediction, _as_list(golds))]))[0]

    async def judge_many(self, items: Sequence[JudgeItem | tuple]) -> list[Verdict]:
        items = [JudgeItem(q, p, _as_list(g)) for q, p, g in items]
        verdicts: list[Verdict | None] = []
        pending: list[int] = []
        for i, it in enumerate(items):
            em, f1 = exact_match(it.prediction, it.golds), f1_score(it.prediction, it.golds)
            if it.prediction is None or not it.prediction.strip():
                verdicts.append(Verdict(correct=False, score=0.0, em=em, f1=f1, method="none"))
            elif em == 1.0 or self.model is None:
                verdicts.append(Verdict(correct=em == 1.0, score=em, em=em, f1=f1, method="exact"))
            else:
                verdicts.append(None)
                pending.append(i)
        if pending:
            prompts = [
                render_judge_prompt(items[i].question, items[i].golds, items[i].prediction or "")
                for i in pending
            ]
            self.llm_count += len(pending)
            replies = await self._ask(prompts)
            for i, reply in zip(pending, replies, strict=True):
                it = items[i]
                f1 = f1_score(it.prediction, it.golds)
                if reply is None:
                    self.unavailable_count += 1
                    verdicts[i] = Verdict(correct=False, score=0.0, em=0.0, f1=f1, method="judge_unavailable")
                else:
                    ok = parse_judgment(reply)
                    verdicts[i] = Verdict(correct=ok, score=float(ok), em=0.0, f1=f1, method="llm", raw=reply)
        return verdicts  # type: ignore[return-value]

    async def _ask(self, prompts: list[str]) -> list[str | None]:
        """One reply per prompt; None where the judge failed."""
        if isinstance(self.model, BaseChatModel):
            return await self._ask_chat(self.model, prompts)
        return await self._ask_policy(self.model, prompts)

    async def _ask_policy(self, policy: Any, prompts: list[str]) -> list[str | None]:
        sampling = SamplingParams(max_tokens=self.max_tokens, temperature=0.0)
        requests = [
            GenerationRequest(messages=[{"role": "user", "content": p}], sampling=sampling) for p in prompts
        ]
        try:
            results = await asyncio.wait_for(policy.generate(requests), self.timeout_s)
        except Exception:  # noqa: BLE001 -- any judge failure is a counted fallback, not a crashed step
            return [None] * len(prompts)
        if len(results) != len(prompts):
            return [None] * len(prompts)
        return [r.text for r in results]

    async def _ask_chat(self, model: BaseChatModel, prompts: list[str]) -> list[str | None]:
        gate = asyncio.Semaphore(self.max_concurrency)

        async def one(prompt: str) -> str | None:
            async with gate:
                try:
                    msg = await asyncio.wait_for(model.ainvoke([HumanMessage(prompt)]), self.timeout_s)
                except Exception:  # noqa: BLE001 -- see _ask_policy
                    return None
            return msg.text

        return list(await asyncio.gather(*(one(p) for p in prompts)))


def _as_list(golds: str | Sequence[str]) -> list[str]:
    return [golds] if isinstance(golds, str) else list(golds)
