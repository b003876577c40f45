"""Distiller examples for the format warm-up: a failed rollout in, one JSON skill out.

The embedded distiller (SmolLM2-135M) writes nothing ``parse_skill_output`` accepts, so no consolidation
ever admits a skill. These examples teach it the output format on synthetic failures: the prompt is exactly
``distiller.build_messages`` of a realistic ``PendingFailure`` (a question built from the embedded corpus,
a wrong answer or none, the 1-3 queries the solver issued, sometimes 1-2 seed skills that did not help), the
completion ONE JSON object in the format ``DISTILLER_SYSTEM`` asks for.

The skill comes from a template grammar conditioned only on what the distiller can see: the question type
(trigger, query templates, description tails), the hop structure (two-hop types) and the failure mode that
the searches and the answer show (description, avoid, category). Every skill is checked with the real
``check_candidate``, so none copies an entity of its failing question, and repeats are avoided.
"""

from __future__ import annotations

import json
import random
import re
from functools import lru_cache

from sesa_graph.memory.config import MemoryConfig
from sesa_graph.memory.distiller import build_messages, check_candidate, parse_skill_output
from sesa_graph.memory.queue import FailureRecord, PendingFailure, question_key
from sesa_graph.memory.skill import load_seeds
from training.warmup_data import Article, Synthesizer, WarmupExample, clue

