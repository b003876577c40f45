"""The distiller's masked view (``memory.distiller_view: masked``) for small distillers: the failure with
its names replaced by [X], what went wrong in words, the reply opened with the JSON object's first key;
and the parser's salvage of a JSON object a small model left unfinished."""

import asyncio
import json
from pathlib import Path

from fakes import failure

from sesa_graph.memory import MemoryConfig
from sesa_graph.memory.distiller import build_messages, call_distiller, parse_skill_output
from sesa_graph.memory.queue import FailureRecord, PendingFailure
from sesa_graph.memory.skill_checks import check_candidate, failure_notes, mask_entities, question_entities
from sesa_graph.policy.base import GenerationResult
from sesa_graph.prompts import (
    DISTILLER_REPLY_PREFIX,
    NOTE_ANSWER_NOT_RETRIEVED,
    NOTE_ANSWER_REPEATS_QUESTION,
    NOTE_ANSWER_RETRIEVED,
    NOTE_NO_SEARCH,
    NOTE_REPEATED_SEARCH,
)

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "distiller_failures.jsonl"


def _records() -> list[FailureRecord]:
    return [FailureRecord(**json.loads(line)) for line in FIXTURE.read_text().splitlines() if line.strip()]


def test_mask_replaces_names_and_merges_runs():
    q = "Who was the founder and first shah of Safavid Iran, ruling from 1501 until his death in 1524?"
    masked = mask_entities(q, question_entities(q, ["Ismail I"], "Safavid dynasty"))
    assert masked == "Who was the founder and first shah of [X], ruling from [X] until his death in [X]?"


def test_masked_view_shows_no_name_of_any_real_failure():
    """On the frozen failures of real runs: nothing the admission check would call copied reaches the
    distiller, and each failure's notes are said."""
    for rec in _records():
        names = question_entities(rec.question, rec.golds, rec.answer)
        system, user = build_messages(PendingFailure(key="k", record=rec), [], "masked")
        assert (
            system["role"] == "system" and "[X]" in user["content"] and "What went wrong:" in user["content"]
        )
        shown_words = {w.lower().strip("'’-") for w in user["content"].replace("[X]", " ").split()}
        leaked = names & {w.strip('.,?!;:"()') for w in shown_words}
        assert not leaked, (rec.question, leaked)


def test_failure_notes_read_the_record():
    rec = FailureRecord.model_validate(
        failure(
            1,
            answer="the two kingdoms",
            searches=["war 1 treaty", "war 1 treaty"],
            evidence=[{"title": "Treaty 1", "text": "It ended the war."}],
        )
    )
    assert failure_notes(rec) == [NOTE_ANSWER_REPEATS_QUESTION, NOTE_ANSWER_RETRIEVED, NOTE_REPEATED_SEARCH]
    rec = FailureRecord.model_validate(failure(2, searches=[], evidence=[]))
    assert failure_notes(rec) == [NOTE_NO_SEARCH]
    rec = FailureRecord.model_validate(failure(3, evidence=[{"title": "War 3", "text": "A war."}]))
    assert failure_notes(rec) == [NOTE_ANSWER_NOT_RETRIEVED]


class _Prefixed:
    """A PolicyClient that records prompt ids and answers with the rest of a skill object."""

    def __init__(self):
        self.requests = []

    def encode_messages(self, messages):
        return [1, 2, 3]

    def encode_text(self, text):
        return [9] * len(text)

    async def generate(self, requests):
        self.requests += requests
        rest = 'Look up the author first.", "trigger": "t", "avoid": "a", "queries": ["[work] author"]}'
        return [
            GenerationResult(text=rest, token_ids=[], logprobs=[], prompt_ids=[], finish_reason="stop")
        ] * len(requests)


def test_masked_view_opens_a_local_distillers_reply():
    rec = _records()[0]
    conv = build_messages(PendingFailure(key="k", record=rec), [], "masked")
    client = _Prefixed()
    out = asyncio.run(call_distiller(client, [conv], MemoryConfig(distiller_view="masked")))
    req = client.requests[0]
    assert req.messages is None and req.prompt_ids == [1, 2, 3] + [9] * len(DISTILLER_REPLY_PREFIX)
    assert out[0].startswith(DISTILLER_REPLY_PREFIX)
    assert parse_skill_output(out[0])["description"] == "Look up the author first."
    full = asyncio.run(call_distiller(_Prefixed(), [conv], MemoryConfig()))  # the full view sends messages
    assert not full[0].startswith(DISTILLER_REPLY_PREFIX)


def test_an_unfinished_object_keeps_its_finished_fields():
    text = (
        '{"description": "Search the author of the work, then the author\'s page.", "trigger": "Nationality '
        'of a work\'s author"; "avoid": "Answering with the work", "queries": ["[work] author", "[work] '
        'author", "[person] nation'
    )
    fields = parse_skill_output(text)
    assert (
        fields["trigger"] == "Nationality of a work's author" and fields["avoid"] == "Answering with the work"
    )
    assert fields["queries"] == ["[work] author"]  # the repeat once, the cut-off item dropped
    skill, why = check_candidate(fields, PendingFailure(key="k", record=_records()[3]), MemoryConfig(), 1)
    assert why is None and skill.queries == ["[work] author"]
    assert parse_skill_output('{"trigger": "t", "avoid": "a"') is None  # no description: nothing usable


def test_a_skill_that_restates_its_prompt_is_rejected():
    """The 0.5B's outputs on the frozen failures: the masked question as trigger, a note as what to avoid."""
    rec = next(r for r in _records() if r.question.startswith("Were Demosthenes"))
    pending = PendingFailure(key="k", record=rec)
    restated = {
        "description": "Search for names in Wikipedia and compare them based on nationality.",
        "trigger": "Were [X] and [X] of the same nationality?",
        "avoid": "Answering from one page only.",
        "queries": ["[person] nationality"],
    }
    assert check_candidate(restated, pending, MemoryConfig(), 1) == (None, "copies_prompt")
    noted = {**restated, "trigger": "Two people compared on one attribute", "avoid": NOTE_ANSWER_RETRIEVED}
    assert check_candidate(noted, pending, MemoryConfig(), 1) == (None, "copies_prompt")
    own = {**restated, "trigger": "Two people compared on one attribute"}
    assert check_candidate(own, pending, MemoryConfig(), 1)[1] is None
