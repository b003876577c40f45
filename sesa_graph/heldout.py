"""The held-out split of the corpus's articles: targets the trainer never draws, kept for the probe set.

An article is held out when a salted SHA-256 of its title falls in the first ``HELDOUT_PER_MILLE`` of
1000 buckets (about 10%). The split depends on the title alone, not on the corpus file or its order, so
adding or removing articles never moves another article across the line. The salt is the split's
version: changing it (or the share) is a new split, and every probe set, warm model and run made under
the old one must be rebuilt, which is why it is named in what they record.

Who honours it: ``sesa_graph.targets.build_embedded_pool`` (the self-play target pool),
``training.warmup.corpus.load_articles`` (every article the warm-up builds an example from) and the
probe generator ``sesa_eval.probe`` (which uses held-out articles only). ``sesa_eval.datasets``'s hygiene
check verifies all three for the probe questions it evaluates.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

SPLIT_VERSION = "heldout-v1"
HELDOUT_PER_MILLE = 100


@lru_cache(maxsize=65536)
def is_held_out(title: str) -> bool:
    """Whether the article titled ``title`` is in the held-out split (exact title, no normalization:
    the embedded corpus's doc id is its title)."""
    digest = hashlib.sha256(f"{SPLIT_VERSION}\0{title}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 1000 < HELDOUT_PER_MILLE
