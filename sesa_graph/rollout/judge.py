"""The judge: is a predicted answer correct?

Normalized exact match first (cheap, and a hit is never overruled); on a miss, an LLM semantic match
with ``prompts.judge_messages`` (worked examples, then the item; greedy, a few tokens, reply "Correct" or
"Wrong"; a repeated item is asked once). The LLM is either our
``PolicyClient`` (all pending items in one ``generate`` call, so the local policy micro-batches them) or
anything with a langchain-style ``ainvoke(messages)`` -- a langchain-core chat model (configure it for
greedy decoding and a small ``max_tokens`` yourself, e.g. ``ChatOpenAI(temperature=0, max_tokens=16)``) or
:class:`sesa_graph.policy.templated.ChatEndpoint`. A judge call that raises or times out, and a reply that
gives no verdict (empty, cut off inside ``<think>``, saying neither or both), fall back to the exact-match
verdict, are marked ``judge_unavailable`` and counted, so a run can report how many verdicts were EM-only
instead of silently drifting -- a reply without a verdict is never read as "Wrong". Failed calls are logged
with the judge's URL; a judge whose calls keep failing (``max_consecutive_failures`` in a row) stops the run
with a :class:`JudgeUnavailableError`, since every verdict would otherwise quietly be exact match alone.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, ConfigDict

from sesa_graph.policy.base import GenerationRequest, PolicyClient, SamplingParams
from sesa_graph.prompts import judge_messages, template_placeholders
from sesa_graph.scoring import (
    copies_question,
    echoes_question,
    exact_match,
    f1_score,
    is_placeholder,
    misses_yes_no,
    shares_a_stem,
)
from tools.errors import ServiceError

log = logging.getLogger(__name__)

_PLACEHOLDERS = template_placeholders()

JudgeMethod = Literal["exact", "echo", "non_answer", "no_overlap", "llm", "judge_unavailable", "none"]


class JudgeUnavailableError(ServiceError):
    """The LLM judge failed ``max_consecutive_failures`` judgments in a row; the message names it."""


class Verdict(BaseModel):
    """One judgment; its fields are logged as metrics and ``rewards.solver_reward`` maps it to a reward.

    ``method`` says what decided it: ``exact`` = exact match (a hit, or a miss when no LLM judge is
    configured); ``echo`` = a miss that only repeats words of the question, sharing no name with a gold
    answer (``scoring.echoes_question``), or gives most of the question back (``scoring.copies_question``),
    Wrong without asking the model; ``non_answer`` = a miss that copies an example text of the prompts
    (``<answer>answer</answer>``), says there is no answer or is a single character
    (``scoring.is_placeholder``), or answers a yes/no question with neither (``scoring.misses_yes_no``), Wrong
    without asking the model; ``no_overlap`` = with ``require_overlap`` (the run config's
    ``judge.require_overlap``), a miss that shares no word stem with any gold (``scoring.shares_a_stem``),
    Wrong without asking the model; ``llm`` = the LLM judge; ``judge_unavailable`` = the LLM judge failed, timed out or replied
    without a verdict, and the exact-match miss stands; ``none`` = there was no prediction to judge.
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


def parse_judgment(text: str | None) -> bool | None:
    """True for "Correct", False for "Wrong" (or "Incorrect", "not correct"), None for no verdict: empty,
    cut off inside ``<think>``, neither word or both. None is not "Wrong" -- a judge that never answered
    says nothing about the prediction.

    >>> parse_judgment(" **Correct.**"), parse_judgment("Wrong"), parse_judgment("not correct")
    (True, False, False)
    >>> parse_judgment("Correct or Wrong"), parse_judgment("<think>is it correct? maybe"), parse_judgment("")
    (None, None, None)
    """
    text = _THINK_BLOCK.sub(" ", text or "").lower()
    if "<think>" in text:  # reasoning cut off by the token budget: no verdict yet
        return None
    if "</think>" in text:  # the template opened <think> in the prompt: the verdict follows its end
        text = text.rsplit("</think>", 1)[1]
    text = _NEGATED_CORRECT.sub(" wrong ", text)
    words = set(re.findall(r"[a-z]+", text))
    correct, wrong = "correct" in words, bool(words & {"wrong", "incorrect"})
    return None if correct == wrong else correct


