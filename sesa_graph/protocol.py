"""The tag protocol: the one place that renders and parses ``<think>``, ``<search>``, ``<information>``,
``<answer>`` and ``<question>`` (the rollout format is specified in docs/PROTOCOL.md).

Tags are recognised only in their exact lowercase form without attributes or spaces (``<search>``,
``</search>``). Parsing never raises on model output: a malformed turn is a ``Turn`` of kind
``"invalid"`` whose ``reason`` says what was wrong.

Escaping: text the environment inserts (retrieved documents, skills, questions from a dataset) goes
through ``escape``, which replaces every ``<`` that could start a protocol tag -- in any letter case,
with or without ``/`` or spaces, e.g. ``<Search``, ``</ answer`` -- and every ``<|`` that could spell a
chat-template special token (``<|im_end|>``) by ``‹`` (U+2039, SINGLE LEFT-POINTING ANGLE QUOTATION
MARK). A lookalike keeps the text readable for the policy, byte-level BPE tokenizers encode it like any
other character, and, unlike an HTML entity, nothing downstream ever turns it back into ``<``. Escaping
is idempotent and leaves text without such ``<`` unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Literal

TAGS = ("think", "search", "answer", "information", "question")
ACTIONS = ("search", "answer", "question")
SOLVER_ACTIONS = ("search", "answer")
PROPOSER_ACTIONS = ("search", "question")

# Generation stops right after an action closes, so one policy call is one turn.
SOLVER_STOPS = ("</search>", "</answer>")
PROPOSER_STOPS = ("</search>", "</question>")

ESCAPED_LT = "\u2039"  # ‹

TurnKind = Literal["search", "answer", "question", "invalid"]
InvalidReason = Literal[
    "no_action",  # no action tag at all
    "unclosed_tag",  # an opened think/action tag never closes (often: the token budget ran out)
    "stray_closing_tag",  # a closing tag with no matching opening tag
    "nested_tag",  # a tag inside think or inside an action
    "information_tag",  # the policy wrote <information> itself (only the environment may)
    "multiple_actions",  # a second tag after the action closed
    "empty_content",  # the action's content is blank
    "unexpected_action",  # a well-formed action this role may not take (a solver writing <question>)
]

_TAG_RE = re.compile(r"<(/?)(think|search|answer|information|question)>")
_ESCAPE_RE = re.compile(r"<(?=\s*/?\s*(?:think|search|answer|information|question)\b|\|)", re.IGNORECASE)


@dataclass(frozen=True)
class Turn:
    """What one generation ended with.

    ``content`` is the stripped text of the action (empty when invalid); ``think`` joins the stripped
    ``<think>`` blocks written before the action (empty when there were none); ``reason`` is set exactly
    when ``kind == "invalid"``.
    """

    kind: TurnKind
    content: str = ""
    think: str = ""
    reason: InvalidReason | None = None

    @property
    def valid(self) -> bool:
        return self.kind != "invalid"


def escape(text: str) -> str:
    """Make inserted text unable to open or close a protocol tag or spell a special token.

    >>> escape("see </information> and <|im_end|>")
    'see ‹/information> and ‹|im_end|>'
    """
    return _ESCAPE_RE.sub(ESCAPED_LT, text)


def _render(tag: str, content: str) -> str:
    return f"<{tag}>{escape(content)}</{tag}>"


def render_think(text: str) -> str:
    return _render("think", text)


def render_search(query: str) -> str:
    return _render("search", query)


def render_answer(answer: str) -> str:
    return _render("answer", answer)


def render_question(question: str) -> str:
    return _render("question", question)


def render_information(text: str, notice: str | None = None) -> str:
    """The environment's observation after a search: ``\\n<information>{escape(text)}</information>\\n``.

    ``notice`` is trusted protocol text from ``prompts`` (e.g. ``FINAL_TURN_NOTICE``) appended on its
    own line, unescaped so the policy sees real tag names in it.
    """
    inner = escape(text)
    if notice:
        inner = f"{inner}\n{_check_notice(notice)}" if inner else _check_notice(notice)
    return f"\n<information>{inner}</information>\n"


def open_tag(action: str) -> str:
    """The opening tag of an action, e.g. ``<question>``: injected before a forced last turn."""
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r}; expected one of {ACTIONS}")
    return f"<{action}>"


def render_notice(notice: str) -> str:
    """An observation that is only trusted protocol text, e.g. ``prompts.INVALID_ACTION``."""
    return f"\n<information>{_check_notice(notice)}</information>\n"


def _check_notice(notice: str) -> str:
    # Notices come from our own prompts, so this is a programming error, not a model-output state.
    if "<information>" in notice or "</information>" in notice:
        raise ValueError(f"a notice must not contain information tags: {notice!r}")
    return notice


def _tags(text: str) -> Iterator[tuple[re.Match[str], bool, str]]:
    for m in _TAG_RE.finditer(text):
        yield m, m.group(1) == "/", m.group(2)


def _invalid(reason: InvalidReason, think: list[str]) -> Turn:
    return Turn("invalid", "", "\n\n".join(think), reason)


def parse_turn(text: str, allowed: Collection[str] = ACTIONS) -> Turn:
    """Parse one generation: free text and ``<think>`` blocks, then exactly one action.

    Text outside tags is tolerated (small models add a few words before a tag), and so is tag-free text
    after the action closes (the token that completed a stop string may carry a few more characters).
    Anything else is ``invalid`` with a reason.

    >>> parse_turn("<think>who?</think>\\n<search>Eiffel Tower architect</search>")
    Turn(kind='search', content='Eiffel Tower architect', think='who?', reason=None)
    """
    think: list[str] = []
    opened: tuple[str, int] | None = None  # (tag, end offset of its opening tag)
    action: tuple[str, str] | None = None
    for m, closing, tag in _tags(text):
        if action is not None:
            return _invalid("multiple_actions", think)
        if tag == "information":
            return _invalid("information_tag", think)
        if opened is None:
            if closing:
                return _invalid("stray_closing_tag", think)
            opened = (tag, m.end())
        elif closing and tag == opened[0]:
            inner = text[opened[1] : m.start()].strip()
            if tag == "think":
                think.append(inner)
            else:
                action = (tag, inner)
            opened = None
        else:
            return _invalid("nested_tag", think)
    if opened is not None:
        return _invalid("unclosed_tag", think)
    if action is None:
        return _invalid("no_action", think)
    tag, content = action
    if not content:
        return _invalid("empty_content", think)
    if tag not in allowed:
        return _invalid("unexpected_action", think)
    return Turn(tag, content, "\n\n".join(think))  # type: ignore[arg-type]


def _elements(text: str, name: str) -> list[str]:
    """Stripped, non-blank contents of every ``<name>...</name>`` with no tag inside, outside
    ``<information>`` blocks (environment text is never the policy's answer or question)."""
    found: list[str] = []
    in_information = False
    prev: tuple[bool, str, int] | None = None  # the previous tag outside information: closing, tag, end
    for m, closing, tag in _tags(text):
        if in_information:
            in_information = not (closing and tag == "information")
            prev = None
            continue
        if tag == "information" and not closing:
            in_information = True
            prev = None
            continue
        if closing and tag == name and prev is not None and not prev[0] and prev[1] == name:
            content = text[prev[2] : m.start()].strip()
            if content:
                found.append(content)
        prev = (closing, tag, m.end())
    return found


def final_answer(text: str) -> str | None:
    """The content of the last well-formed ``<answer>...</answer>``, or None.

    Well-formed: no protocol tag between the two, non-blank content, not inside ``<information>``.

    >>> final_answer("<answer>Paris</answer> ... <answer>Lyon</answer><answer></answer>")
    'Lyon'
    """
    found = _elements(text, "answer")
    return found[-1] if found else None


def extract_question(text: str) -> str | None:
    """The content of the last well-formed ``<question>...</question>``, or None."""
    found = _elements(text, "question")
    return found[-1] if found else None


def search_queries(text: str) -> list[str]:
    """Every well-formed ``<search>`` query in a rollout, in order."""
    return _elements(text, "search")
