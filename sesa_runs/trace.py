"""One rollout, turn by turn, for people: rich HTML in Jupyter, coloured or plain text in a terminal.

A :class:`Trace` shows the question and its gold answer(s), the skills that were in the prompt (with
their counters), every assistant turn (its reasoning, the search query and the documents that came
back -- documents that contain a gold answer are marked and the answer highlighted --, an invalid turn's
raw text and reason), the final answer or proposed question, and the judge's verdict. Get one from
:meth:`sesa_runs.load.Run.trace` or :meth:`sesa_runs.load.Eval.trace`, or ``sesa trace RUN --rollout ID``::

    run.trace("solver/3/3-1/0")          # in Jupyter: rendered as HTML
    print(run.trace("solver/3/3-1/0"))   # plain text
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sesa_graph import protocol, statuses
from sesa_graph.scoring import contains_answer
from tools.terminal import shown

FAILURE_TEXT = {k: statuses.describe(k) for k in statuses.KIND_ORDER}
"""Outcome line per failure kind, from the one table :data:`sesa_graph.statuses.OUTCOMES`."""


def _clean(v: Any) -> Any:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


def _list(v: Any) -> list:
    v = _clean(v)
    return [] if v is None else ([v] if isinstance(v, str) else list(v))


def _loads(v: Any, default: Any) -> Any:
    if isinstance(v, (list, dict)):
        return v
    try:
        return json.loads(v) if isinstance(v, str) and v else default
    except ValueError:
        return default


def gold_spans(text: str, golds: list[str]) -> list[tuple[str, bool]]:
    """``text`` cut into (piece, is_gold) where a gold answer occurs (case-insensitive, whole words)."""
    pats = [re.escape(g.strip()) for g in golds if g and g.strip()]
    if not text or not pats:
        return [(text or "", False)]
    rx = re.compile(r"(?<!\w)(" + "|".join(sorted(pats, key=len, reverse=True)) + r")(?!\w)", re.IGNORECASE)
    out, pos = [], 0
    for m in rx.finditer(text):
        if m.start() > pos:
            out.append((text[pos : m.start()], False))
        out.append((m.group(0), True))
        pos = m.end()
    if pos < len(text):
        out.append((text[pos:], False))
    return out or [("", False)]


def _counters(s: dict[str, Any]) -> str:
    c = f"helpful {s.get('helpful', 0)} / hurt {s.get('hurt', 0)} of {s.get('retrieved', 0)} retrievals"
    return c + (" (no longer in the bank)" if s.get("evicted") else " (counters now)")


@dataclass
class Trace:
    """One rollout for reading. ``turns``: ``{text, kind, content, think, reason, finish}``; ``searches``:
    ``{query, docs}`` in the order of the search turns (``docs`` None when not recorded); ``skills``: the
    skill records that were in the prompt (``{id}`` only when the bank no longer has them)."""

    id: str
    role: str
    question: str
    golds: list[str]
    status: str
    final: str | None
    turns: list[dict[str, Any]]
    searches: list[dict[str, Any]] | None
    skills: list[dict[str, Any]] = field(default_factory=list)
    verdict: dict[str, Any] | None = None
    reward: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    source: str = ""

    @classmethod
    def from_row(
        cls, row: dict[str, Any], skills: list[dict[str, Any]] | None = None, source: str = ""
    ) -> Trace:
        """From a row of a :mod:`sesa_runs.load` rollout frame."""
        turns = []
        allowed = protocol.PROPOSER_ACTIONS if row.get("role") == "proposer" else protocol.SOLVER_ACTIONS
        for t in _loads(row.get("turns_json"), []):
            if "kind" not in t:  # an eval record keeps only the text: parse it as the loop did
                p = protocol.parse_turn(t.get("text", ""), allowed=allowed)
                t = {
                    "text": t.get("text", ""),
                    "kind": p.kind,
                    "content": p.content,
                    "think": p.think,
                    "reason": p.reason,
                    "finish": None,
                }
            turns.append(t)
        searches = _loads(row.get("searches_json"), None)
        verdict = None
        if _clean(row.get("judge_method")) is not None:
            verdict = {
                "correct": bool(_clean(row.get("correct"))),
                "score": _clean(row.get("score")),
                "em": _clean(row.get("em")),
                "f1": _clean(row.get("f1")),
                "method": _clean(row.get("judge_method")),
                "raw": _clean(row.get("judge_raw")),
            }
        if _clean(row.get("skill_bank_version")) is not None:
            row = {**row, "skill_bank_version": int(row["skill_bank_version"])}
        meta = {
            k: _clean(row.get(k))
            for k in (
                "step",
                "dataset",
                "mode",
                "seed",
                "hops",
                "target",
                "valid",
                "invalid_reason",
                "success_rate",
                "failure",
                "error",
                "reused",
                "policy_version",
                "skill_bank_version",
                "gold_retrieved",
            )
        }
        return cls(
            id=str(row.get("id")),
            role=str(row.get("role") or "solver"),
            question=row.get("question") or "",
            golds=[str(g) for g in _list(row.get("golds"))],
            status=str(row.get("status") or "?"),
            final=_clean(row.get("final")),
            turns=turns,
            searches=searches,
            skills=list(skills or []),
            verdict=verdict if row.get("role") != "proposer" else None,
            reward=_clean(row.get("reward")),
            meta=meta,
            source=source,
        )

    @classmethod
    def from_state(cls, state: dict[str, Any], role: str = "solver", golds: list[str] | None = None) -> Trace:
        """From a finished rollout state of the solve or propose graph (``sesa rollout``, ``sesa propose``)."""
        proposer = role == "proposer"
        meta = {k: state.get(k) for k in ("hops", "target", "valid", "invalid_reason", "error")}
        return cls(
            id=f"{role} rollout",
            role=role,
            question=str(state.get("question") or ""),
            golds=[
                str(g) for g in (golds or ([state["target"]] if proposer and state.get("target") else []))
            ],
            status=str(state.get("status") or "?"),
            final=state.get("final"),
            turns=list(state.get("turns") or []),
            searches=list(state.get("searches") or []),
            meta=meta,
        )

    # ---- the structure both renderers walk ---------------------------------------------------------------
    def _steps(self) -> list[tuple[dict[str, Any], dict[str, Any] | None, bool]]:
        """(turn, its search record or None, search-record-missing) for each turn."""
        out, i = [], 0
        searches = self.searches or []
        for t in self.turns:
            s = None
            if t.get("kind") == "search":
                s = searches[i] if i < len(searches) else None
                i += 1
            out.append((t, s, t.get("kind") == "search" and s is None))
        return out

    def _headline(self) -> str:
        m = self.meta
        bits = [self.role]
        if m.get("step") is not None:
            bits.append(f"step {m['step']}")
        if m.get("dataset") and m.get("dataset") != "selfplay":
            bits.append(f"dataset {m['dataset']}")
        if m.get("mode"):
            bits.append(f"bank mode {m['mode']}")
        if m.get("hops") is not None:
            bits.append(f"hops {m.get('hops')}")
        bits.append(f"status {self.status}")
        if self.reward is not None:
            bits.append(f"reward {self.reward:.2f}")
        if m.get("success_rate") is not None:
            bits.append(f"group success {m['success_rate']:.2f}")
        if m.get("reused"):
            bits.append("reused question")
        return " · ".join(bits)

    def _outcome(self) -> str:
        if self.role == "proposer":
            if self.meta.get("valid"):
                return "valid question"
            return f"invalid question ({self.meta.get('invalid_reason') or 'unknown reason'})"
        f = self.meta.get("failure")
        return FAILURE_TEXT.get(f, f or "")

    def _verdict_text(self) -> str:
        v = self.verdict
        if not v:
            return ""
        nums = ", ".join(
            f"{k} {v[k]:.2f}" for k in ("score", "em", "f1") if isinstance(v.get(k), (int, float))
        )
        return f"{'correct' if v['correct'] else 'wrong'} (judge: {v.get('method') or '?'}{', ' + nums if nums else ''})"

    @staticmethod
    def _reasoning(t: dict[str, Any]) -> str:
        if t.get("think"):
            return t["think"]
        if t.get("kind") == "invalid":
            return ""
        return (t.get("text") or "").split("<", 1)[0].strip()

    # ---- text -----------------------------------------------------------------------------------------------
    def _segments(self) -> list[tuple[str, str]]:
        """(text, rich style) pieces; joined they are the plain-text rendering."""
        out: list[tuple[str, str]] = []
        # every piece through the terminal sanitiser: an ESC sequence in a document or a model turn would
        # otherwise recolour, move or clear the reader's terminal, and a 100k-character document flood it
        add = lambda text, style="": out.append((shown(text), style))
        add(f"══ {self.id} ══", "bold")
        add(f"  ({self.source})\n" if self.source else "\n", "dim")
        add(self._headline() + "\n", "cyan")
        if self.role == "proposer":
            add("target: ", "bold")
            add(f"{self.meta.get('target') or (self.golds[0] if self.golds else '')}\n", "green")
        else:
            add("question: ", "bold")
            add(self.question + "\n")
            if self.golds:
                add("gold: ", "bold")
                add(" | ".join(self.golds) + "\n", "green")
        if self.skills:
            v = self.meta.get("skill_bank_version")
            add(f"skills in the prompt{f' (bank v{v})' if v is not None else ''}:\n", "bold magenta")
            for s in self.skills:
                add(f"  - {s['id']}", "magenta")
                if s.get("description"):
                    add(f" [{s.get('category', '')}] {s['description']} (when: {s.get('trigger', '')})")
                    add(f" {_counters(s)}", "dim")
                else:
                    add(" (not in the bank files)", "dim")
                add("\n")
        for n, (t, s, missing) in enumerate(self._steps(), 1):
            self._text_turn(add, n, t, s, missing)
        if self.role == "proposer":
            add("proposed question: ", "bold")
            add(f"{self.final or '(none)'}\n")
        else:
            add("final answer: ", "bold")
            add(f"{self.final if self.final is not None else '(none)'}\n")
            if self.verdict:
                add("verdict: ", "bold")
                add(self._verdict_text() + "\n", "green" if self.verdict["correct"] else "red")
                if self.verdict.get("raw"):
                    add(f"  judge said: {self.verdict['raw']}\n", "dim")
        if self.meta.get("error"):
            add(f"error: {self.meta['error']}\n", "red")
        if self._outcome():  # (a rollout not judged yet has none)
            add("outcome: ", "bold")
            add(
                self._outcome() + "\n", "green" if self._outcome() in ("correct", "valid question") else "red"
            )
        return out

    def _text_turn(
        self, add: Callable[..., None], n: int, t: dict[str, Any], s: dict[str, Any], missing: bool
    ) -> None:
        """Turn ``n`` as text: its kind, reasoning, and the raw text (invalid), the search and its documents
        with gold answers marked, or what it said."""
        kind = t.get("kind", "?")
        label = f"── turn {n} · {kind}"
        if kind == "invalid":
            label += f" ({t.get('reason') or '?'})"
        if t.get("finish") == "length":
            label += " · cut at the token limit"
        add(label + "\n", "bold yellow" if kind != "invalid" else "bold red")
        if self._reasoning(t):
            add(f"  reasoning: {self._reasoning(t)}\n", "italic")
        if kind == "invalid":
            add(f"  raw: {t.get('text', '')!r}\n", "red")
        elif kind == "search":
            add("  search: ", "bold")
            add(f"{t.get('content', '')}\n", "blue")
            if missing:
                add(
                    "    (no results: the search failed)\n"
                    if self.status in ("search_error", "error")
                    else "    (results not recorded)\n",
                    "dim",
                )
            elif s.get("docs") is None:
                add("    (documents not recorded)\n", "dim")
            else:
                for i, d in enumerate(s["docs"], 1):
                    hit = contains_answer(d.get("title"), self.golds) or contains_answer(
                        d.get("text"), self.golds
                    )
                    score = f"[{d['score']:.2f}] " if isinstance(d.get("score"), (int, float)) else ""
                    add(f"    {i}. {score}{d.get('title', '')}: ", "bold" if hit else "")
                    for piece, gold in gold_spans(d.get("text", ""), self.golds):
                        add(piece, "bold reverse green" if gold else "")
                    add("  ★ gold\n" if hit else "\n", "bold green")
        else:
            add(f"  {kind}: ", "bold")
            add(f"{t.get('content', '')}\n", "green" if kind == "answer" else "")

    def to_text(self) -> str:
        return "".join(t for t, _ in self._segments())

    __str__ = to_text

    def __rich__(self) -> Any:
        from rich.text import Text

        text = Text()
        for piece, style in self._segments():
            text.append(piece, style=style or None)
        return text

    # ---- HTML -----------------------------------------------------------------------------------------------
    def to_html(self) -> str:
        e = html.escape
        ok = self._outcome() in ("correct", "valid question")
        colour = "#1a7f37" if ok else "#cf222e"
        box = "border:1px solid #d0d7de;border-radius:6px;padding:6px 10px;margin:6px 0;"
        outer = (
            "font-family:system-ui,sans-serif;font-size:13px;line-height:1.45;max-width:1000px;"
            f"border-left:4px solid {colour};padding-left:10px"
        )
        h: list[str] = [f'<div style="{outer}">']
        h.append(
            f'<div style="font-weight:600;font-size:14px">{e(self.id)} '
            f'<span style="color:#57606a;font-weight:400">{e(self.source)}</span></div>'
        )
        h.append(f'<div style="color:#0550ae">{e(self._headline())}</div>')
        h.append(f'<div style="color:{colour};font-weight:600">{e(self._outcome())}</div>')
        if self.role == "proposer":
            h.append(
                f'<div><b>target:</b> <span style="color:#1a7f37">{e(str(self.meta.get("target") or ""))}'
                "</span></div>"
            )
        else:
            h.append(
                f'<div style="{box}background:#f6f8fa"><b>question:</b> {e(self.question)}<br>'
                f'<b>gold:</b> <span style="color:#1a7f37">{e(" | ".join(self.golds))}</span></div>'
            )
        if self.skills:
            h.append(self._html_skills(box))
        for n, (t, s, missing) in enumerate(self._steps(), 1):
            h.append(f'<div style="{box}">{self._html_turn(n, t, s, missing)}</div>')
        if self.role == "proposer":
            h.append(f"<div><b>proposed question:</b> {e(self.final or '(none)')}</div>")
        else:
            h.append(
                f"<div><b>final answer:</b> {e(self.final if self.final is not None else '(none)')}</div>"
            )
            if self.verdict:
                h.append(
                    f'<div><b>verdict:</b> <span style="color:{colour}">{e(self._verdict_text())}</span></div>'
                )
                if self.verdict.get("raw"):
                    h.append(
                        f'<details><summary>judge said</summary><pre style="white-space:pre-wrap">'
                        f"{e(str(self.verdict['raw']))}</pre></details>"
                    )
        if self.meta.get("error"):
            h.append(f'<div style="color:#cf222e"><b>error:</b> {e(str(self.meta["error"]))}</div>')
        h.append("</div>")
        return "".join(h)

    _repr_html_ = to_html

    def _html_skills(self, box: str) -> str:
        """The skills the solver's prompt held, each with its trigger, what to avoid, queries and counters."""
        e = html.escape
        v = self.meta.get("skill_bank_version")
        items = []
        for s in self.skills:
            if s.get("description"):
                q = "; ".join(s.get("queries") or [])
                items.append(
                    f"<li><code>{e(s['id'])}</code> <i>{e(s.get('category', ''))}</i>: {e(s['description'])}"
                    f'<br><span style="color:#57606a">when: {e(s.get("trigger", ""))}'
                    + (f" · avoid: {e(s['avoid'])}" if s.get("avoid") else "")
                    + (f" · queries: {e(q)}" if q else "")
                    + f" · {e(_counters(s))}</span></li>"
                )
            else:
                items.append(
                    f'<li><code>{e(s["id"])}</code> <span style="color:#57606a">(not in the bank '
                    "files)</span></li>"
                )
        return (
            f'<div style="{box}background:#fbefff"><b>skills in the prompt'
            f'{f" (bank v{v})" if v is not None else ""}</b><ul style="margin:2px 0">{"".join(items)}'
            "</ul></div>"
        )

    def _html_turn(self, n: int, t: dict[str, Any], s: dict[str, Any], missing: bool) -> str:
        """Turn ``n``: its kind, reasoning, and the raw text (invalid), the search and its documents, or
        what it said."""
        e = html.escape
        kind = t.get("kind", "?")
        bad = kind == "invalid"
        label = f"turn {n} · {kind}" + (f" ({t.get('reason') or '?'})" if bad else "")
        if t.get("finish") == "length":
            label += " · cut at the token limit"
        body = [f'<div style="font-weight:600;color:{"#cf222e" if bad else "#6e4600"}">{e(label)}</div>']
        if self._reasoning(t):
            body.append(
                f'<div style="color:#57606a;font-style:italic;white-space:pre-wrap">'
                f"{e(self._reasoning(t))}</div>"
            )
        if bad:
            body.append(
                f'<pre style="white-space:pre-wrap;margin:2px 0;background:#fff5f5;padding:4px">'
                f"{e(t.get('text', ''))}</pre>"
            )
        elif kind == "search":
            body.append(
                f'<div><b>search:</b> <code style="color:#0550ae">{e(t.get("content", ""))}</code></div>'
            )
            if missing:
                body.append(
                    '<div style="color:#57606a">'
                    + (
                        "no results: the search failed"
                        if self.status in ("search_error", "error")
                        else "results not recorded"
                    )
                    + "</div>"
                )
            elif s.get("docs") is None:
                body.append('<div style="color:#57606a">documents not recorded</div>')
            else:
                body.append(self._html_docs(s["docs"]))
        else:
            body.append(f"<div><b>{e(kind)}:</b> {e(t.get('content', ''))}</div>")
        return "".join(body)

    def _html_docs(self, docs: list[dict[str, Any]]) -> str:
        """The documents a search returned, gold answers marked in their text."""
        e = html.escape
        items = []
        for d in docs:
            hit = contains_answer(d.get("title"), self.golds) or contains_answer(d.get("text"), self.golds)
            text = "".join(
                f'<mark style="background:#aceebb">{e(p)}</mark>' if g else e(p)
                for p, g in gold_spans(d.get("text", ""), self.golds)
            )
            score = (
                f'<span style="color:#57606a">{d["score"]:.2f}</span> '
                if isinstance(d.get("score"), (int, float))
                else ""
            )
            star = ' <b style="color:#1a7f37">★ contains the gold</b>' if hit else ""
            items.append(f"<li>{score}<b>{e(d.get('title', ''))}</b>{star}<br>{text}</li>")
        return f'<ol style="margin:2px 0;padding-left:22px">{"".join(items)}</ol>'
