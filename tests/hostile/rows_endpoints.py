"""Bad-input rows, area "endpoints": what policy, judge, distiller and search endpoints send back.

Every row points the real client (``OpenAIPolicy``, ``ChatEndpoint`` under the real ``Judge`` and
``distill_pass``, ``HttpBackend``, or ``sesa rollout --base-url`` end to end) at a real HTTP server on
127.0.0.1 (:mod:`tests.hostile.endpoint_server`) whose path picks the hostile reply. A bad reply must be a
ServiceError naming the URL and the field -- never a result, a verdict, a skill or a traceback -- within the
client's time limits; the judge and the distiller must count it and go on as they are documented to.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tests.hostile.endpoint_server import HostileServer, hostile_server
from tests.hostile.harness import SHARED, Outcome, cli, custom
from tools.errors import ServiceError

AREA = "endpoints"
ROWS = []
_HOME = os.environ.get(
    "SESA_HOME"
)  # the suite's own SESA_HOME (rows run under fresh ones): the model is there
# per-attempt timeout, retries, pauses and deadline small enough that a dead endpoint fails in about a second
TINY = {"timeout_s": 0.5, "connect_timeout_s": 0.5, "retries": 1, "backoff_s": 0.01, "deadline_s": 2.0}
VOCAB = 49152  # the embedded SmolLM2's vocabulary


def server() -> HostileServer:
    return SHARED.get("endpoints: hostile server", hostile_server)


def model_dir() -> str:
    """The converted embedded policy (its tokenizer and config), from the suite's SESA_HOME."""

    @contextlib.contextmanager
    def find() -> Iterator[str]:
        from sesa_graph.embedded import embedded_model_dir

        row_home = os.environ.get("SESA_HOME")
        _set_home(_HOME)
        try:
            path = str(embedded_model_dir())
        finally:
            _set_home(row_home)
        yield path

    return SHARED.get("endpoints: embedded model dir", find)


def _set_home(value: str | None) -> None:
    if value is None:
        os.environ.pop("SESA_HOME", None)
    else:
        os.environ["SESA_HOME"] = value


def policy_at(url: str, **limits: float) -> Any:
    """A real ``OpenAIPolicy`` for ``url``: one is built (tokenizer, vocabulary) and copied per row."""
    from sesa_graph.policy.limits import CallLimits
    from sesa_graph.policy.openai_client import OpenAIPolicy

    base = SHARED.get(
        "endpoints: policy client",
        lambda: contextlib.nullcontext(OpenAIPolicy("http://127.0.0.1:9/v1", model_dir())),
    )
    p = copy.copy(base)
    p.base_urls, p.base_url = [url], url
    p.limits = CallLimits(**{**TINY, **limits})
    p._per_loop = weakref.WeakKeyDictionary()
    return p


def generate(policy: Any, max_tokens: int = 8) -> Any:
    from sesa_graph.policy.base import GenerationRequest, SamplingParams

    req = GenerationRequest(
        prompt_ids=[1, 2, 3], sampling=SamplingParams(max_tokens=max_tokens, temperature=0)
    )
    return asyncio.run(policy.generate([req]))[0]


def refused(call: Callable[[], Any], *must: str, check: Callable[[str], str | None] | None = None) -> Outcome:
    """``clear`` when ``call`` raises a ServiceError whose message holds every ``must``."""
    try:
        value = call()
    except ServiceError as exc:
        msg = str(exc)
        missing = [m for m in must if m.lower() not in msg.lower()]
        if missing:
            return Outcome("unclear", f"{msg[:160]!r} misses {missing}")
        bad = check(msg) if check else None
        return Outcome("wrong", bad) if bad else Outcome("clear", msg[:200])
    except Exception as exc:  # noqa: BLE001 -- anything else escaping the client is the bug this suite hunts
        return Outcome("traceback", f"{type(exc).__name__}: {exc}"[:200])
    return Outcome("wrong", f"accepted: {value!r}"[:200])


def no_escape(msg: str) -> str | None:
    return "the message holds a raw ESC or BEL" if "\x1b" in msg or "\x07" in msg else None


