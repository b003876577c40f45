"""The prefix key/value store: which prefix is reused, what is evicted, and how a batch is laid out."""

import torch

from sesa_graph.policy.kv_cache import Prefix, PrefixKVCache, batch_layout


def _states(ids: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Fake one-layer states whose values are the token ids, so a slice shows which tokens it holds."""
    t = torch.tensor(ids, dtype=torch.float32).view(1, -1, 1)
    return [(t.clone(), -t.clone())]


def test_longest_common_prefix_is_reused_and_one_token_is_left_to_run():
    cache = PrefixKVCache(max_tokens=100)
    cache.store([1, 2, 3, 4, 5], _states([1, 2, 3, 4, 5]))
    cache.store([1, 2, 9], _states([1, 2, 9]))
    hit = cache.lookup([1, 2, 3, 4, 7, 8])
    assert hit.length == 4
    assert hit.layers[0][0].flatten().tolist() == [1, 2, 3, 4]
    assert cache.lookup([1, 2, 3, 4, 5]).length == 4  # the whole prompt is cached: its last token still runs
    assert cache.lookup([7, 7, 7]).length == 0
    assert cache.lookup([1]).length == 0


def test_a_longer_sequence_supersedes_its_prefixes():
    cache = PrefixKVCache(max_tokens=100)
    cache.store([1, 2, 3], _states([1, 2, 3]))
    cache.store([1, 2, 3, 4, 5], _states([1, 2, 3, 4, 5]))
    assert cache.tokens == 5


def test_least_recently_used_entries_go_first_when_over_budget():
    cache = PrefixKVCache(max_tokens=8)
    cache.store([1, 2, 3, 4], _states([1, 2, 3, 4]))
    cache.store([5, 6, 7, 8], _states([5, 6, 7, 8]))
    cache.lookup([1, 2, 3, 9])  # touch the first entry
    cache.store([9, 9, 9], _states([9, 9, 9]))
    assert cache.tokens <= 8
    assert cache.lookup([1, 2, 3, 0]).length == 3
    assert cache.lookup([5, 6, 7, 0]).length == 0
    cache.clear()
    assert cache.tokens == 0 and cache.lookup([1, 2, 3, 0]).length == 0


def test_batch_layout_right_aligns_cached_and_new_tokens():
    prompts = [[1, 2, 3, 4, 5], [6, 7, 8]]
    ids, mask, c = batch_layout(prompts, [Prefix(3, None), Prefix(0, None)], pad_id=0)
    assert c == 3
    assert ids.tolist() == [[1, 2, 3, 0, 4, 5], [0, 0, 0, 6, 7, 8]]
    assert mask.tolist() == [[1, 1, 1, 0, 1, 1], [0, 0, 0, 1, 1, 1]]
    positions = mask.cumsum(-1) - 1  # what generate derives: every token keeps its position
    assert positions[0][mask[0].bool()].tolist() == [0, 1, 2, 3, 4]
