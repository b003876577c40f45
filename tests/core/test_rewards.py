"""Reward tables: each row says which case it covers."""

from types import SimpleNamespace

import pytest

from sesa_graph.rewards import (
    DEFAULT_LAMBDA,
    FORMAT_PENALTY,
    frontier_reward,
    intermediate,
    one_minus_p,
    proposer_reward,
    solver_reward,
    success_rate,
)


@pytest.mark.parametrize(
    ("verdict", "expected"),
    [
        (SimpleNamespace(score=1.0), 1.0),  # judged correct
        (SimpleNamespace(score=0.0), 0.0),  # judged wrong
        (None, 0.0),  # nothing was judged (no answer)
    ],
)
def test_solver_reward(verdict, expected):
    assert solver_reward(verdict) == expected


@pytest.mark.parametrize(
    ("p", "kwargs", "expected"),
    [
        (0.5, {}, 1.0),  # peak of the frontier
        (0.2, {}, 0.64),  # 1 of G=5 solved: the least rewarded frontier question, still > 0
        (0.8, {}, 0.64),  # 4 of G=5: symmetric with 0.2
        (0.0, {}, -DEFAULT_LAMBDA),  # impossible question
        (1.0, {}, -DEFAULT_LAMBDA),  # trivial question
        (1.0, {"lam": 2.0}, -2.0),  # custom lambda
        (0.0, {"lam": 0.0}, 0.0),  # lambda 0: degenerate questions are merely unrewarded
        (0.5, {"low": 0.1}, 4 * 0.6 * 0.5),  # shifted lower bound
        (0.9, {"high": 0.8}, 4 * 0.9 * -0.1),  # above `high`: negative even on the frontier
    ],
)
def test_frontier_reward(p, kwargs, expected):
    assert frontier_reward(p, **kwargs) == pytest.approx(expected)


def test_default_lambda_orders_the_cases():
    # invalid < trivial/impossible < every frontier question, at any group size
    frontier_min = min(frontier_reward(k / g) for g in range(2, 17) for k in range(1, g))
    assert FORMAT_PENALTY < frontier_reward(0.0) == frontier_reward(1.0) < 0 < frontier_min


@pytest.mark.parametrize(
    ("p", "expected"),
    [
        (0.0, 1.0),  # solver always fails: best for the adversarial baseline
        (0.25, 0.75),  # partial success
        (1.0, 0.0),  # trivial question
    ],
)
def test_one_minus_p(p, expected):
    assert one_minus_p(p) == expected


@pytest.mark.parametrize(
    ("p", "expected"),
    [
        (0.0, 0.0),  # impossible: not intermediate
        (0.2, 1.0),  # frontier
        (0.8, 1.0),  # frontier, no graded peak
        (1.0, 0.0),  # trivial: not intermediate
    ],
)
def test_intermediate(p, expected):
    assert intermediate(p) == expected


@pytest.mark.parametrize(
    ("p", "kind", "kwargs", "expected"),
    [
        (0.4, "frontier", {}, 0.96),  # default kind
        (1.0, "frontier", {"lam": 1.0}, -1.0),  # options reach frontier_reward
        (0.4, "one_minus_p", {}, 0.6),  # adversarial baseline
        (0.4, "intermediate", {}, 1.0),  # binary frontier
        (None, "frontier", {}, FORMAT_PENALTY),  # invalid proposal never reached the solver
        (None, "intermediate", {"format_penalty": -2.0}, -2.0),  # custom format penalty, any kind
    ],
)
def test_proposer_reward(p, kind, kwargs, expected):
    assert proposer_reward(p, kind, **kwargs) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: proposer_reward(0.5, "bogus"), "unknown proposer reward kind"),  # config typo
        (lambda: frontier_reward(1.5), r"\[0, 1\]"),  # not a rate
        (lambda: frontier_reward(0.5, lam=-1.0), "lam"),  # a negative penalty would reward degeneracy
        (lambda: success_rate([]), "empty group"),  # no solver samples
    ],
)
def test_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        ([1.0, 0.0, 0.0, 1.0, 0.0], 0.4),  # 2 of 5
        ([0.0] * 5, 0.0),  # none solved
        ([1.0] * 5, 1.0),  # all solved
    ],
)
def test_success_rate(scores, expected):
    assert success_rate(scores) == pytest.approx(expected)