# ---- the policy client -------------------------------------------------------------------------------


def policy_row(name: str, mode: str, *must: str, attempts: int | None = None, **limits: float) -> None:
    """A row: the policy client against ``mode`` is refused naming the URL and ``must``; ``attempts``: how
    many requests the server must have seen (a 4xx once, a 5xx once per allowed attempt)."""

    @custom(AREA, f"policy reply: {name}", timeout_s=30)  # the first loads the tokenizer
    def run(tmp: Path) -> Outcome:
        srv = server()
        url, before = srv.url(mode), srv.count(mode)
        out = refused(lambda: generate(policy_at(url, **limits)), url, *must, check=no_escape)
        seen = srv.count(mode) - before
        if out.verdict == "clear" and attempts is not None and seen != attempts:
            return Outcome("wrong", f"{seen} requests reached the server, expected {attempts}")
        return out

    ROWS.append(run)


policy_row(f"token id {VOCAB} (= vocabulary size)", f"id~{VOCAB}", "token_ids[0]", "vocabulary", attempts=1)
policy_row("token id 1e9", "id~1000000000", "token_ids[0]", "vocabulary")
policy_row("token id -1", "id~-1", "token_ids[0]", "-1")
policy_row('token id the string "28"', "id-str", "token_ids[0]")
policy_row("token id 28.5", "id-float", "token_ids[0]")
policy_row("token_ids an object", "ids-dict", "token_ids")
policy_row("logprob NaN (bare literal)", "nan", "token_logprobs[0]", "finite")
policy_row("logprob -Infinity (bare literal)", "inf", "token_logprobs[0]", "finite")
policy_row('logprob the string "NaN"', "nan-str", "token_logprobs[0]", "not a number")
policy_row("logprob null", "lp-null", "token_logprobs[0]")
policy_row("logprob +3.5", "lp-positive", "token_logprobs[0]", "above 0")
policy_row("50x the tokens asked (400 for max_tokens 8)", "many", "token_ids", "8 asked")
policy_row("5 logprobs for 2 token ids", "more-lps", "token_logprobs", "5 entries for 2")
policy_row("0 logprobs for 2 token ids", "fewer-lps", "token_logprobs", "0 entries for 2")
policy_row("token_logprobs a string", "lps-not-list", "token_logprobs")
policy_row("no choices key", "no-choices", "choices", "missing")
policy_row("choices an object", "choices-dict", "choices", "not a list")
policy_row("choices empty", "choices-empty", "0 choices")
policy_row("two choices for n=1", "two-choices", "2 choices")
policy_row("choices[0] a string", "choice-str", "choices[0]")
policy_row("text a number", "text-int", "choices[0].text")
policy_row("finish_reason junk with ESC/BEL", "finish-junk", "finish_reason")
policy_row("a JSON array, not an object", "top-list", "reply", "a list")
policy_row("plain text body (HTTP 200)", "not-json", "not JSON", "Service temporarily")
policy_row("nginx HTML page (HTTP 200)", "html", "HTML", "nginx")
policy_row("empty body (HTTP 200)", "empty", "empty body")
policy_row("JSON cut off after 40 bytes", "truncated", "not JSON")
policy_row("JSON nested 100 000 deep", "nested", "nested")
policy_row("invalid UTF-8", "bad-utf8", "not JSON")
policy_row("HTTP 400 with a message", "400", "HTTP 400", "maximum context length", attempts=1)
policy_row("HTTP 404 HTML page", "404-html", "HTTP 404", "404 Not Found", attempts=1)
policy_row(
    "HTTP 500 forever (retries=2)", "500", "HTTP 500", "3 attempts", "CUDA error", attempts=3, retries=2
)
policy_row("HTTP 429 forever (retries=1)", "429", "HTTP 429", "2 attempts", attempts=2)
policy_row("hung connection (timeout_s 0.5)", "hang", "no answer within", "timeout_s")
policy_row("a byte every 0.2 s, never done (timeout_s 0.5)", "trickle", "no answer within")
policy_row("endless body (up to 256 MB)", "huge", "bytes", "cap")


