"""train.park_optimizer: a trainer's AdamW state written to disk and freed while it waits, and read back so
exactly that the next optimizer step is the one it would have taken without the round trip."""

from __future__ import annotations

import pytest
import torch

from training.optimizer_park import ParkedOptimizer


def _model_and_optimizer(seed: int = 0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


def _step(model, opt, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    x, y = torch.randn(4, 8, generator=g), torch.randn(4, 1, generator=g)
    opt.zero_grad(set_to_none=True)
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()


def test_parked_state_comes_back_bit_for_bit(tmp_path):
    kept_model, kept_opt = _model_and_optimizer()
    parked_model, parked_opt = _model_and_optimizer()
    parking = ParkedOptimizer(tmp_path / "sync" / "optimizer-solver-0.pt")
    assert parking.park(parked_opt) == 0  # AdamW has no state before its first step: nothing to write
    parking.restore(parked_opt)
    for step in range(3):
        _step(kept_model, kept_opt, step)
        _step(parked_model, parked_opt, step)
        size = parking.park(parked_opt)
        assert size == sum(2 * p.numel() * 4 + 4 for p in parked_model.parameters())  # two moments, a step
        assert not parked_opt.state, "parked state must leave memory"
        assert parking.path.exists()
        if step == 1:
            parking.restore(parked_opt)  # also by hand; the next step's pre-hook then has nothing to do
            assert not parking.path.exists()
    # the other parked states come back in the optimizer step's pre-hook, the last one here
    _step(kept_model, kept_opt, 9)
    _step(parked_model, parked_opt, 9)
    assert not parking.path.exists() and len(parked_opt.state) == len(list(parked_model.parameters()))
    for a, b in zip(kept_model.parameters(), parked_model.parameters(), strict=True):
        assert torch.equal(a, b)


@pytest.mark.slow
def test_a_trainer_job_that_parks_its_optimizer_trains_exactly_as_one_that_does_not(tmp_path):
    """Two real single-rank solver trainer jobs (the launcher, fp32 masters, bf16 compute), three steps each on
    the same committed rollouts: the one that parks AdamW's moments between steps ends with the same weights,
    bit for bit, as the one that keeps them, and says what it parked."""
    from tests.training.trainer_harness import (
        commit_step,
        coordinator,
        finish,
        make_run,
        start_job,
        tiny_policy,
        wait_until,
        weights,
    )

    model = tiny_policy(tmp_path / "policy")
    runs = {
        parked: make_run(tmp_path, name, model, steps=3, park_optimizer=parked)
        for parked, name in ((True, "parked"), (False, "kept"))
    }
    coords = {k: coordinator(run) for k, run in runs.items()}
    jobs = {k: start_job(run, "solver", coords[k]) for k, run in runs.items()}
    try:
        for step in range(3):
            for k, run in runs.items():
                wait_until(lambda k=k, s=step: coords[k].ready("solver", s), 300, f"step {step}'s publish")
                commit_step(run, step, "solver", model, coords[k], seed=step)
        for k, run in runs.items():
            finish(jobs[k], run, "solver")
    finally:
        for job in jobs.values():
            if job.poll() is None:
                job.kill()
        for coord in coords.values():
            coord.close()
    log = (runs[True] / "logs" / "solver-trainer.log").read_text()
    assert log.count("optimizer state parked") == 2 and log.count("optimizer state restored") == 2, log[
        -3000:
    ]
    assert "optimizer state parked" not in (runs[False] / "logs" / "solver-trainer.log").read_text()
    assert not list((runs[True] / "sync").glob("optimizer-*.pt"))  # read back and removed
    a, b = (weights(run / "policies" / "solver") for run in runs.values())
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
