"""Target pools for self-play: what the proposer is asked to write questions about.

Two sources: SSP's released pool format (JSONL ``{"ground_truth", "search_turns", "sys_question_example"}``;
the file lives on a hub and is only read if you have it) and an embedded pool built from the embedded
corpus -- article titles as targets with hop counts 1..3 -- never from benchmark questions, so evaluation
stays clean, and never a held-out article (``sesa_graph.heldout``), which the probe set keeps for itself. Sampling is a pure function of (seed, step): a resumed run draws the same targets.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path

from sesa_graph.fsutil import read_jsonl
from sesa_graph.heldout import is_held_out
from tools.corpus import load_corpus


@dataclass(frozen=True)
class Target:
    answer: str
    hops: int
    example: str | None = None


def load_ssp_pool(path: str | Path) -> list[Target]:
    """Read SSP's pool JSONL. A bad line raises with file and line number."""
    out = []
    for n, row in enumerate(read_jsonl(Path(path)), 1):
        try:
            gt = row["ground_truth"]
            answer = gt[0] if isinstance(gt, list) else str(gt)
            hops = int(row.get("search_turns") or 1)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise ValueError(f"{path}: row {n}: not an SSP pool row ({exc})") from None
        out.append(Target(answer, max(1, min(hops, 5)), row.get("sys_question_example")))
    if not out:
        raise ValueError(f"{path}: empty target pool")
    return out


_BAD_TITLE = re.compile(r"^(list of|index of|outline of)|\d{3,}|[()]", re.IGNORECASE)


def build_embedded_pool(corpus: str = "embedded", max_hops: int = 3, seed: int = 0) -> list[Target]:
    """Article titles of the corpus as targets (short, answer-like titles only, none held out), hops
    cycling 1..max_hops."""
    docs = load_corpus(corpus)
    titles = sorted(
        {
            d.title
            for d in docs
            if d.title
            and len(d.title.split()) <= 4
            and not _BAD_TITLE.search(d.title)
            and not is_held_out(d.title)
        }
    )
    rng = random.Random(seed)
    rng.shuffle(titles)
    return [Target(t, 1 + i % max_hops) for i, t in enumerate(titles)]


def load_pool(spec: str, max_hops: int = 3, seed: int = 0) -> list[Target]:
    """``"embedded"`` -> :func:`build_embedded_pool`; a path -> :func:`load_ssp_pool`."""
    return build_embedded_pool(max_hops=max_hops, seed=seed) if spec == "embedded" else load_ssp_pool(spec)


def sample_targets(pool: list[Target], n: int, step: int, seed: int = 0) -> list[Target]:
    """``n`` distinct targets for ``step``, the same on every call with the same arguments."""
    if not pool:
        raise ValueError("empty target pool")
    rng = random.Random(f"{seed}:{step}")
    return rng.sample(pool, min(n, len(pool)))


def bootstrap_question(target: str, corpus: str = "embedded") -> str | None:
    """A plain cloze question for ``target`` from its own article in ``corpus`` (see :func:`cloze_question`)."""
    doc = _by_title(corpus).get(target)
    return None if doc is None else cloze_question(target, doc.text)


def cloze_question(target: str, article: str) -> str | None:
    """A plain cloze question for ``target`` from the first sentence of its own article: used only to fill
    the solver batch when no proposal has ever been valid (the first steps of an untrained proposer), and
    recorded as reused. None when the sentence does not name the target or is too short.

    >>> cloze_question("Paris", "Paris is the capital and largest city of France. It has 2 million people.")
    'What is described here: this is the capital and largest city of France.'
    """
    first = re.split(r"(?<=[.!?])\s", article.strip(), maxsplit=1)[0]
    masked = re.sub(re.escape(target), "this", first, flags=re.IGNORECASE)
    if masked == first or len(masked.split()) < 5:
        return None
    return f"What is described here: {masked}"


_TITLE_INDEX: dict[str, dict] = {}


def _by_title(corpus: str) -> dict:
    if corpus not in _TITLE_INDEX:
        _TITLE_INDEX[corpus] = {d.title: d for d in load_corpus(corpus)}
    return _TITLE_INDEX[corpus]
