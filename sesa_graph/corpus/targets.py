"""Target pools for self-play: what the proposer is asked to write questions about.

Two sources: a pool file in SSP's answer-pool format (:data:`POOL_FORMAT`: each row an answer with its own
hop count and example questions; SSP's released ~50k-row pool, or one `sesa targets build` makes from a
question/answer file), which the GPU configs name; and, for CPU runs, a pool built from the embedded corpus --
article titles as targets with hop counts cycling 1..3 -- never from benchmark questions, so evaluation stays
clean, and never a held-out article (``sesa_graph.corpus.heldout``), which the probe set keeps for itself. Targets
are drawn in epochs (:func:`sample_targets`), a pure function of (seed, step): a resumed run draws the same.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

from sesa_graph.corpus.heldout import is_held_out
from tools.corpus import load_corpus
from tools.errors import UserError
from tools.inputs import read_bytes_bounded

MAX_HOPS = 5  # the propose graph's largest hop count


@dataclass(frozen=True)
class Target:
    answer: str
    hops: int
    example: str | None = None  # SSP's sys_question_example: example questions shown to the proposer


MAX_POOL_BYTES = 512 * 2**20  # SSP's ~50k rows with three example questions each are tens of MiB
POOL_FORMAT = (
    'one JSON object a line, SSP\'s answer-pool format: {"ground_truth": "answer" or ["answer", ...], '
    '"search_turns": hop count 1..5, "sys_question_example": "example questions" (optional)}'
)
HOW_TO_MAKE = (
    "use SSP's released answer pool (train_answers_random_hop_50000_proposer.jsonl, the input of its "
    "examples/data_preprocess/preprocess_ssp_train_dataset.py), or build one from a question/answer file "
    "with `sesa targets build --from QA.jsonl -o POOL.jsonl`"
)


def load_pool_file(path: str | Path) -> list[Target]:
    """The targets of a pool file (:data:`POOL_FORMAT`), each row's hop count its own. Read bounded (a regular
    file of at most :data:`MAX_POOL_BYTES`); a bad row is one UserError naming the file, line and field."""
    p = Path(path)
    if not p.exists():
        raise UserError(f"target pool {p} does not exist: {HOW_TO_MAKE} (train.target_pool names it)")
    data = read_bytes_bounded(p, "target pool", MAX_POOL_BYTES)
    out = []
    for n, raw in enumerate(data.splitlines(), 1):
        if not raw.strip():
            continue
        where = f"target pool {p}: line {n}"
        try:
            row = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise UserError(f"{where}: not UTF-8 text") from None
        except json.JSONDecodeError as exc:
            raise UserError(f"{where}: not JSON ({exc.msg}); each line is {POOL_FORMAT}") from None
        if not isinstance(row, dict):
            raise UserError(
                f"{where}: a JSON {type(row).__name__}, not an object; each line is {POOL_FORMAT}"
            )
        out.append(_pool_row(row, where))
    if not out:
        raise UserError(f"target pool {p} has no rows: {HOW_TO_MAKE}")
    return out


def _pool_row(row: dict, where: str) -> Target:
    gt = row.get("ground_truth")
    answer = gt[0] if isinstance(gt, list) and gt else gt
    if not isinstance(answer, str) or not answer.strip():
        raise UserError(
            f"{where}: field 'ground_truth' must be a non-empty string or list of strings, got {gt!r}"
        )
    hops = row.get("search_turns")
    if isinstance(hops, str) and hops.strip().isdigit():  # a hop count written as text
        hops = int(hops)
    if isinstance(hops, bool) or not isinstance(hops, int) or not 1 <= hops <= MAX_HOPS:
        raise UserError(f"{where}: field 'search_turns' must be a hop count 1..{MAX_HOPS}, got {hops!r}")
    example = row.get("sys_question_example")
    if example is not None and not isinstance(example, str):
        raise UserError(f"{where}: field 'sys_question_example' must be text, got {type(example).__name__}")
    return Target(answer.strip(), hops, (example.strip() or None) if example else None)


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
    """``"embedded"`` -> :func:`build_embedded_pool`; a path -> :func:`load_pool_file`."""
    return build_embedded_pool(max_hops=max_hops, seed=seed) if spec == "embedded" else load_pool_file(spec)


def check_pool(spec: str) -> None:
    """Read and validate a pool file before anything slow starts (a UserError names the bad row); the
    embedded pool needs no check."""
    if spec != "embedded":
        load_pool_file(spec)


def sample_targets(pool: list[Target], n: int, step: int, seed: int = 0) -> list[Target]:
    """The ``n`` targets of ``step``, drawn in epochs as SSP's shuffled data loader does: each epoch is one
    seeded permutation of the pool cut into ``len(pool) // n`` batches (the remainder is dropped, as a
    loader with drop_last), so no target repeats inside an epoch. A pure function of its arguments: a
    resumed run draws the same targets. A pool smaller than ``n`` gives all of it, shuffled, each step."""
    if not pool:
        raise ValueError("empty target pool")
    per_epoch = max(1, len(pool) // n)
    epoch, k = divmod(step, per_epoch)
    order = list(pool)
    random.Random(f"{seed}:epoch:{epoch}").shuffle(order)
    return order[k * n : (k + 1) * n]


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
