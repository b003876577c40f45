"""Distiller examples for the format warm-up: a failed rollout in, one JSON skill out.

The embedded distiller (SmolLM2-135M) writes nothing ``parse_skill_output`` accepts, so no skill is ever
admitted. Prompt: exactly ``build_messages`` of a realistic failure from the embedded corpus (a wrong answer
or none, 1-3 solver queries, sometimes 1-2 seed skills that did not help). Completion: ONE JSON skill as
``DISTILLER_SYSTEM`` asks, from a grammar conditioned only on what the distiller sees: question type and hops
(trigger, queries, tails) and failure mode (description, avoid, category). ``check_candidate`` passes all.
"""

from __future__ import annotations

import json
import random

from sesa_graph.memory.config import MemoryConfig
from sesa_graph.memory.distiller import build_messages, parse_skill_output
from sesa_graph.memory.queue import FailureRecord, PendingFailure, question_key
from sesa_graph.memory.skill import load_seeds
from sesa_graph.memory.skill_checks import check_candidate
from training.questions.examples import WarmupExample
from training.warmup.distiller_failures import make_failure

# ------------------------------------------------------------------------------------------ the grammar
# qtype -> (subject, answer type, hops, query templates); subject and answer type fill {subj} / {att}.
QTYPES = {
    "nationality": ("person", "nationality", 1, ["[full name] nationality", "[full name] [profession]"]),
    "creator": ("work", "creator", 1, ["[work title] [creator role]", "[work title] [medium] [year]"]),
    "year": ("entity", "year", 1, ["[entity] [event] year", "[entity] [event verb] in"]),
    "bridge_fact": ("work", "nationality", 2, ["[work title] [creator role]", "[creator] nationality"]),
    "bridge_title": ("described entity", "name", 2, ["[inner description]", "[bridge entity] [relation]"]),
    "compare_same": ("person", "nationality", 2, ["[person A] nationality", "[person B] nationality"]),
    "compare_kind": ("item", "type", 2, ["[item A] is a", "[item B] is a"]),
    "title": ("described entity", "name", 1, ["[distinctive phrase of the clue]", "[role] [origin] [era]"]),
    "year_gap": ("event", "interval", 2, ["[entity A] [event] year", "[entity B] [event] year"]),
    "location": ("place", "country", 1, ["[place] country", "[place] located in"]),
}
# qtype -> when the skill applies (<= 15 words): the question type is what a distiller sees first.
TRIGGERS = {
    "nationality": [
        "The nationality or citizenship of a named person is asked.",
        "What nationality a historical figure was.",
        "A named person's nation is wanted.",
    ],
    "creator": [
        "Who wrote, directed, painted or composed a titled work.",
        "A creative work is named and its maker asked.",
        "Author, director or composer of a work.",
    ],
    "year": [
        "In what year something was founded, published, built or discovered.",
        "When-questions about one event of a named thing.",
        "The year of a founding or premiere.",
    ],
    "bridge_fact": [
        "The nationality of a person known only through a work they made.",
        "Two-hop: a work's maker, then a fact about them.",
        "A creator described by a work.",
    ],
    "bridge_title": [
        "A description that hides a second entity behind its own clue.",
        "Nested clues with an inner description to resolve first.",
        "Two-hop riddles.",
    ],
    "compare_same": [
        "Yes/no questions on whether two named people share a nationality.",
        "Two individuals compared on their origin.",
        "Whether two persons share a nation.",
    ],
    "compare_kind": [
        "Which of two named options belongs to a stated category.",
        "A pair of names and a kind; one of them is that kind.",
        "Picking one of two by kind.",
    ],
    "title": [
        "Who or what fits a definition-style description; nothing is named.",
        "Identify an entity from its role, origin and era.",
        "A long clue defines the answer.",
    ],
    "year_gap": [
        "How many years separate two events about different entities.",
        "The span in years between two dated events.",
        "Intervals that need two separate dates.",
    ],
    "location": [
        "In which country a city, port or settlement lies.",
        "Where a place is, at the level of its country.",
        "The country containing a named town.",
    ],
}
# qtype -> tails that may close a description: more phrasings, still about that question type.
TAILS = {
    "nationality": ["the demonym usually opens the first sentence", "answer with the demonym, not a country"],
    "creator": ["the credit often follows the word 'by'", "answer with the person's full name"],
    "year": ["answer with the four-digit year only", "the event verb sits next to its date"],
    "bridge_fact": ["the work's passage names its maker", "the maker's own article states the demonym"],
    "bridge_title": ["resolve the inner clue before the outer one", "the outer clue then gives the answer"],
    "compare_same": ["then answer yes or no", "state both demonyms before deciding"],
    "compare_kind": ["answer with the matching item's name", "each first sentence says what the item is"],
    "title": ["combine role, origin and era in the query", "the rarest noun of the clue narrows results"],
    "year_gap": ["answer with the number of years", "keep both years in the notes"],
    "location": ["answer at the country level", "a city's first sentence usually names its country"],
}
# mode -> (category, a query template, descriptions (<= 25 words), [avoid cues (<= 12 words)..., a situation
# the trigger may name instead of the question type]): the failure mode decides the advice.
MODES = {
    "copied": (
        "query_formulation",
        "[key noun] [asked attribute]",
        [
            "Query only the key nouns that pin down the {subj}, not the sentence; a pasted question buries them.",
            "Reduce the question to two or three distinctive nouns about the {subj} before the first search.",
            "Search the words that name the {subj}, not the question, then read the {att} off the passage.",
            "Write a short keyword query naming the {subj} and the {att} instead of the full sentence.",
        ],
        [
            "Pasting the whole question into the search box.",
            "A query that repeats the question word for word.",
            "Long sentence-style queries that match nothing precisely.",
            "A first search that pasted the question returned off-topic passages.",
        ],
    ),
    "ambiguous": (
        "disambiguation",
        "[name] [field or era]",
        [
            "Add the kind of {subj} to a shared name and confirm the passage describes that sense.",
            "Qualify a bare name with its field, era or medium so the {subj} meant is found, not a namesake.",
            "When a name has several bearers, search it with distinguishing context and match it to the clue.",
        ],
        [
            "Answering from a namesake's article.",
            "Trusting the first passage whose name merely matches.",
            "Searching a surname or short name on its own.",
            "Results are about another bearer of the name.",
        ],
    ),
    "wrong_type": (
        "answer_format",
        "[entity] [answer type]",
        [
            "Decide what type of answer the question wants, a {att}, and reply with that type, not a near fact.",
            "Before answering, check the reply is a {att}; passages about a {subj} list many other attributes.",
            "Map the question word to the expected {att} and pick the span of exactly that type.",
        ],
        [
            "Replying with an occupation, city or other attribute.",
            "Giving a correct fact of the wrong type.",
            "An answer that is related but not the asked type.",
            "The passage offers several attributes and the asked one is easy to miss.",
        ],
    ),
    "related_entity": (
        "entity_resolution",
        "[candidate] [asked role]",
        [
            "Separate the {subj} asked about from other names in the passage; only one fits the role asked.",
            "Read which role each name in the passage plays and answer with the one matching the question.",
            "Check that the chosen name holds the exact relation asked, not just a mention near the {subj}.",
        ],
        [
            "Answering with another name from the same passage.",
            "Picking the entity named inside the clue.",
            "Confusing a mentioned person with the one asked.",
            "A passage names several people near the fact.",
        ],
    ),
    "date_confusion": (
        "temporal",
        "[entity] [event] date",
        [
            "Find the sentence stating the exact event asked and take its year, not another date nearby.",
            "Match the verb of the question (founded, published, discovered) to the dated event before replying.",
            "Passages carry many dates; keep only the one attached to the event in the question.",
        ],
        [
            "Taking the first date the passage mentions.",
            "Giving the year of a related but different event.",
            "Guessing a nearby year from memory.",
            "A passage gives several dates for one subject.",
        ],
    ),
    "number_confusion": (
        "numeric",
        "[event] year",
        [
            "Look up both dates separately, subtract the earlier from the later, and reply with the difference.",
            "An interval needs two endpoints: retrieve each event's date, then compute the number of years.",
            "Compute the span from two looked-up years; the answer is a count, never a date.",
        ],
        [
            "Answering with one of the years instead of the gap.",
            "Subtracting before both dates are found.",
            "Estimating the interval without the second date.",
            "A question needs arithmetic on two dates.",
        ],
    ),
    "one_side": (
        "comparison",
        "[other item] [attribute]",
        [
            "Search each compared item on its own, note both values, and only then decide.",
            "Give every option its own query and compare the two retrieved attributes side by side.",
            "A comparison needs evidence on both sides; look up the second item even if the first is clear.",
        ],
        [
            "Deciding after reading about only one item.",
            "Assuming the unsearched item from memory.",
            "Comparing reputations instead of the stated attribute.",
            "One side of a comparison is unsearched.",
        ],
    ),
    "bridge_answer": (
        "decomposition",
        "[bridge entity] [asked attribute]",
        [
            "Treat the question as a chain: one search finds the middle entity, a second one finds its {att}.",
            "The inner {subj} is a stepping stone; search it again to reach the {att} the question asks for.",
            "Split the nested clue into hops and answer only with the outer entity's {att}.",
        ],
        [
            "Answering with the intermediate entity.",
            "Stopping once the inner clue is resolved.",
            "Giving the bridge instead of the final hop.",
            "The first hop named a middle entity.",
        ],
    ),
    "one_search": (
        "decomposition",
        "[intermediate entity] [asked attribute]",
        [
            "Plan the hops first; once a passage names the intermediate entity, query that name for the {att}.",
            "Count the hidden entities in the question and spend one search on each before answering.",
            "Use the name found in the first hop as the next query instead of guessing the {att}.",
        ],
        [
            "Guessing after a single search on a two-hop question.",
            "Answering before the second hop is read.",
            "Stopping at the first passage read.",
            "A multi-hop question after only one search.",
        ],
    ),
    "no_answer": (
        "query_formulation",
        "[synonym] [entity type]",
        [
            "After a query misses twice, reformulate with the {subj}'s type, a synonym or a distinctive phrase.",
            "Vary the query when results stay off-topic: drop filler words, add the {att}, or try the full name.",
            "Change strategy after a miss instead of reissuing it; another angle usually reaches the passage.",
        ],
        [
            "Repeating the same failing query until turns run out.",
            "Giving no answer after identical searches.",
            "Reissuing one query with cosmetic changes.",
            "Two searches in a row missed the subject.",
        ],
    ),
}
KEYS = ("description", "trigger", "avoid", "queries", "category")  # the order DISTILLER_SYSTEM shows


