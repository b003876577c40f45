"""The distiller: turns one failed rollout into one candidate skill (calling it, parsing its output).

The distiller is any ``PolicyClient`` (``await client.generate([GenerationRequest(messages=...)])``,
e.g. the local policy or an OpenAI-compatible endpoint) or any langchain-core chat model
(``await model.ainvoke(messages)``, e.g. ``ChatOpenAI`` pointed at vLLM or DeepSeek).

Its output is parsed defensively (``parse_skill_output``): the first JSON object carrying skill keys,
else ``key: value`` lines; anything else is rejected as ``unparseable``. The checks a parsed candidate
must then pass are in :mod:`sesa_graph.memory.skill_checks`.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from typing import Any

from sesa_graph.memory.config import MemoryConfig
from sesa_graph.memory.queue import PendingFailure
from sesa_graph.memory.skill import CATEGORIES, Skill
from sesa_graph.memory.skill_checks import failure_notes, mask_entities, question_entities
from sesa_graph.policy.base import GenerationRequest, SamplingParams
from sesa_graph.prompts import (
    DISTILLER_REPLY_PREFIX,
    render_distiller_masked_user,
    render_distiller_system,
    render_distiller_user,
)
from tools.errors import ServiceError


class DistillerError(ServiceError, RuntimeError):
    """The distiller could not be called (endpoint down, model error); the failures stay queued."""


# ---- calling the distiller ---------------------------------------------------------------------------


def distiller_kind(client: Any) -> str:
    """'policy' for a PolicyClient, 'chat' for a langchain-core chat model; TypeError otherwise."""
    if hasattr(client, "generate") and hasattr(client, "encode_messages"):
        return "policy"
    if hasattr(client, "ainvoke"):
        return "chat"
    raise TypeError(
        f"the distiller must be a PolicyClient (async generate) or a langchain-core chat model (ainvoke); "
        f"got {type(client).__name__}"
    )


def _chat_text(message: Any) -> str:
    content = getattr(message, "content", message)
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content blocks
        return "".join(b if isinstance(b, str) else str(b.get("text", "")) for b in content)
    return str(content)


def build_messages(
    failure: PendingFailure, unhelpful: Sequence[Skill], view: str = "full"
) -> list[dict[str, str]]:
    """The distiller's conversation for one queued failure. ``view`` 'full': the question, what the rollout
    searched and retrieved, how often its group succeeded, and the skills that did not help; 'masked': the
    question and searches with their names replaced by [X] and what went wrong (:func:`failure_notes`)
    (``memory.distiller_view``)."""
    r = failure.record
    skills = [s.prompt_text() for s in unhelpful]
    if view == "masked":
        names = question_entities(r.question, r.golds, r.answer)
        user = render_distiller_masked_user(
            mask_entities(r.question, names), [mask_entities(q, names) for q in r.searches], failure_notes(r)
        )
        return [
            {"role": "system", "content": render_distiller_system(CATEGORIES, masked=True)},
            {"role": "user", "content": user},
        ]
    evidence = [(str(d.get("title", "")), str(d.get("text", ""))) for d in r.evidence]
    return [
        {"role": "system", "content": render_distiller_system(CATEGORIES)},
        {
            "role": "user",
            "content": render_distiller_user(
                r.question,
                r.golds,
                r.answer,
                r.searches,
                skills,
                evidence=evidence,
                success_rate=r.group_success_rate,
            ),
        },
    ]


async def call_distiller(
    client: Any, conversations: list[list[dict[str, str]]], config: MemoryConfig
) -> list[str | BaseException]:
    """One completion per conversation; a per-item error is returned in its slot, not raised.

    A PolicyClient gets all requests in one ``generate`` call (the local policy micro-batches them); if
    that call fails, every slot holds the error. How long a call may take is the client's to bound: an
    endpoint's ``timeout_s``/``deadline_s`` in ``models:`` (or the policy's section), after which its error
    names the URL and the setting to raise; this function adds no bound of its own, so a pass never fails
    sooner than its endpoint's settings allow.
    """
    if not conversations:
        return []
    if distiller_kind(client) == "policy":
        sampling = SamplingParams(
            max_tokens=config.distiller_max_tokens, temperature=config.distiller_temperature
        )
        prefix = DISTILLER_REPLY_PREFIX if config.distiller_view == "masked" else ""
        try:
            requests = [
                GenerationRequest(messages=m, sampling=sampling)
                if not prefix
                else GenerationRequest(
                    prompt_ids=client.encode_messages(m) + client.encode_text(prefix), sampling=sampling
                )
                for m in conversations
            ]
            results = await client.generate(requests)
        except Exception as exc:  # noqa: BLE001 -- any client failure is a distiller error, reported
            return [exc] * len(conversations)
        if len(results) != len(conversations):  # zipped with the failures later: a short list would drop some
            error = DistillerError(
                f"the distiller returned {len(results)} replies to {len(conversations)} requests"
            )
            return [error] * len(conversations)
        return [
            prefix + r.text if isinstance(r.text, str) else DistillerError("a distiller reply without text")
            for r in results
        ]
    outs = await asyncio.gather(*(client.ainvoke(m) for m in conversations), return_exceptions=True)
    return [o if isinstance(o, BaseException) else _chat_text(o) for o in outs]


# ---- parsing --------------------------------------------------------------------------------------------

_ALIASES = {
    "description": "description",
    "skill": "description",
    "advice": "description",
    "tip": "description",
    "trigger": "trigger",
    "trigger_condition": "trigger",
    "when": "trigger",
    "condition": "trigger",
    "avoid": "avoid",
    "avoidance": "avoid",
    "avoidance_cue": "avoid",
    "pitfall": "avoid",
    "queries": "queries",
    "query_templates": "queries",
    "query_template": "queries",
    "query": "queries",
    "templates": "queries",
    "category": "category",
    "type": "category",
}
_THINK_RE = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)
_LINE_RE = re.compile(r"^\s*[-*#\s]*\**\s*([A-Za-z_ ]{3,24}?)\s*\**\s*[:=]\s*(.+?)\s*$")


def _canonical(raw: dict) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in raw.items():
        key = _ALIASES.get(str(k).strip().lower().replace(" ", "_").replace("-", "_"))
        if key and key not in out:
            out[key] = v
    return out


def _as_text(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, (list, tuple)):
        return " ".join(_as_text(x) for x in v)
    return " ".join(str(v).split())


def _as_queries(v: Any) -> list[str]:
    if v is None:
        return []
    if isinstance(v, str):
        parts = re.split(r"\s*(?:\n|;|\|)\s*", v)
    elif isinstance(v, (list, tuple)):
        parts = [_as_text(x) for x in v]
    else:
        parts = [str(v)]
    return [p.strip().strip("\"'").strip() for p in parts if p and p.strip().strip("\"'").strip()]


def parse_skill_output(text: str) -> dict[str, Any] | None:
    """Skill fields from a distiller completion, or None when nothing usable is there.

    >>> parse_skill_output('Sure! {"description": "d", "trigger": "t", "avoid": "a", "queries": ["q"]}')["trigger"]
    't'
    """
    if not isinstance(text, str) or not text.strip():
        return None
    text = _THINK_RE.sub("", text)
    decoder = json.JSONDecoder()
    for m in re.finditer(r"\{", text):
        try:
            obj, _ = decoder.raw_decode(text, m.start())
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            fields = _canonical(obj)
            if "description" in fields:
                return _normalize(fields)
    fields = _salvage_json_fields(text)
    if "description" in fields:
        return _normalize(fields)
    for line in text.splitlines():
        lm = _LINE_RE.match(line)
        if lm:
            key = _ALIASES.get(lm.group(1).strip().lower().replace(" ", "_"))
            if key and key not in fields:
                fields[key] = lm.group(2)
    return _normalize(fields) if "description" in fields else None


_QUOTED_FIELD_RE = re.compile(r'"([A-Za-z_ ]{3,24})"\s*:\s*"((?:[^"\\]|\\.)*)"')
_QUOTED_LIST_RE = re.compile(r'"(?:queries|query_templates|templates)"\s*:\s*\[', re.IGNORECASE)
_QUOTED_ITEM_RE = re.compile(r'\s*"((?:[^"\\]|\\.)*)"\s*,?')


def _salvage_json_fields(text: str) -> dict[str, Any]:
    """The complete ``"key": "value"`` pairs of a JSON object that does not parse: a small model's reply
    often breaks off mid-list (its token budget spent repeating one query) or puts a ';' between fields,
    and the fields it finished are still its answer. A list cut off keeps the items that were closed."""
    fields: dict[str, Any] = {}
    for key, value in _QUOTED_FIELD_RE.findall(text):
        name = _ALIASES.get(key.strip().lower().replace(" ", "_"))
        if name and name not in fields:
            fields[name] = _unescape(value)
    listed = _QUOTED_LIST_RE.search(text)
    if listed and "queries" not in fields:
        items, at = [], listed.end()
        while item := _QUOTED_ITEM_RE.match(text, at):  # templates hold '[slots]': no regex can skip to ']'
            items.append(_unescape(item.group(1)))
            at = item.end()
        fields["queries"] = list(dict.fromkeys(items))
    return fields


def _unescape(value: str) -> str:
    try:
        return json.loads(f'"{value}"')
    except json.JSONDecodeError:
        return value


def _normalize(fields: dict[str, Any]) -> dict[str, Any]:
    return {
        "description": _as_text(fields.get("description")),
        "trigger": _as_text(fields.get("trigger")),
        "avoid": _as_text(fields.get("avoid")),
        "queries": _as_queries(fields.get("queries")),
        "category": _as_text(fields.get("category")) or "other",
    }