def ruled_out(item: JudgeItem, require_overlap: bool) -> JudgeMethod | None:
    """The method that rules an exact-match miss Wrong without a model ('non_answer', 'echo', 'no_overlap';
    ``Verdict`` says what each covers), or None when only the model can judge it."""
    pred, question, golds = item.prediction, item.question, item.golds
    if is_placeholder(pred, _PLACEHOLDERS) or misses_yes_no(pred, golds):
        return "non_answer"
    if echoes_question(pred, question, golds) or copies_question(pred, question):
        return "echo"
    if require_overlap and not shares_a_stem(pred, golds):
        return "no_overlap"
    return None


def _opens_think(tokenizer: Any, prompt_ids: Sequence[int]) -> bool:
    """The rendered prompt ends inside an open ``<think>`` (a thinking chat template): the reply continues
    the reasoning, and whatever it says before ``</think>`` is no verdict."""
    if tokenizer is None or not prompt_ids:
        return False
    tail = tokenizer.decode(list(prompt_ids[-16:]))
    start = tail.rfind("<think>")
    return start >= 0 and "</think>" not in tail[start:]


def _is_policy(model: Any) -> bool:
    return all(hasattr(model, a) for a in ("generate", "encode_messages", "encode_text"))


class Judge:
    """Judges predictions against gold answers; ``model=None`` means exact match only."""

    def __init__(
        self,
        model: PolicyClient | Any | None = None,
        *,
        timeout_s: float = 60.0,
        max_tokens: int = 16,
        max_concurrency: int = 16,
        max_consecutive_failures: int = 0,
        require_overlap: bool = False,
    ) -> None:
        if model is not None and not (_is_policy(model) or hasattr(model, "ainvoke")):
            raise TypeError(
                "Judge needs a PolicyClient, a chat model with ainvoke (langchain-core, ChatEndpoint) or None, "
                f"got {type(model).__name__}"
            )
        self.model = model
        self.timeout_s = timeout_s
        self.max_tokens = max_tokens
        self.max_concurrency = max_concurrency
        self.max_consecutive_failures = max_consecutive_failures
        self.require_overlap = require_overlap  # a miss sharing no word stem with a gold is Wrong, unasked
        self.unavailable_count = 0  # LLM judgments that failed or gave no verdict: exact match stands
        self.failed_count = 0  # of those, the calls that raised or timed out (no reply at all)
        self.failures_in_a_row = 0
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
            elif ruled := ruled_out(it, self.require_overlap):
                verdicts.append(Verdict(correct=False, score=0.0, em=em, f1=f1, method=ruled))
            else:
                verdicts.append(None)
                pending.append(i)
        if pending:
            # A group often repeats one wrong answer: each distinct (question, prediction, golds) is asked once.
            asked: dict[tuple, int] = {}
            for i in pending:
                asked.setdefault(_item_key(items[i]), len(asked))
            conversations = [judge_messages(q, list(g), p) for q, p, g in asked]
            self.llm_count += len(pending)
            distinct = await self._ask(conversations)
            self._count_failures(distinct)
            replies = [distinct[asked[_item_key(items[i])]] for i in pending]
            for i, reply in zip(pending, replies, strict=True):
                it = items[i]
                f1 = f1_score(it.prediction, it.golds)
                if isinstance(reply, BaseException):
                    reply = None
                ok = None if reply is None else parse_judgment(reply)
                if ok is None:
                    self.unavailable_count += 1
                    verdicts[i] = Verdict(
                        correct=False, score=0.0, em=0.0, f1=f1, method="judge_unavailable", raw=reply
                    )
                else:
                    verdicts[i] = Verdict(correct=ok, score=float(ok), em=0.0, f1=f1, method="llm", raw=reply)
        return verdicts  # type: ignore[return-value]

    def _count_failures(self, replies: list[str | BaseException]) -> None:
        errors = [r for r in replies if isinstance(r, BaseException)]
        if not errors:
            self.failures_in_a_row = 0
            return
        self.failed_count += len(errors)
        answered = len(errors) < len(replies)
        self.failures_in_a_row = 0 if answered else self.failures_in_a_row + len(errors)
        last = self._describe(errors[-1])
        log.warning(
            "judge %s: %d of %d calls failed (%s); their exact-match verdicts stand as judge_unavailable",
            self.where,
            len(errors),
            len(replies),
            last,
        )
        limit = self.max_consecutive_failures
        if limit and self.failures_in_a_row >= limit:
            raise JudgeUnavailableError(
                f"judge {self.where} failed {self.failures_in_a_row} judgments in a row (last: {last}); "
                "stopping rather than scoring by exact match alone -- start or fix the judge endpoint, raise "
                "judge.timeout_s if it is only slow, or set judge.kind 'none' (or judge.max_consecutive_failures "
                "0 to go on without it)"
            )

    @property
    def where(self) -> str:
        """The judge model as an error names it: its URL when it has one."""
        url = getattr(self.model, "base_url", None)
        name = getattr(self.model, "name", None) or type(self.model).__name__
        return f"{name} at {url}" if url else str(name)

    def _describe(self, exc: BaseException) -> str:
        if isinstance(exc, TimeoutError):
            return f"no reply within judge.timeout_s={self.timeout_s:g}s"
        return f"{type(exc).__name__}: {exc}"

    async def _ask(self, conversations: list[list[dict[str, str]]]) -> list[str | BaseException]:
        """One reply per conversation; the exception where the judge failed."""
        if _is_policy(self.model):
            return await self._ask_policy(self.model, conversations)
        return await self._ask_chat(self.model, conversations)

    async def _ask_policy(
        self, policy: Any, conversations: list[list[dict[str, str]]]
    ) -> list[str | BaseException]:
        sampling = SamplingParams(max_tokens=self.max_tokens, temperature=0.0)
        requests = [GenerationRequest(messages=m, sampling=sampling) for m in conversations]
        try:
            results = await asyncio.wait_for(policy.generate(requests), self.timeout_s)
        except Exception as exc:  # noqa: BLE001 -- any judge failure is a counted fallback, not a crashed step
            return [exc] * len(conversations)
        if len(results) != len(conversations):
            n = len(conversations)
            return [RuntimeError(f"{len(results)} replies to {n} prompts")] * n
        tokenizer = getattr(policy, "tokenizer", None)
        # the template's own <think> is in the prompt, not the reply: put it back so parsing sees it open
        return [
            _not_text(r.text)
            if not isinstance(r.text, str)
            else "<think>" + r.text
            if _opens_think(tokenizer, r.prompt_ids)
            else r.text
            for r in results
        ]

    async def _ask_chat(
        self, model: Any, conversations: list[list[dict[str, str]]]
    ) -> list[str | BaseException]:
        gate = asyncio.Semaphore(self.max_concurrency)

        async def one(turns: list[dict[str, str]]) -> str | BaseException:
            async with gate:
                try:
                    msg = await asyncio.wait_for(model.ainvoke(_chat_messages(turns)), self.timeout_s)
                    return _reply_text(msg)
                except Exception as exc:  # noqa: BLE001 -- see _ask_policy
                    return exc

        return list(await asyncio.gather(*(one(c) for c in conversations)))


_CHAT_TYPES = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}


def _chat_messages(turns: list[dict[str, str]]) -> list[Any]:
    return [_CHAT_TYPES[t["role"]](t["content"]) for t in turns]


def _item_key(item: JudgeItem) -> tuple[str, str, tuple[str, ...]]:
    return (item.question, item.prediction or "", tuple(item.golds))


def _reply_text(msg: Any) -> str:
    """A chat model's reply as text; a reply without text is an error (counted, never read as a verdict)."""
    text = getattr(msg, "text", None)
    if not isinstance(text, str) and callable(text):  # langchain-core < 1: a method
        text = text()
    if not isinstance(text, str):
        raise _not_text(text)
    return str(text)


def _not_text(value: Any) -> TypeError:
    return TypeError(f"the judge's reply is {type(value).__name__}, not text")


def _as_list(golds: str | Sequence[str]) -> list[str]:
    return [golds] if isinstance(golds, str) else list(golds)