@custom(AREA, f"policy reply: token id {VOCAB - 1} (the last one)", timeout_s=10)
def _last_id(tmp: Path) -> Outcome:
    """The boundary the other way: the vocabulary's last id is a token, not an error."""
    try:
        res = generate(policy_at(server().url(f"id~{VOCAB - 1}")))
    except Exception as exc:  # noqa: BLE001
        return Outcome("wrong", f"refused a valid id: {exc}"[:200])
    return Outcome("handled") if res.token_ids == [VOCAB - 1] else Outcome("wrong", f"ids {res.token_ids}")


ROWS.append(_last_id)


# ---- the judge ------------------------------------------------------------------------------------------


def _judge_once(client: Any, **kw: Any) -> tuple[Any, Any]:
    from sesa_graph.rollout.judge import Judge

    judge = Judge(client, timeout_s=5.0, **kw)
    verdict = asyncio.run(judge.judge("Which city is the capital of France?", "Lyon", ["Paris"]))
    return judge, verdict


def _arg(text: str) -> str:
    """``text`` as a mode's argument (one path segment)."""
    return quote(text, safe="")


def _chat(url: str, model: str = "judge-model", **limits: float) -> Any:
    from sesa_graph.policy.limits import CallLimits
    from sesa_graph.policy.templated import ChatEndpoint

    return ChatEndpoint(url, model, limits=CallLimits(**{**TINY, **limits}), max_tokens=16)


def judge_row(name: str, mode: str, *, failed: int, raw: str | None = None, policy: bool = False) -> None:
    """A row: a judge whose endpoint sends ``mode`` gives no verdict from it -- the exact-match miss stands
    as ``judge_unavailable`` (``failed``: counted as a failed call) -- and never reads it as "Correct"."""

    @custom(AREA, f"judge reply: {name}", timeout_s=10)
    def run(tmp: Path) -> Outcome:
        url = server().url(mode)
        judge, v = _judge_once(policy_at(url) if policy else _chat(url))
        if v.method != "judge_unavailable" or v.correct or v.score != 0.0:
            return Outcome("wrong", f"verdict {v.method} correct={v.correct} score={v.score}")
        if judge.failed_count != failed or judge.unavailable_count != 1:
            return Outcome("wrong", f"failed {judge.failed_count}, unavailable {judge.unavailable_count}")
        if raw is not None and v.raw != raw:
            return Outcome("wrong", f"raw {v.raw!r}")
        return Outcome("handled", f"judge_unavailable, raw={v.raw!r}"[:200])

    ROWS.append(run)


judge_row("'Maybe.' (no verdict)", "chat~" + _arg("Maybe."), failed=0, raw="Maybe.")
judge_row(
    "'Score: 11/10 -- Correct and Wrong'", "chat~" + _arg("Score: 11/10 -- Correct and Wrong"), failed=0
)
judge_row("'<think>Correct?' cut off while thinking", "chat~" + _arg("<think>Correct? Let me"), failed=0)
judge_row("chat content a number", "chat-int", failed=1)
judge_row("chat content a list of blocks", "chat-list", failed=1)
judge_row("chat choice without a message", "chat-no-message", failed=1)
judge_row("chat reply without choices", "chat-no-choices", failed=1)
judge_row("policy endpoint sends a NaN logprob", "nan", failed=1, policy=True)
judge_row("policy endpoint sends HTML", "html", failed=1, policy=True)


@custom(AREA, "judge reply: HTML every time, max_consecutive_failures=2", timeout_s=10)
def _judge_gives_up(tmp: Path) -> Outcome:
    from sesa_graph.rollout.judge import Judge

    url = server().url("html")
    judge = Judge(_chat(url), timeout_s=5.0, max_consecutive_failures=2)
    asyncio.run(judge.judge("Which city is the capital of France?", "Lyon", ["Paris"]))
    return refused(lambda: asyncio.run(judge.judge("Capital of Spain?", "Lyon", ["Madrid"])), url, "HTML")


