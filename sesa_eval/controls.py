"""The controls that bracket the agent: a closed-book floor and an open-book ceiling.

They run as eval modes beside the bank modes (same questions, same seeds, same record cache, paired
against mode ``off``), through the solve graph's own ``agent`` and ``search`` nodes; only the start differs:

- ``closed``: no search. The prompt is the solver's, then the environment's final-turn notice
  (``No searches left ...``) and, when the solver forces its final action, the opened ``<answer>`` tag,
  exactly as on a normal rollout's last turn. The rollout starts on its last turn (``final_turn``), so
  a search it writes ends it (``max_turns``) without ever reaching the search node: it cannot search.
- ``oracle``: the question's answer-bearing document (:mod:`sesa_eval.answerability`) is given in the
  first observation as if a search for the question had returned it (``<search>question</search>`` then
  the ``<information>`` block, injected with ``env_mask`` 0); then the rollout proceeds normally, with
  its whole turn budget. A question without an answer-bearing document is not run in this mode: the
  report counts it.

The floor tells what the model knows without the corpus; the ceiling what it makes of the answer when
it is put in front of it. An agent's score between them is what search (and skills) add.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from graphs.contexts import recursion_limit
from graphs.solve import build_solve_graph
from sesa_graph import prompts, protocol
from sesa_graph.rollout.loop import RolloutContext, initial_state
from sesa_graph.state import SolveState
from tools.corpus import Doc
from tools.render import render_docs

CONTROL_MODES: tuple[str, ...] = ("closed", "oracle")


class ControlState(SolveState, total=False):
    control: str
    """``closed`` or ``oracle``."""
    oracle_doc: dict[str, Any] | None
    """The answer-bearing document (id, title, text) for ``oracle``."""


async def start(state: ControlState, runtime: Runtime[RolloutContext]) -> dict[str, Any]:
    ctx, question = runtime.context, state["question"]
    st = initial_state(
        ctx.policy.encode_messages(prompts.solver_messages(question, None, ctx.spec.max_turns))
    )
    if state["control"] == "closed":
        forced = protocol.open_tag(ctx.spec.terminal) if ctx.spec.force_final_action else ""
        text = protocol.render_notice(ctx.spec.final_notice) + forced
        st["final_turn"] = True
    elif state["control"] == "oracle":
        d = state.get("oracle_doc")
        if not d:
            raise ValueError("mode oracle needs the question's answer-bearing document")
        doc = Doc(str(d["id"]), d["title"], d["text"][: ctx.spec.doc_chars])
        text = f"<search>{question}</search>" + protocol.render_information(render_docs([doc]))
    else:
        raise ValueError(f"unknown control {state['control']!r}; expected one of {CONTROL_MODES}")
    ids = ctx.policy.encode_text(text)
    return {**st, "completion_ids": ids, "env_mask": [0] * len(ids), "logprobs": [0.0] * len(ids)}


control_graph = build_solve_graph(start, ControlState, RolloutContext, ControlState)


async def solve_control(
    question: str, ctx: RolloutContext, control: str, oracle_doc: dict[str, Any] | None = None
) -> SolveState:
    """One rollout of ``question`` under a control (``closed`` or ``oracle``); the final state."""
    state = await control_graph.ainvoke(
        {"question": question, "control": control, "oracle_doc": oracle_doc},
        context=ctx,
        config={"recursion_limit": recursion_limit(ctx.spec.max_turns)},
    )
    turns = state.get("turns") or []
    if (
        control == "closed"
        and state.get("status") == "max_tokens"
        and turns
        and turns[-1]["kind"] == "search"
    ):
        # the loop names a search on a last turn taken before the turn limit 'max_tokens'; closed-book it
        # is a search with none left, which is what 'max_turns' means
        state["status"] = "max_turns"
    return state