# ------------------------------------------------------------------------------------------ the grammar
# qtype -> (subject, answer type): fill {subj} / {att} in the mode templates.
SLOTS = {
    "nationality": ("person", "nationality"), "creator": ("work", "creator"), "year": ("entity", "year"),
    "bridge_fact": ("work", "nationality"), "bridge_title": ("described entity", "name"),
    "compare_same": ("person", "nationality"), "compare_kind": ("item", "type"),
    "title": ("described entity", "name"), "year_gap": ("event", "interval"), "location": ("place", "country"),
}
QTYPES = tuple(SLOTS)
# qtype -> when the skill applies (<= 15 words): the question type is what a distiller sees first.
TRIGGERS = {k: v.split(" | ") for k, v in {
    "nationality": "The nationality or citizenship of a named person is asked. | What nationality a historical "
    "figure, artist or scientist was. | A person is named and the nation they belonged to is wanted.",
    "creator": "Who wrote, directed, painted or composed a titled work. | A creative work is named and the person "
    "who made it is asked. | Author, director or composer questions about a book, film or piece.",
    "year": "In what year something was founded, published, built or discovered. | When-questions about a single "
    "event in the history of a named thing. | The year of a founding, premiere, publication or discovery is wanted.",
    "bridge_fact": "A person identified only through a work they made, with their nationality asked. | Two-hop "
    "questions: the maker of a work, then a fact about that maker. | An attribute of an unnamed creator who is "
    "described by their creation.",
    "bridge_title": "A description that hides a second entity behind its own clue. | Nested clues where an inner "
    "description must be resolved first. | Two-hop riddles: something defined through another unnamed thing.",
    "compare_same": "Yes/no questions on whether two named people share a nationality. | Two individuals are "
    "compared on the same origin attribute. | Whether a pair of persons came from the same nation.",
    "compare_kind": "Which of two named options belongs to a stated category. | A pair of names and a kind; exactly "
    "one of them is that kind. | Choosing between two items by what sort of thing each is.",
    "title": "Who or what fits a definition-style description; nothing is named. | Identify an entity from its "
    "role, origin and era alone. | The answer is whatever a long descriptive clue defines.",
    "year_gap": "How many years separate two events about different entities. | The span in years between two "
    "dated events. | Interval questions that need two separate dates.",
    "location": "In which country a city, port or settlement lies. | Where a place is, asked at the level of its "
    "country. | The country containing a named town or city.",
}.items()}
# qtype -> tails that may close a description: more phrasings, still about that question type.
TAILS = {
    "nationality": ["the demonym usually opens the first sentence", "answer with the demonym, not a country"],
    "creator": ["the credit often follows the word 'by'", "answer with the person's full name"],
    "year": ["answer with the four-digit year only", "the event verb sits next to its date"],
    "bridge_fact": ["the work's passage names its maker", "the maker's own article states the demonym"],
    "bridge_title": ["resolve the inner clue before the outer one", "the outer clue then points to the answer"],
    "compare_same": ["then answer yes or no", "state both demonyms before deciding"],
    "compare_kind": ["answer with the matching item's name", "each first sentence says what the item is"],
    "title": ["combine role, origin and era in the query", "the rarest noun of the clue narrows results fastest"],
    "year_gap": ["answer with the number of years", "keep both years in the notes"],
    "location": ["answer at the country level", "a city's first sentence usually names its country"],
}
# mode -> (category, descriptions (<= 25 words), avoid cues (<= 12 words), a situation usable as trigger):
# the failure mode the rollout shows decides the advice.
MODES = {
    "copied": ("query_formulation", [
        "Search only the {subj}'s name plus the {att} wanted; a pasted sentence buries the key words.",
        "Reduce the question to two or three distinctive nouns, starting with the {subj}, before searching.",
        "Write a short keyword query naming the {subj} and the {att} instead of the full sentence.",
        "Pull the named {subj} out of the question, query it alone, then read the {att} off its passage."], [
        "Pasting the whole question into the search box.", "A query that repeats the question word for word.",
        "Long sentence-style queries that match nothing precisely."],
        "A first search that pasted the question returned off-topic passages."),
    "ambiguous": ("disambiguation", [
        "Add the kind of {subj} to a shared name and confirm the passage describes that sense before answering.",
        "Qualify a bare name with its field, era or medium so the {subj} meant is retrieved, not a namesake.",
        "When a name has several bearers, search it with distinguishing context and match that to the clue."], [
        "Answering from a namesake's article.", "Trusting the first passage whose name merely matches.",
        "Searching a surname or short name on its own."],
        "Results are about a different bearer of the same name."),
    "wrong_type": ("answer_format", [
        "Decide which type of answer the question wants, a {att}, and reply with that type, not a nearby fact.",
        "Before answering, check the reply is a {att}; passages about a {subj} list many other attributes.",
        "Map the question word to the expected {att} and pick the span of exactly that type."], [
        "Replying with an occupation, city or other attribute instead.",
        "Giving a correct fact of the wrong type.", "An answer that is related but not the asked type."],
        "The retrieved passage offers several attributes and the asked one is easy to miss."),
    "related_entity": ("entity_resolution", [
        "Separate the {subj} asked about from other names in the passage; only one of them fits the role asked.",
        "Read which role each name in the passage plays and answer with the one matching the question.",
        "Check that the chosen name holds the exact relation asked, not just a mention near the {subj}."], [
        "Answering with another name that appears in the same passage.",
        "Picking the entity named inside the clue.", "Confusing a mentioned person with the one asked."],
        "A passage mentions several names near the fact asked about."),
    "date_confusion": ("temporal", [
        "Find the sentence stating the exact event asked and take its year, not another date from the passage.",
        "Match the verb of the question (founded, published, discovered) to the dated event before answering.",
        "Passages carry many dates; keep only the one attached to the event in the question."], [
        "Taking the first date the passage mentions.", "Giving the year of a related but different event.",
        "Guessing a nearby year from memory."],
        "A passage gives several dates for one subject."),
    "number_confusion": ("numeric", [
        "Look up both dates separately, subtract the earlier from the later, and reply with just the difference.",
        "An interval needs two endpoints: retrieve each event's date, then compute and state the number of years.",
        "Compute the span from two looked-up years; the answer is a count, never a date."], [
        "Answering with one of the years instead of the gap.", "Subtracting before both dates are found.",
        "Estimating the interval without the second date."],
        "A question needs arithmetic on two looked-up dates."),
    "one_side": ("comparison", [
        "Search each compared item on its own, note both values, and only then decide.",
        "Give every option its own query and compare the two retrieved attributes side by side.",
        "A comparison needs evidence for both sides, so look up the second item even if the first seems clear."], [
        "Deciding after reading about only one item.", "Assuming the unsearched item from memory.",
        "Comparing reputations instead of the stated attribute."],
        "A comparison where only one side has been searched so far."),
    "bridge_answer": ("decomposition", [
        "Treat the question as a chain: the first search finds the middle entity, a second one finds its {att}.",
        "The inner {subj} is a stepping stone; search it again to reach the {att} the question asks for.",
        "Split the nested clue into hops and answer only with the outer entity's {att}."], [
        "Answering with the intermediate entity.", "Stopping once the inner clue is resolved.",
        "Giving the bridge instead of the final hop."],
        "The first hop has named an intermediate entity, but the question asks further."),
    "one_search": ("decomposition", [
        "Plan the hops first; once a passage names the intermediate entity, query that name for the {att}.",
        "Count the hidden entities in the question and spend one search on each before answering.",
        "Use the name found in the first hop as the next query instead of guessing the {att}."], [
        "Guessing after a single search on a two-hop question.", "Answering before the second hop is looked up.",
        "Stopping at the first passage read."],
        "A multi-hop question after only one search."),
    "no_answer": ("query_formulation", [
        "After a query misses twice, reformulate with the {subj}'s type, a synonym or a distinctive phrase.",
        "Vary the query when results stay off-topic: drop filler words, add the {att}, or try the full name.",
        "Change strategy after a miss instead of reissuing it; a different angle usually reaches the passage."], [
        "Repeating the same failing query until turns run out.", "Giving no answer after identical searches.",
        "Reissuing one query with cosmetic changes."],
        "Two searches in a row returned nothing about the subject."),
}
# qtype -> query template sets, [bracketed] placeholders only; some modes add one of their own.
QUERIES = {
    "nationality": [["[full name] nationality"], ["[full name] [profession]", "[full name] born in"]],
    "creator": [["[work title] [creator role]"], ["[work title] [medium] [year]", "[work title] author"]],
    "year": [["[entity] [event] year"], ["[entity] [event verb] in", "[entity] history"]],
    "bridge_fact": [["[work title] [creator role]", "[creator] nationality"], ["[work title]", "[creator] born"]],
    "bridge_title": [["[inner description]", "[bridge entity] [relation]"], ["[inner clue]", "[outer clue] [bridge]"]],
    "compare_same": [["[person A] nationality", "[person B] nationality"], ["[person A]", "[person B]"]],
    "compare_kind": [["[item A] is a", "[item B] is a"], ["[item A] [category]", "[item B] [category]"]],
    "title": [["[distinctive phrase of the clue]"], ["[role] [origin] [era]", "[candidate] [role]"]],
    "year_gap": [["[entity A] [event] year", "[entity B] [event] year"]],
    "location": [["[place] country"], ["[place] located in", "[region] country"]],
}
EXTRA_QUERY = {"ambiguous": "[name] [field or era]", "no_answer": "[synonym] [entity type]"}