ROWS.append(_judge_gives_up)


# ---- the distiller --------------------------------------------------------------------------------------


def _distill(client: Any) -> Any:
    import numpy as np

    from sesa_graph.memory.config import MemoryConfig
    from sesa_graph.memory.consolidation import distill_pass
    from sesa_graph.memory.queue import FailureQueue

    queue = FailureQueue(None)
    queue.add([_FAILURE])
    none = np.zeros((0, 8), np.float32)
    return asyncio.run(distill_pass(queue.pick(1), {}, none, none, client, None, MemoryConfig(), step=1))


_FAILURE = {
    "question": "Which treaty ended the war between the two kingdoms?",
    "answer": "Nowhere Accord",
    "golds": ["Treaty of Vell"],
    "searches": ["war treaty kingdoms"],
    "retrieved_skill_ids": [],
    "status": "answered",
    "correct": False,
    "step": 1,
}


def distiller_row(name: str, mode: str, *, errored: bool, must: str = "", policy: bool = False) -> None:
    """A row: a distiller endpoint sending ``mode`` admits no skill; a bad reply leaves the failure errored
    (kept for the next pass) with an error naming the URL, a reply without a skill is ``unparseable``."""

    @custom(AREA, f"distiller reply: {name}", timeout_s=10)
    def run(tmp: Path) -> Outcome:
        url = server().url(mode)
        res = _distill(policy_at(url) if policy else _chat(url, "distiller-model"))
        if res.admitted:
            return Outcome("wrong", f"admitted {[s.description for s, _ in res.admitted]}"[:200])
        if errored:
            if len(res.errored) != 1 or url not in (res.error or "") or must.lower() not in res.error.lower():
                return Outcome("wrong", f"errored {res.errored}, error {res.error!r}"[:200])
            return Outcome("handled", res.error[:200])
        if not res.unparseable or res.errored:
            return Outcome("wrong", f"rejected {dict(res.rejected)}, errored {res.errored}")
        return Outcome("handled", (res.error or "")[:200])

    ROWS.append(run)


distiller_row("prose, no skill", "chat~" + _arg("I cannot help with that."), errored=False)
distiller_row(
    "JSON without a description", "chat~" + _arg('{"trigger": 5, "queries": {"a": 1}}'), errored=False
)
distiller_row("body not JSON", "not-json", errored=True, must="not JSON")
distiller_row("reply without choices", "chat-no-choices", errored=True, must="choices")
distiller_row("chat content a number", "chat-int", errored=True, must="content")
distiller_row("policy endpoint, 50x the tokens asked", "many", errored=True, must="token_ids", policy=True)
distiller_row("HTTP 400 with a message", "400", errored=True, must="maximum context length")


# ---- the search client ----------------------------------------------------------------------------------


def search_row(name: str, mode: str, *must: str, **settings: float) -> None:
    """A row: ``HttpBackend.search`` against ``mode`` is refused naming the endpoint and ``must``."""

    @custom(AREA, f"search answer: {name}", timeout_s=15)
    def run(tmp: Path) -> Outcome:
        from tools.http import HttpBackend

        url = server().search_url(mode)
        opts = {"timeout_s": 0.5, "retries": 1, "backoff_s": 0.01, "connect_timeout_s": 0.5, **settings}
        backend = HttpBackend(url, **opts)
        try:
            return refused(lambda: backend.search(["capital of France"], k=3), url, *must, check=no_escape)
        finally:
            backend.close()

    ROWS.append(run)


