"""A turn cut by max_tokens_per_turn is recorded as such (the step's `turns_cut_by_turn_cap`); one cut by the
rollout's remaining max_total_tokens, or one that stopped, is not."""

import asyncio

from sesa_graph.config import SolverConfig
from sesa_graph.policy import GenerationResult
from sesa_graph.rollout.loop import RolloutContext, generate_turn, initial_state, solver_spec, turn_cap_cuts


class Scripted:
    """Returns as many tokens as the request allows (finish 'length'), or a closed answer."""

    def __init__(self, answer: bool = False):
        self.answer = answer

    def encode_text(self, text):
        return [1] * len(text.split())

    async def generate(self, requests):
        (r,) = requests
        if self.answer:
            return [GenerationResult("<answer>x</answer>", [5, 6], [0.0, 0.0], [], "stop")]
        n = r.sampling.max_tokens
        return [GenerationResult("<think>still going", [3] * n, [0.0] * n, [], "length")]


def _turn(completed: int, answer: bool = False) -> dict:
    spec = solver_spec(SolverConfig(max_tokens_per_turn=16, max_total_tokens=64))
    ctx = RolloutContext(policy=Scripted(answer), search=None, spec=spec)
    state = initial_state([1, 2])
    state.update(completion_ids=[0] * completed, env_mask=[0] * completed, logprobs=[0.0] * completed)
    update, _ = asyncio.run(generate_turn(state, ctx))
    return update["turns"][-1]


def test_the_per_turn_cap_cut_is_recorded_and_the_total_budgets_is_not():
    assert _turn(completed=0)["turn_cap_cut"] is True  # 64 tokens of room: the 16-token turn cap cut it
    assert _turn(completed=56)["turn_cap_cut"] is False  # 8 tokens of room left: the total cap cut it
    assert _turn(completed=0, answer=True)["turn_cap_cut"] is False
    assert turn_cap_cuts([[_turn(0), _turn(56)], [_turn(0)]]) == 2


def test_a_steps_count_includes_the_reused_groups_rollouts():
    from collections import Counter
    from types import SimpleNamespace

    from sesa_graph.rollout.judge import Judge
    from training.step import step_metrics

    def traj(cuts: int) -> SimpleNamespace:
        turns = [{"turn_cap_cut": True}] * cuts
        return SimpleNamespace(turns=turns, reward=0.0, verdict_json=None, n_searches=0, hops=1, valid=False)

    finals = [
        {"proposal": {"valid": False}},  # the step's own proposal
        {"proposal": {"valid": True, "reused": True}, "success_rate": 0.0},  # a reused group
    ]
    # one metrics line over the step's own items and the reused ones: the reused group's cut counts
    m = step_metrics(0, finals, [traj(3)], [traj(1)], Counter(), Counter(), Judge(None))
    assert m["turns_cut_by_turn_cap"] == {"proposer": 3, "solver": 1}