def skill_fields(qtype: str, mode: str, rng: random.Random) -> dict:
    """One skill for a (question type, failure mode), its phrasing drawn from the grammar."""
    subj, att = SLOTS[qtype]
    category, descriptions, avoids, situation = MODES[mode]
    description = rng.choice(descriptions).format(subj=subj, att=att)
    tail = rng.choice([None, *TAILS[qtype]])
    if tail and ";" not in description and len(description.split()) + len(tail.split()) <= 25:
        description = f"{description[:-1]}; {tail}."  # DISTILLER_SYSTEM: at most 25 words
    queries = list(rng.choice(QUERIES[qtype]))
    if mode in EXTRA_QUERY and len(queries) < 3:
        queries.append(EXTRA_QUERY[mode])
    if qtype.startswith("compare") and rng.random() < 0.5:
        category = "comparison"  # a failed comparison fits both its mode's category and this one
    return {"description": description, "trigger": situation if rng.random() < 0.2 else rng.choice(TRIGGERS[qtype]),
            "avoid": rng.choice(avoids), "queries": queries, "category": category}


def skill_json(fields: dict) -> str:
    """The completion: one JSON object, keys in the order DISTILLER_SYSTEM shows them."""
    return json.dumps({k: fields[k] for k in ("description", "trigger", "avoid", "queries", "category")},
                      ensure_ascii=False)


# ----------------------------------------------------------------------------------------- the failures
# Words the corpus parser reads as a nationality ("a Classical composer") that are not demonyms.
_NOT_DEMONYMS = {"South", "North", "Central", "Ancient", "Classical", "Christian", "Sunni", "Muslim", "Church",
                 "Buddhist", "Hindu", "Hong", "Neoplatonist", "Alid", "Brahmin", "Vedic", "Latin", "Jewish"}
_COUNTRY_IN = re.compile(r"\b(?:city|town|capital|port|municipality|village)\b.* in ([A-Z][a-z]+)$")
_POOLS = {"bridge_fact": "bridge_fact_2", "bridge_title": "bridge_title_2", "compare_same": "compare_same_2",
          "compare_kind": "compare_kind_2", "title": "title_clause", "year_gap": "year"}


