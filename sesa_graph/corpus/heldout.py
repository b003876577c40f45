"""The held-out split of the corpus's articles: targets the trainer never draws, kept for the probe set.

The split (version ``SPLIT_VERSION``) is a frozen list of embedded-corpus titles,
``sesa_graph/data/<version>.txt``, made by :func:`compute_split` and checked against it by the tests:

- every article whose salted SHA-256 of the title falls in the first ``HASH_PER_MILLE`` of 1000 buckets
  (about 8%; depends on the title alone);
- plus small clusters, so that multi-hop questions can chain held-out articles: a seed article
  (``SEED_PER_MILLE`` buckets of a second salt), the articles its opening names, and the articles
  their openings name. Hubs named by more than ``HUB_LINKS`` openings ("United States", "Europe") are
  never pulled in by a cluster: they are too central to take from training.

"The opening names" means: a whole capitalized span in the first ``OPENING_CHARS`` characters (the cut a
search result is shown at) is exactly the title of another article, one no other title shares a name with.

About 12% of the embedded corpus is held out (1,244 of 10,033 articles). Changing a salt, a share or
the rule is a new version: every probe set, warm model and run made under the old one must be rebuilt.

Who honours it: ``sesa_graph.corpus.targets.build_embedded_pool`` (the self-play target pool),
``sesa_graph.corpus.articles.load_articles`` (every article the warm-up builds an example from) and the
probe generator ``sesa_eval.probe`` (held-out articles only); ``sesa_eval.datasets``'s hygiene check
verifies all three for the probe questions it evaluates. A title not in the list (another corpus) is
not held out.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

SPLIT_VERSION = "heldout-v1"
HASH_PER_MILLE = 80
SEED_PER_MILLE = 25
HUB_LINKS = 30
OPENING_CHARS = 400

SPLIT_FILE = Path(__file__).parents[1] / "data" / f"{SPLIT_VERSION}.txt"

_PAREN_TAIL = re.compile(r"\s*\([^()]*\)$")
# a run of capitalized words, with the small words names carry ("Bay of Bengal", "Leonardo da Vinci")
_CAPSPAN = re.compile(r"[A-Z][\w'’.-]*(?:(?: (?:of|the|de|da|von|van|del|and|al|el|bin))* [A-Z][\w'’.-]*)*")


def _bucket(salt: str, title: str) -> int:
    digest = hashlib.sha256(f"{SPLIT_VERSION}:{salt}\0{title}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 1000


def article_name(title: str) -> str:
    """The title without a trailing disambiguation: ``Shock (circulatory)`` -> ``Shock``."""
    return _PAREN_TAIL.sub("", title).strip() or title


def name_index(titles: Iterable[str]) -> dict[str, str]:
    """Name -> title for the articles a plain mention can stand for: titles without a disambiguation,
    longer than three letters, whose name no other title shares."""
    seen: dict[str, list[str]] = {}
    for t in titles:
        seen.setdefault(article_name(t), []).append(t)
    return {n: ts[0] for n, ts in seen.items() if len(ts) == 1 and ts[0] == n and len(n) > 3}


def opening_names(title: str, text: str, index: dict[str, str]) -> list[str]:
    """Titles of the articles that ``text``'s opening names as a whole capitalized span, in order."""
    out: list[str] = []
    for m in _CAPSPAN.finditer(text[:OPENING_CHARS]):
        span = m.group(0).rstrip(".")
        span = span.removeprefix("The ")
        t = index.get(span)
        if t and t != title and t not in out:
            out.append(t)
    return out


def compute_split(docs: Iterable[tuple[str, str]]) -> list[str]:
    """The held-out titles of a corpus given as (title, text) pairs, sorted (see the module docstring)."""
    texts = dict(docs)
    index = name_index(texts)
    links = {t: opening_names(t, x, index) for t, x in texts.items()}
    named_by: dict[str, int] = {}
    for zs in links.values():
        for z in zs:
            named_by[z] = named_by.get(z, 0) + 1
    held = {t for t in texts if _bucket("hash", t) < HASH_PER_MILLE}
    ring = {t for t in texts if _bucket("seed", t) < SEED_PER_MILLE}
    for _ in range(2):
        ring |= {z for t in ring for z in links[t] if named_by[z] <= HUB_LINKS}
    return sorted(held | ring)


@lru_cache(maxsize=1)
def held_out_titles() -> frozenset[str]:
    """The frozen split."""
    return frozenset(line for line in SPLIT_FILE.read_text(encoding="utf-8").splitlines() if line)


def is_held_out(title: str) -> bool:
    """Whether the article titled ``title`` is in the held-out split (exact title: the embedded corpus's
    doc id is its title)."""
    return title in held_out_titles()


def write_split() -> Path:
    """Write the frozen list from the embedded corpus (``python -m sesa_graph.corpus.heldout``)."""
    from tools.corpus import load_embedded_corpus

    titles = compute_split((d.title, d.text) for d in load_embedded_corpus())
    SPLIT_FILE.parent.mkdir(parents=True, exist_ok=True)
    SPLIT_FILE.write_text("".join(f"{t}\n" for t in titles), encoding="utf-8")
    return SPLIT_FILE


if __name__ == "__main__":
    print(f"{write_split()}: {len(held_out_titles())} held-out titles")
