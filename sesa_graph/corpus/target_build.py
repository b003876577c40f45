"""Build a target pool (:data:`sesa_graph.corpus.targets.POOL_FORMAT`) from a question/answer file, for a run that
does not use SSP's released pool.

Input rows are NQ/HotpotQA-style JSON objects: a ``question`` and an answer under ``answer``, ``answers`` or
``golden_answers`` (Search-R1's name; a string or a list whose first entry is taken). Each row's hop count is
its own ``search_turns`` or ``hops`` field, else MuSiQue's id prefix (``2hop__``, ``3hop1__``, ...), else its
dataset kind (``--kind`` or the row's ``data_source``: see :data:`KIND_HOPS`), else ``--hops``. The row's own
question is never written into the pool (the proposer would copy it): each row gets up to three questions of
other rows with the same hop count as its examples, SSP's ``sys_question_example``. Build from a train split,
never from the benchmark the run is evaluated on (``sesa eval --target-pool`` checks for overlap).
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

from sesa_graph.corpus.targets import MAX_HOPS, MAX_POOL_BYTES
from tools.errors import UserError
from tools.inputs import read_bytes_bounded

# hop counts of the usual open-domain QA datasets (MuSiQue's come from each row's id)
KIND_HOPS = {"nq": 1, "triviaqa": 1, "popqa": 1, "hotpotqa": 2, "2wikimultihopqa": 2, "bamboogle": 2}
ANSWER_FIELDS = ("answer", "answers", "golden_answers")
EXAMPLES_PER_ROW = 3  # SSP's prompt shows three example questions
_MUSIQUE_ID = re.compile(r"^(\d)hop")


def build_pool(
    src: str | Path, kind: str | None = None, hops: int | None = None, seed: int = 0
) -> list[dict[str, object]]:
    """Pool rows from the question/answer file ``src``, one per distinct answer (the first row wins). A bad
    row is a UserError naming the file, line and field."""
    if kind is not None and kind not in KIND_HOPS and kind != "musique":
        raise UserError(f"--kind {kind!r} is not known; known: {', '.join([*KIND_HOPS, 'musique'])}")
    if hops is not None and not 1 <= hops <= MAX_HOPS:
        raise UserError(f"--hops must be 1..{MAX_HOPS}, got {hops}")
    p = Path(src)
    data = read_bytes_bounded(p, "question/answer file", MAX_POOL_BYTES)
    rows: list[tuple[str, str, int]] = []  # answer, question, hops
    seen: set[str] = set()
    for n, raw in enumerate(data.splitlines(), 1):
        if not raw.strip():
            continue
        where = f"question/answer file {p}: line {n}"
        try:
            row = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UserError(f"{where}: not a JSON line ({exc.__class__.__name__})") from None
        if not isinstance(row, dict):
            raise UserError(f"{where}: a JSON {type(row).__name__}, not an object")
        question, answer = row.get("question"), _answer(row, where)
        if not isinstance(question, str) or not question.strip():
            raise UserError(f"{where}: field 'question' must be non-empty text")
        if answer.lower() not in seen:
            seen.add(answer.lower())
            rows.append((answer, question.strip(), _hops(row, kind, hops, where)))
    if not rows:
        raise UserError(f"question/answer file {p} has no rows")
    return _with_examples(rows, seed)


def _answer(row: dict, where: str) -> str:
    for key in ANSWER_FIELDS:
        if key in row:
            value = row[key]
            first = value[0] if isinstance(value, list) and value else value
            if isinstance(first, str) and first.strip():
                return first.strip()
            raise UserError(f"{where}: field {key!r} must be non-empty text or a list of it, got {value!r}")
    raise UserError(f"{where}: no answer field (one of {', '.join(ANSWER_FIELDS)})")


def _hops(row: dict, kind: str | None, hops: int | None, where: str) -> int:
    for key in ("search_turns", "hops"):
        if key in row:
            value = row[key]
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_HOPS:
                raise UserError(f"{where}: field {key!r} must be a hop count 1..{MAX_HOPS}, got {value!r}")
            return value
    found = _MUSIQUE_ID.match(str(row.get("id", "")))
    if found and 1 <= int(found.group(1)) <= MAX_HOPS:
        return int(found.group(1))
    source = kind or row.get("data_source")
    if isinstance(source, str) and source.lower() in KIND_HOPS:
        return KIND_HOPS[source.lower()]
    if hops is not None:
        return hops
    raise UserError(
        f"{where}: no hop count (no 'search_turns'/'hops' field, no MuSiQue id, no known dataset kind): "
        "give --kind (e.g. nq, hotpotqa) or --hops N"
    )


def _with_examples(rows: list[tuple[str, str, int]], seed: int) -> list[dict[str, object]]:
    rng = random.Random(seed)
    by_hops: dict[int, list[int]] = {}
    for i, (_, _, h) in enumerate(rows):
        by_hops.setdefault(h, []).append(i)
    out: list[dict[str, object]] = []
    for i, (answer, _, h) in enumerate(rows):
        others = [j for j in rng.sample(by_hops[h], min(len(by_hops[h]), EXAMPLES_PER_ROW + 1)) if j != i]
        row: dict[str, object] = {"ground_truth": answer, "search_turns": h}
        if others:
            row["sys_question_example"] = "\n".join(rows[j][1] for j in others[:EXAMPLES_PER_ROW])
        out.append(row)
    return out


def write_pool(rows: list[dict[str, object]], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