@lru_cache(maxsize=1)
def _corpus() -> tuple[Synthesizer, dict[str, str], list[Article]]:
    """The warm-up corpus analysis (no search is run), its clean demonyms, and places in a country."""
    s = Synthesizer(None, seed=0)  # type: ignore[arg-type]  # search is never called here
    nats = {t: n for t, n in s.nats.items() if n not in _NOT_DEMONYMS}
    places = [a for a in s.articles if (m := _COUNTRY_IN.search(a.description))
              and "country" in getattr(s.by_name.get(m.group(1)), "description", "").lower()]
    return s, nats, places


def make_failure(qtype: str, rng: random.Random) -> tuple[str, str, int, str, str | None, list[str]] | None:
    """(question, gold, hops, failure mode, the solver's answer, its searches); None if this draw does not fit.

    The searches and the answer show the mode as a real rollout would: the question pasted as a query, a
    surname that finds a namesake, one search on a two-hop question, the bridge entity as the answer, ..."""
    s, nats, places = _corpus()
    a = rng.choice(places if qtype == "location" else s.pools[_POOLS.get(qtype, qtype)])
    who = "Who" if a.topic == "People" else "What"
    other_nat = lambda gold: rng.choice(sorted(set(nats.values()) - {gold}))  # noqa: E731
    modes: dict[str, tuple[str | None, list[str]]] = {}
    hops = 2 if qtype in ("bridge_fact", "bridge_title", "compare_same", "compare_kind", "year_gap") else 1
    if qtype == "nationality":
        if a.title not in nats:
            return None
        gold, q = nats[a.title], rng.choice([f"What nationality was {a.name}?", f"What is {a.name}'s nationality?"])
        modes["copied"] = (rng.choice([other_nat(gold), None]), [q])
        if " " in a.name:
            modes["ambiguous"] = (other_nat(gold), [a.name.split()[-1]])
        job = re.sub(r"\(.*|\b[A-Z]\S*", "", a.description).strip(" ,-")  # "American author (..)" -> author
        if job and len(job.split()) <= 4:
            modes["wrong_type"] = (job, [a.name])
    elif qtype == "creator":
        what, verb, gold = s.creators[a.title]
        q = f"Who {verb} {a.name}?" if verb != "created" else f"Who created the {what.lower()} {a.name}?"
        modes["copied"] = (None, [q])
        named = sorted({t.split(" (")[0] for t in nats} & {m for m in re.findall(
            r"[A-Z][\w'.-]+(?: [A-Z][\w'.-]+)+", a.text[:400])} - {gold})  # other persons the passage names
        if named:
            modes["related_entity"] = (rng.choice(named), [a.name])
        if a.title != a.name:
            modes["ambiguous"] = (None, [a.name, f"{a.name} {verb}"])
    elif qtype == "year":
        verb, gold = s.years[a.title]
        q, near = f"In what year was {a.name} {verb}?", str(int(gold) + rng.choice([-20, -2, 1, 5]))
        modes["date_confusion"] = (near, [a.name, f"{a.name} {verb}"][: rng.randint(1, 2)])
        modes["copied"] = (rng.choice([near, None]), [q])
        modes["no_answer"] = (None, [f"{a.name} {verb} year", f"{a.name} {verb} year?"])
    elif qtype == "bridge_fact":
        what, verb, maker = s.creators[a.title]
        gold = nats.get(s._person(maker).title)
        if gold is None:
            return None
        q = f"What nationality was the person who {verb} {a.name}?"
        modes["bridge_answer"] = (maker, [a.name])
        modes["one_search"] = (other_nat(gold), [a.name])
        modes["copied"] = (None, [q, f"person who {verb} {a.name} nationality"])
    elif qtype == "bridge_title":
        c, b = s.clauses[a.title], s._bridge(a)
        hidden = s._hide(a, b) if b else None
        if hidden is None:
            return None
        gold, q = a.name, f"{who} {c.verb} {c.det} {hidden[1]}?"
        modes["bridge_answer"] = (b.name, [clue(s.clauses[b.title].predicate) or hidden[0]])
        modes["copied"] = (rng.choice([None, b.name]), [q])
    elif qtype == "compare_same":
        b = rng.choice(s.pools["compare_same_2"])
        if b.name == a.name or a.title not in nats or b.title not in nats:
            return None
        gold = "yes" if nats[a.title] == nats[b.title] else "no"
        q, flip = f"Were {a.name} and {b.name} of the same nationality?", "no" if gold == "yes" else "yes"
        modes["one_side"] = (flip, [rng.choice([a.name, b.name])])
        modes["copied"] = (flip, [q])
    elif qtype == "compare_kind":
        head, b = s.kinds[a.title], rng.choice(s.articles)
        if b.name == a.name or head in (b.description + b.text[:400]).lower():
            return None
        first, second = (a, b) if rng.random() < 0.5 else (b, a)
        gold, q = a.name, f"Which is {'an' if head[0] in 'aeiou' else 'a'} {head}, {first.name} or {second.name}?"
        modes["one_side"] = (b.name, [b.name])
        modes["copied"] = (b.name, [q])
    elif qtype == "title":
        c, b = s.clauses[a.title], s._bridge(a)
        gold, q = a.name, f"{who} {c.verb} {c.phrase()}?"
        modes["copied"] = (None, [q])
        modes["no_answer"] = (None, [c.predicate, c.predicate + "?"])
        if b is not None:  # answered with the entity the clue names, not the one it describes
            modes["related_entity"] = (b.name, [" ".join(c.predicate.split()[:8])])
    elif qtype == "year_gap":
        b = rng.choice(s.pools["year"])
        (va, ya), (vb, yb) = s.years[a.title], s.years[b.title]
        if b.name == a.name or ya == yb:
            return None
        gold = str(abs(int(ya) - int(yb)))
        q = f"How many years passed between when {a.name} was {va} and when {b.name} was {vb}?"
        modes["number_confusion"] = (rng.choice([ya, yb]), [a.name, b.name])
        modes["one_search"] = (None, [a.name])
        modes["copied"] = (None, [q])
    elif qtype == "location":
        gold = _COUNTRY_IN.search(a.description).group(1)
        q = rng.choice([f"In which country is {a.name}?", f"Which country is {a.name} in?"])
        same = [p.name for p in places if p.name != a.name and p.description.endswith(gold)]
        modes["wrong_type"] = (rng.choice(same or [p.name for p in places if p is not a]), [a.name])
        modes["copied"] = (None, [q])
    else:
        raise ValueError(f"unknown question type {qtype!r}; known: {list(QTYPES)}")
    mode = rng.choice(sorted(modes))
    return (q, gold, hops, mode, *modes[mode])


