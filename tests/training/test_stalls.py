"""Stalls are bounded (issue 44, item 4): a trainer that is stopped (SIGSTOP), not killed, holds its socket open
and answers nothing; its heartbeat stops, and the orchestrator's side names it within cluster.node_timeout_s."""

import os
import signal
import time

import pytest
import yaml

from sesa_graph.fsutil import dump_yaml


@pytest.mark.slow
def test_a_stopped_trainer_is_named_within_the_node_timeout(tmp_path):
    from tests.training.trainer_harness import (
        coordinator,
        make_run,
        start_job,
        tiny_policy,
        wait_until,
    )

    model = tiny_policy(tmp_path / "policy")
    run = make_run(tmp_path, "stall", model)
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    cfg.setdefault("cluster", {}).update(heartbeat_s=0.5, node_timeout_s=5)
    (run / "config.yaml").write_text(dump_yaml(cfg))
    coord = coordinator(run)
    job = start_job(run, "solver", coord)
    stopped = False
    try:
        wait_until(lambda: coord.ready("solver", 0), 300, "step 0's publish")
        assert coord.trainer_trouble() is None
        os.killpg(job.pid, signal.SIGSTOP)  # the launcher and its rank: the whole job hangs
        stopped = True
        t0 = time.monotonic()
        while (trouble := coord.trainer_trouble()) is None and time.monotonic() - t0 < 30:
            time.sleep(0.2)
        named_after = time.monotonic() - t0
    finally:
        if stopped:
            os.killpg(job.pid, signal.SIGCONT)
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(30)
        coord.close()
    assert trouble is not None and "the solver trainer job" in trouble and "no heartbeat" in trouble, trouble
    assert 4 <= named_after < 10, named_after  # the last beat seen came up to one poll before the stop
