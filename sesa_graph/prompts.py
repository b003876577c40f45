"""Every prompt template, as module-level constants with named ``{placeholders}``.

Kept short on purpose: the embedded policy is SmolLM2-135M with a 2048-8192 token context, and every
prompt token is paid for in each of the G solver samples. Text that comes from outside (questions,
documents, skills, predictions) is passed through ``protocol.escape`` by the ``render_*`` helpers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from sesa_graph.protocol import escape

# --- Solver ---

SOLVER_SYSTEM = """You answer questions with the help of a search engine.
In each turn you may first reason briefly inside <think> </think>. Then do one of these:
- search: <search>a short query</search>. The results come back inside <information> </information>.
- answer: <answer>the answer</answer>. Write only the answer itself (a name, date, number or short \
phrase), not a sentence.
You may search at most {max_searches} times. Answer as soon as you know."""

SOLVER_USER = "Question: {question}"

SOLVER_USER_WITH_SKILLS = "{skills_block}\n\nQuestion: {question}"

INVALID_ACTION = (
    "No valid action found. Search with <search>query</search> or answer with <answer>answer</answer>, "
    "and put nothing else inside the tags."
)

FINAL_TURN_NOTICE = "No searches left. Give your answer now with <answer>answer</answer>."
# When the environment opens the tag itself, the notice shows no example to copy: a small model given
# "<answer>answer</answer>" right before an opened tag wrote the word "answer" in 19 of 40 rollouts.
FINAL_TURN_FORCED_NOTICE = "No searches left. Write only the answer itself now."


def render_solver_system(max_searches: int) -> str:
    return SOLVER_SYSTEM.format(max_searches=max_searches)


def render_solver_user(question: str, skills_block: str | None = None) -> str:
    """The solver's user message; ``skills_block`` is ``render_skills(...)`` output, or None/"" for none."""
    if skills_block:
        return SOLVER_USER_WITH_SKILLS.format(skills_block=escape(skills_block), question=escape(question))
    return SOLVER_USER.format(question=escape(question))


def solver_messages(question: str, skills_block: str | None, max_turns: int) -> list[dict[str, str]]:
    """The solver's chat: system (with its search budget, one turn kept for the answer) and user."""
    return [
        {"role": "system", "content": render_solver_system(max(max_turns - 1, 1))},
        {"role": "user", "content": render_solver_user(question, skills_block)},
    ]


# --- Skills (what the solver sees of the skill bank) ---

SKILLS_HEADER = "Search tips that may help:"

SKILL_LINE = "{index}. {description}"
SKILL_TRIGGER = " When: {trigger}"
SKILL_AVOID = " Avoid: {avoid}"
SKILL_TEMPLATES = " Try: {templates}"

SKILL_FIELD_MAX_CHARS = 160
SKILL_MAX_TEMPLATES = 2


class SkillText(NamedTuple):
    """The parts of a skill the solver reads. Plain 4-tuples work too."""

    description: str
    trigger: str = ""
    avoid: str = ""
    templates: Sequence[str] = ()


