"""The local policy's batch window, without a model: it stays open while requests keep arriving."""

import asyncio

from sesa_graph.policy.local import LocalPolicy


def _policy(wait_s: float, max_wait_s: float, max_batch: int = 16) -> LocalPolicy:
    p = object.__new__(LocalPolicy)  # only the window's settings: _gather_batch touches nothing else
    p.batch_wait_s, p.batch_max_wait_s, p.max_batch_size = wait_s, max_wait_s, max_batch
    return p


async def _arrivals(queue: list, n: int, gap_s: float) -> None:
    for i in range(n):
        await asyncio.sleep(gap_s)
        queue.append(i)


async def test_staggered_requests_join_one_batch():
    queue = ["first"]
    loop = asyncio.get_running_loop()
    feeder = loop.create_task(_arrivals(queue, 6, 0.01))  # each within the 50 ms quiet window of the last
    await _policy(0.05, 5.0)._gather_batch(queue)
    assert len(queue) == 7
    await feeder


async def test_the_window_closes_when_requests_stop_or_the_cap_is_reached():
    loop = asyncio.get_running_loop()
    queue = ["first"]
    feeder = loop.create_task(_arrivals(queue, 400, 0.005))  # never quiet for 50 ms
    await _policy(0.05, 0.2)._gather_batch(queue)
    assert 1 < len(queue) < 200  # closed by the 0.2 s cap long before the 2 s of arrivals end
    feeder.cancel()

    full = list(range(16))
    late = loop.create_task(_arrivals(full, 1, 0))
    await _policy(0.05, 5.0, max_batch=16)._gather_batch(full)
    assert len(full) == 16  # a full batch starts at once
    await late