search_row("result an object", "s-result-dict", "result", "not a list")
search_row("no result key", "s-no-result", "result", "missing")
search_row("2 result lists for 1 query", "s-lists~2", "2 lists for 1")
search_row("0 result lists for 1 query", "s-lists~0", "0 lists for 1")
search_row("hits are strings", "s-hits-str", "result[0]")
search_row("document contents a number", "s-text-int", "contents")
search_row("document contents null", "s-text-null", "contents")
search_row("document id an object", "s-id-dict", ".id")
search_row('score the string "NaN"', "s-score-nan", "score")
search_row("50 hits for topk 3", "s-too-many", "topk=3")
search_row("a 10 MB document", "s-big-doc", "contents", "characters")
search_row("endless body (up to 256 MB)", "huge", "bytes")
search_row("nginx HTML page (HTTP 200)", "html", "HTML")
search_row("HTTP 400 with a message", "400", "HTTP 400", "maximum context length")
search_row("HTTP 500 forever (retries=1)", "500", "2 attempts", "HTTP 500")
search_row("hung connection (timeout_s 0.5)", "hang", "Timeout", "2 attempts")
search_row("errors field holding ESC[2J", "s-errors", "failed on some queries", "index offline")


@custom(AREA, "search answer: one hit per query, valid (control)", timeout_s=10)
def _search_ok(tmp: Path) -> Outcome:
    from tools.http import HttpBackend

    backend = HttpBackend(server().search_url("s-ok"), timeout_s=2.0, retries=0)
    try:
        (docs,) = backend.search(["capital of France"], k=3)
    finally:
        backend.close()
    ok = len(docs) == 1 and docs[0].title == "Paris" and docs[0].score == 1.5
    return Outcome("handled") if ok else Outcome("wrong", f"docs {docs}"[:200])


ROWS.append(_search_ok)


# ---- sesa rollout --base-url ----------------------------------------------------------------------------


@contextlib.contextmanager
def policy_defaults(**values: float) -> Iterator[None]:
    """The rollout command's policy limits made short (it has no flags for them; a row has seconds)."""
    from sesa_graph.model_config import PolicyConfig

    fields = PolicyConfig.model_fields
    old = {k: fields[k].default for k in values}
    try:
        for k, v in values.items():
            fields[k].default = v
        PolicyConfig.model_rebuild(force=True)
        yield
    finally:
        for k, v in old.items():
            fields[k].default = v
        PolicyConfig.model_rebuild(force=True)


def _corpus(tmp: Path) -> Path:
    path = tmp / "corpus.jsonl"
    path.write_text(json.dumps({"id": "1", "contents": '"Paris"\nParis is the capital of France.'}) + "\n")
    return path


def rollout_row(name: str, mode: str, *must: str, short: bool = False) -> None:
    """A row: ``sesa rollout --base-url`` against ``mode`` ends with one ``error:`` line naming the URL and
    ``must``, exit 1; ``short``: with the policy's retries and timeouts cut to fit the row."""
    url = f"{{root}}/{mode}/v1"
    row = cli(
        AREA,
        f"sesa rollout --base-url: {name}",
        lambda tmp: [
            "rollout",
            "What is the capital of France?",
            "--base-url",
            server().url(mode),
            "--model",
            model_dir(),
            "--corpus",
            str(_corpus(tmp)),
        ],
        expect="service",
        contains=lambda tmp: [url.format(root=server().root), *must],
        timeout_s=60,  # a bound, not the time taken (under a second, but the first row here imports the CLI)
    )
    if short:
        inner = row.run

        def run(tmp: Path) -> Outcome:
            with policy_defaults(**TINY):
                return inner(tmp)

        row.run = run
    ROWS.append(row)


rollout_row(f"token id {VOCAB + 7}", f"id~{VOCAB + 7}", "token_ids[0]", "vocabulary")
rollout_row("logprob NaN", "nan", "token_logprobs[0]")
rollout_row("50x the tokens asked", "many", "token_ids", "asked")
rollout_row("ids/logprobs lengths differ", "more-lps", "token_logprobs")
rollout_row("no choices", "no-choices", "choices")
rollout_row("plain text body", "not-json", "not JSON")
rollout_row("nginx HTML page", "html", "HTML")
rollout_row("HTTP 400 with a message", "400", "HTTP 400", "maximum context length")
rollout_row("HTTP 500 forever", "500", "HTTP 500", "attempts", short=True)
rollout_row("hung connection", "hang", "no answer within", short=True)
rollout_row("endless body (and endless /models)", "huge", "bytes")
rollout_row("/models never answers (start-up probe)", "get-hang", "does not answer", short=True)
