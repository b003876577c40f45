"""Cut a completion at its first stop string, consistently in text and token ids.

Both clients use this: vLLM trims stop strings from the text but not from ``token_ids``, and the local
policy generates a whole micro-batch past a row's stop. The cut keeps the token that completes the stop
string, so the returned text is always ``decode(token_ids)`` and ends with the stop string.
"""

from __future__ import annotations

from typing import Any


def first_stop(text: str, stops: tuple[str, ...]) -> tuple[int, str] | None:
    """End offset and value of the earliest-ending stop string in ``text``."""
    best: tuple[int, str] | None = None
    for s in stops:
        i = text.find(s)
        if i >= 0 and (best is None or i + len(s) < best[0]):
            best = (i + len(s), s)
    return best


def cut_at_stop(tokenizer: Any, token_ids: list[int], stops: tuple[str, ...]) -> tuple[int, str | None]:
    """Number of tokens to keep and the stop string that ended the completion (None if none did)."""
    if not stops or not token_ids:
        return len(token_ids), None
    hit = first_stop(tokenizer.decode(token_ids, skip_special_tokens=False), stops)
    if hit is None:
        return len(token_ids), None
    # the smallest prefix whose decoding contains a stop string; presence is monotonic in the length
    lo, hi = 1, len(token_ids)
    while lo < hi:
        mid = (lo + hi) // 2
        if first_stop(tokenizer.decode(token_ids[:mid], skip_special_tokens=False), stops):
            hi = mid
        else:
            lo = mid + 1
    found = first_stop(tokenizer.decode(token_ids[:lo], skip_special_tokens=False), stops)
    return lo, found[1] if found else hit[1]