def skill_json(qtype: str, mode: str, rng: random.Random) -> tuple[str, list[tuple[str, str]]]:
    """The completion for a (question type, failure mode): one JSON skill phrased by the grammar, and its keys
    (trigger, description template) and (trigger, description), for steering away from near-duplicates."""
    subj, att, _, templates = QTYPES[qtype]
    category, extra_query, descriptions, cues = MODES[mode]
    template = rng.choice(descriptions)
    description = template.format(subj=subj, att=att)
    tail = rng.choice([None, *TAILS[qtype]])
    if tail and ";" not in description and len(f"{description} {tail}".split()) <= 25:  # <= 25 words
        description = f"{description[:-1]}; {tail}."
    queries = templates[: rng.randint(1, 2)] + ([extra_query] if rng.random() < 0.5 else [])
    if qtype.startswith("compare") and rng.random() < 0.5:
        category = "comparison"  # a failed comparison fits both its mode's category and this one
    trigger = cues[-1] if rng.random() < 0.2 else rng.choice(TRIGGERS[qtype])
    values = (description, trigger, rng.choice(cues[:-1]), queries, category)
    return json.dumps(dict(zip(KEYS, values))), [(trigger, template), (trigger, description)]  # ASCII grammar


def distiller_examples(n: int, seed: int = 0, config: MemoryConfig | None = None) -> list[WarmupExample]:
    """``n`` examples of role "distiller", kind ``distill_<qtype>_<mode>``: ``messages`` is ``build_messages``
    of the failure; the one trained segment, ``final`` and ``target`` are the skill JSON."""
    config, rng, seeds = config or MemoryConfig(), random.Random(seed), load_seeds()[1]
    out: list[WarmupExample] = []
    seen: set[tuple[str, str]] = set()
    tries = 0
    while len(out) < n and tries < 50 * n:  # the question types in turn
        qtype, tries = list(QTYPES)[tries % len(QTYPES)], tries + 1
        if (made := make_failure(qtype, rng)) is None:
            continue
        question, gold, mode, answer, searches = made
        unhelpful = rng.sample(seeds, rng.choice([0, 0, 1, 2]))  # skills the failing rollout was given
        step = rng.randint(1, 400)
        failure = PendingFailure(
            key=question_key(question),
            failures=rng.randint(1, 5),
            first_step=step,
            last_step=step,
            guided=bool(unhelpful),
            record=FailureRecord(
                question=question,
                answer=answer,
                golds=[gold],
                searches=searches,
                step=step,
                retrieved_skill_ids=[u.id for u in unhelpful],
                status="answered" if answer else "max_turns",
            ),
        )
        # Redraw the phrasing until it passes the distiller's own checks (entity copying above all) with
        # a new description template for its trigger, else new wording (a tail alone is a near-duplicate).
        best: tuple[int, str, list] | None = None
        for _ in range(24):
            draft, keys = skill_json(qtype, mode, rng)
            if check_candidate(parse_skill_output(draft), failure, config, step)[0] is not None:
                best = max(best or (-1, "", []), (sum(k not in seen for k in keys), draft, keys))
                if best[0] == 2:
                    break
        if best is not None:
            _, text, keys = best
            seen.update(keys)
            out.append(
                WarmupExample(  # type: ignore[arg-type]  # the Role literal is widened on integration
                    role="distiller",
                    kind=f"distill_{qtype}_{mode}",
                    hops=QTYPES[qtype][2],
                    messages=build_messages(failure, unhelpful),
                    segments=[(text, True)],
                    final=text,
                    target=text,
                    sources=[],
                    queries=[],
                )
            )
    if len(out) < n:
        raise ValueError(f"could only build {len(out)} of {n} distiller examples")
    return out