def _clip(text: str, limit: int = SKILL_FIELD_MAX_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def render_skill(index: int, skill: SkillText | tuple) -> str:
    description, trigger, avoid, templates = SkillText(*skill)
    if isinstance(templates, str):  # one template given bare
        templates = [templates]
    line = SKILL_LINE.format(index=index, description=_clip(description))
    if trigger.strip():
        line += SKILL_TRIGGER.format(trigger=_clip(trigger))
    if avoid.strip():
        line += SKILL_AVOID.format(avoid=_clip(avoid))
    shown = [_clip(t) for t in templates[:SKILL_MAX_TEMPLATES] if t.strip()]
    if shown:
        line += SKILL_TEMPLATES.format(templates=" | ".join(shown))
    return escape(line)


def render_skills(skills: Sequence[SkillText | tuple], max_chars: int) -> str:
    """A numbered block of skills, most relevant first, at most ``max_chars`` long ("" when none fit).

    Skills that would overflow the budget are dropped whole rather than cut mid-sentence.
    """
    lines: list[str] = []
    used = len(SKILLS_HEADER)
    for skill in skills:
        line = render_skill(len(lines) + 1, skill)
        if used + 1 + len(line) > max_chars:
            break
        lines.append(line)
        used += 1 + len(line)
    return "\n".join([SKILLS_HEADER, *lines]) if lines else ""


# --- Proposer ---

PROPOSER_SYSTEM = """You write quiz questions that need a search engine to answer.
In each turn you may first reason briefly inside <think> </think>. Then do one of these:
- search: <search>a short query</search>. The results come back inside <information> </information>.
- finish: <question>your question</question>.
The question must have exactly one correct answer: the target. Never write the target in the question. \
Use only facts you found."""

PROPOSER_USER = (
    "Target answer: {target}\n"
    "Write a question whose answer is the target and that takes about {hops} searches to answer."
)

PROPOSER_INVALID_ACTION = (
    "No valid action found. Search with <search>query</search> or finish with "
    "<question>your question</question>, and put nothing else inside the tags."
)

PROPOSER_FINAL_NOTICE = "No searches left. Write your question now with <question>your question</question>."
PROPOSER_FINAL_FORCED_NOTICE = "No searches left. Write your question now."


def template_placeholders() -> frozenset[str]:
    """Every example text the prompts put inside a protocol tag (``<answer>answer</answer>``, ``<search>a
    short query</search>``, ``<question>your question</question>``), as written: a small model copies these,
    and such a copy is never an answer or a question, whatever a judge model says of it."""
    templates = [v for k, v in globals().items() if k.isupper() and isinstance(v, str)]
    found = set()
    for text in templates:
        found.update(m.group(2).strip() for m in _EXAMPLE_IN_TAG.finditer(text))
    return frozenset(f for f in found if f)


_EXAMPLE_IN_TAG = re.compile(r"<(answer|search|question)>([^<]*)</\1>")

# SSP's pool rows carry example questions (``sys_question_example``) that its proposer prompt shows: the form
# of a good question. They are about other answers, so they are shown as form only.
PROPOSER_EXAMPLES = "\n\nExamples of well-formed questions (about other answers; copy their form, not their facts):\n{examples}"


def render_proposer_user(target: str, hops: int, examples: str | None = None) -> str:
    text = PROPOSER_USER.format(target=escape(target), hops=hops)
    return (
        text + PROPOSER_EXAMPLES.format(examples=escape(examples.strip()))
        if examples and examples.strip()
        else text
    )


# --- Judge ---

# Said explicitly: a chat template without a system turn adds its own (Qwen's names the model instead). What
# counts as the same answer is spelled out: asked only "does it mean the same?", Qwen2.5-Coder-1.5B called 38
# of 158 wrong real solver answers Correct ("A", "Ganymede" for Callisto, "Philip II" for Alexander).
JUDGE_SYSTEM = (
    "You check answers to quiz questions against the gold answers. Reply with one word. Correct: the predicted "
    "answer names the same person, place, thing, date or number as a gold answer (another name, spelling or a "
    "fuller or shorter form of it). Wrong: anything else -- a different or related thing, a broader or narrower "
    "one, a cut-off word, a letter, a sentence that names nothing."
)

JUDGE_PROMPT = """Question: {question}
Gold answers: {gold_answers}
Predicted answer: {prediction}
Does the predicted answer name the same thing as a gold answer? Reply Correct or Wrong."""


# Worked verdicts shown before every judgment, as earlier turns of the conversation: without them a 0.5B
# judge called all 98 exact-match misses of benchmarks/data/judge_pairs.jsonl "Correct" (precision 0.38).
# Wrong ones outnumber Correct ones as they do among a small solver's misses: a broader place, a related
# person, a cut-off word. None of them is in either labelled set (benchmarks/data/judge_pairs*.jsonl).
JUDGE_EXAMPLES: tuple[tuple[str, str, str, str], ...] = (
    ("Who wrote the novel Nineteen Eighty-Four?", "George Orwell", "Orwell", "Correct"),
    ("In which year did the Berlin Wall fall?", "1989", "1991", "Wrong"),
    ("Which city hosted the 1936 Summer Olympics?", "Berlin", "Germany", "Wrong"),
    ("Which planet is known as the Red Planet?", "Mars", "the planet Mars", "Correct"),
    ("Who composed the opera The Magic Flute?", "Wolfgang Amadeus Mozart", "Ludwig van Beethoven", "Wrong"),
    (
        "Who was the first President of the United States?",
        "George Washington",
        "the first president",
        "Wrong",
    ),
    ("What nationality was the author of Don Quixote?", "Spanish", "Miguel de Cervantes", "Wrong"),
    ("In what year did the First World War begin?", "1914", "July 1914", "Correct"),
    ("Which river flows through Baghdad?", "Tigris", "Tig", "Wrong"),
    ("What is the capital of Canada?", "Ottawa", "Canada", "Wrong"),
)


def render_judge_prompt(question: str, golds: Sequence[str], prediction: str) -> str:
    return JUDGE_PROMPT.format(
        question=escape(question),
        gold_answers="; ".join(escape(g) for g in golds),
        prediction=escape(prediction),
    )


def judge_messages(question: str, golds: Sequence[str], prediction: str) -> list[dict[str, str]]:
    """The judge's whole conversation: its system turn, the worked examples, then the item to judge. Every
    item shares the prefix up to its own turn, so a local judge prefills the examples once (its KV cache)."""
    turns = [{"role": "system", "content": JUDGE_SYSTEM}]
    for q, gold, pred, verdict in JUDGE_EXAMPLES:
        turns.append({"role": "user", "content": render_judge_prompt(q, [gold], pred)})
        turns.append({"role": "assistant", "content": verdict})
    turns.append({"role": "user", "content": render_judge_prompt(question, golds, prediction)})
    return turns


# --- Distiller (skill memory) ---

DISTILLER_SYSTEM = """You improve a search agent by writing reusable search skills. A skill is general \
advice for a whole class of questions, never facts about one question.
Reply with one JSON object and nothing else:
{{"description": "...", "trigger": "...", "avoid": "...", "queries": ["..."], "category": "..."}}
- description: the advice in one sentence (at most 25 words).
- trigger: the kind of question or situation it applies to (at most 15 words).
- avoid: the mistake it prevents (at most 12 words).
- queries: one to three search query templates with [bracketed] placeholders.
- category: one of {categories}.
Never use names, titles, places, dates or numbers from the failed question or its answers."""

DISTILLER_USER = """A search agent failed this question.
Question: {question}
Correct answer: {golds}
Agent's answer: {answer}
{group}Agent's searches:
{searches}
What those searches returned:
{evidence}
Skills it was given, which did not help:
{skills}
Compare what the searches returned with what the correct answer needed: which fact was missing or \
misread, and which search would have found it? What did those skills miss? Write one new skill that \
would have helped on questions like this one."""

# Only shown when the group's rate is known: the distiller then knows the question was answerable.
DISTILLER_GROUP = "Attempts at this question by the same agent: {solved:.0%} answered it right.\n"
DISTILLER_NO_SKILLS = "(none)"
DISTILLER_NO_ANSWER = "(no answer)"
DISTILLER_NO_EVIDENCE = "(nothing kept)"


# The "masked" view (memory.distiller_view) for small distillers: shown the raw failure, a 0.5B-1.5B model
# wrote about that one question (its names in every field) or copied any example skill verbatim; shown the
# question with its names replaced by [X] and what went wrong in words, it writes about the kind of question.
DISTILLER_MASKED_SYSTEM = """You write search skills for a question-answering agent that searches a \
Wikipedia-like corpus. You are shown one question the agent failed. Work out what kind of question it is and \
what the agent did wrong, then write advice that would help on every question of that kind.
Reply with one JSON object only:
{{"description": "<the advice, one sentence of at most 20 words>", "trigger": "<the kind of question it \
applies to, at most 12 words>", "avoid": "<the mistake it prevents, at most 10 words>", "queries": ["<a search \
query template with [slots] for names>"], "category": "<one of: {categories}>"}}
The skill must not contain any name, place, date or number from the failed question or its answers: use \
[person], [place], [work], [year] and similar slots."""

DISTILLER_MASKED_USER = """Failed question, with its names replaced by [X]: {question}
The agent searched: {searches}
What went wrong: {notes}
Write one skill for questions of this kind."""

# What went wrong, said from the rollout's record (skill_checks.failure_notes).
NOTE_ANSWER_REPEATS_QUESTION = "The agent's answer repeats words of the question."
NOTE_NO_ANSWER = "The agent gave no answer."
NOTE_ANSWER_RETRIEVED = "The correct answer was in what the searches returned, but the agent did not pick it."
NOTE_ANSWER_NOT_RETRIEVED = "No search returned the correct answer."
NOTE_NO_SEARCH = "The agent did not search."
NOTE_REPEATED_SEARCH = "The agent repeated the same search."

# Opens a small local distiller's reply (masked view): it then writes the JSON object, not an essay.
DISTILLER_REPLY_PREFIX = '{"description": "'


def render_distiller_masked_user(question: str, searches: Sequence[str], notes: Sequence[str]) -> str:
    """One failure in the masked view: ``question`` and ``searches`` already masked, ``notes`` what went
    wrong. The skills that did not help are not shown: a 0.5B distiller copied their text into its own."""
    return DISTILLER_MASKED_USER.format(
        question=escape(question),
        searches="; ".join(f'"{escape(q)}"' for q in searches) or "(nothing)",
        notes=" ".join(notes),
    )


def render_distiller_system(categories: Sequence[str], masked: bool = False) -> str:
    return (DISTILLER_MASKED_SYSTEM if masked else DISTILLER_SYSTEM).format(categories=", ".join(categories))


def render_distiller_user(
    question: str,
    golds: Sequence[str],
    answer: str | None,
    searches: Sequence[str],
    skills: Sequence[SkillText | tuple],
    evidence: Sequence[tuple[str, str]] = (),
    success_rate: float | None = None,
) -> str:
    """One failure for the distiller; ``skills`` are the retrieved skills that did not help, ``evidence``
    the (title, text) of documents the failing rollout retrieved (already cut to length), ``success_rate``
    the share of its group's rollouts that answered right."""
    shown = "\n".join(render_skill(i, s) for i, s in enumerate(skills, 1)) or DISTILLER_NO_SKILLS
    docs = "\n".join(
        f"[{i}] {escape(' '.join(title.split()))}: {escape(' '.join(text.split()))}"
        for i, (title, text) in enumerate(evidence, 1)
    )
    return DISTILLER_USER.format(
        question=escape(question),
        golds="; ".join(escape(g) for g in golds) or "?",
        answer=escape(answer) if answer else DISTILLER_NO_ANSWER,
        group=DISTILLER_GROUP.format(solved=success_rate) if success_rate is not None else "",
        searches="\n".join(f"- {escape(q)}" for q in searches) or "- (none)",
        evidence=docs or DISTILLER_NO_EVIDENCE,
        skills=shown,
    )