# -------------------------------------------------------------------------------------------- examples


def distiller_examples(n: int, seed: int = 0, config: MemoryConfig | None = None) -> list[WarmupExample]:
    """``n`` distiller examples (role "distiller", kind ``distill_<qtype>_<mode>``), question types cycled.

    ``messages`` is ``build_messages(failure, unhelpful)``; the one trained segment is the skill JSON, which
    is also ``final`` and ``target``. Every skill passes ``check_candidate`` (default ``MemoryConfig``).
    """
    if n < 1:
        raise ValueError(f"examples must be >= 1, got {n}")
    config, rng, seeds = config or MemoryConfig(), random.Random(seed), load_seeds()[1]
    out: list[WarmupExample] = []
    seen: set[tuple[str, str]] = set()
    for tries in range(50 * n):
        if len(out) == n:
            break
        qtype = QTYPES[tries % len(QTYPES)]
        made = make_failure(qtype, rng)
        if made is None:
            continue
        question, gold, hops, mode, answer, searches = made
        unhelpful = rng.sample(seeds, rng.choice([0, 0, 1, 2]))  # skills the failing rollout was given
        step = rng.randint(1, 400)
        failure = PendingFailure(
            key=question_key(question), failures=rng.randint(1, 5), guided=bool(unhelpful), first_step=step,
            last_step=step, record=FailureRecord(
                question=question, answer=answer, golds=[gold], searches=searches, step=step,
                retrieved_skill_ids=[u.id for u in unhelpful], status="answered" if answer else "max_turns"))
        # Redraw the phrasing until it passes the distiller's own checks (entity copying above all),
        # preferring a (trigger, description) not used yet; a repeat is allowed once the grammar runs dry.
        passing: list[tuple[tuple[str, str], str]] = []
        for _ in range(16):
            fields = skill_fields(qtype, mode, rng)
            text = skill_json(fields)
            if check_candidate(parse_skill_output(text), failure, config, step)[0] is not None:
                passing.append(((fields["trigger"], fields["description"]), text))
                if passing[-1][0] not in seen:
                    break
        if not passing:
            continue
        key, text = passing[-1]
        seen.add(key)
        out.append(WarmupExample(
            role="distiller", kind=f"distill_{qtype}_{mode}", hops=hops,  # type: ignore[arg-type]
            messages=build_messages(failure, unhelpful), segments=[(text, True)],
            final=text, target=text, sources=[], queries=[]))
    if len(out) < n:
        raise RuntimeError(f"could only build {len(out)} of {n} distiller examples")
    return out
