"""Evaluation data: benchmark questions from FlashRAG-style JSONL, and the data-hygiene check.

A dataset file has one JSON object per line::

    {"id": "test_49", "question": "Who is the mother of the father of Barack Obama?",
     "golden_answers": ["Habiba Akumu Nyanjango"]}

Datasets are named: ``nq`` is ``<data-dir>/nq.jsonl``; ``probe`` is the packaged, frozen probe set
(``sesa_eval/data/probe-v1.jsonl``, docs/PROBE.md) and ``probe-v2`` its successor (``probe-v2.jsonl``,
generated at a recorded ``doc_chars`` that an eval must match), no ``--data-dir`` needed. A name can also be the path of a ``.jsonl`` file,
or ``hf:<repo>[:<config>[:<split>]]`` for a Hugging Face dataset (online only; default split ``test``),
e.g. ``hf:RUC-NLPIR/FlashRAG_datasets:nq:test``. Bad rows are errors that name the file and line, never
rows skipped in silence: a benchmark score over an unknown subset cannot be compared with anything.

The hygiene check asks whether any evaluation question already appears in text the system trained on
or retrieves from (the training target pool, the skill bank), as an exact substring and after
SQuAD-style normalization (lowercase, no punctuation or articles, collapsed spaces; whole words). For
probe questions it also checks the held-out split itself: every article a probe question uses is held
out, and none is in the self-play target pool or among the warm-up's articles.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sesa_graph.scoring import normalize_answer
from tools.errors import UserError
from tools.jsonl import iter_jsonl, unpaired_surrogate
from tools.terminal import ID_CHARS, shown

# The paper's column order (Tables 1 and 2) and how its headers spell the names.
PAPER_ORDER = ("nq", "triviaqa", "popqa", "hotpotqa", "2wiki", "musique", "bamboogle")
DISPLAY_NAMES = {
    "nq": "NQ",
    "triviaqa": "TriviaQA",
    "popqa": "PopQA",
    "hotpotqa": "HotpotQA",
    "2wiki": "2Wiki",
    "musique": "MuSiQue",
    "bamboogle": "Bamboogle",
}


PROBE = "probe"
PROBE_FILE = Path(__file__).parent / "data" / "probe-v1.jsonl"
PROBE_V2 = "probe-v2"
# the packaged probe sets by dataset name: v1 frozen for comparison, v2 the one issue 32 built (docs/PROBE.md)
PROBE_FILES = {PROBE: PROBE_FILE, PROBE_V2: Path(__file__).parent / "data" / "probe-v2.jsonl"}

log = logging.getLogger(__name__)


class DatasetError(UserError, ValueError):
    """A dataset that cannot be used; the message names the dataset, file and line."""


@dataclass(frozen=True)
class EvalQuestion:
    """One benchmark question."""

    dataset: str
    id: str
    question: str
    golds: tuple[str, ...]


def display_name(dataset: str) -> str:
    """The paper's name of a dataset; another (a file's name) with its control characters made visible."""
    return DISPLAY_NAMES.get(dataset) or shown(dataset, ID_CHARS, one_line=True)


def known_datasets(data_dir: str | Path | None) -> dict[str, Path]:
    """Dataset name -> file, for every ``*.jsonl`` in ``data_dir`` (paper order first, then by name)."""
    if data_dir is None:
        return {}
    d = Path(data_dir)
    if not d.is_dir():
        raise DatasetError(f"--data-dir {d} is not a directory")
    files = {p.stem: p for p in d.glob("*.jsonl") if p.is_file()}
    return {name: files[name] for name in order_datasets(files)}


def order_datasets(names: Iterable[str]) -> list[str]:
    """The paper's datasets in the paper's order, then the others alphabetically."""
    names = list(dict.fromkeys(names))
    return [n for n in PAPER_ORDER if n in names] + sorted(n for n in names if n not in PAPER_ORDER)


def resolve_dataset(ref: str, data_dir: str | Path | None) -> tuple[str, Path | str]:
    """``(name, source)`` for a dataset reference: a name in ``data_dir``, a ``.jsonl`` path or ``hf:...``."""
    ref = ref.strip()
    if not ref:
        raise DatasetError("empty dataset name")
    if ref.startswith("hf:"):
        parts = ref[3:].split(":")
        name = parts[1] if len(parts) > 1 and parts[1] else parts[0].rsplit("/", 1)[-1]
        return name, ref
    if ref in PROBE_FILES:  # before the data dir: a file of that name there must not pass for the probe set
        return ref, PROBE_FILES[ref]
    known = known_datasets(data_dir)
    if ref in known:
        return ref, known[ref]
    p = Path(ref)
    if p.suffix == ".jsonl" and p.is_file():
        return p.stem, p
    where = f"in {data_dir}" if data_dir is not None else "(no --data-dir given)"
    listing = ", ".join(known) if known else "none"
    raise DatasetError(
        f"unknown dataset {ref!r}: not a dataset {where}, not a .jsonl file, not hf:<repo>[:<config>[:<split>]]."
        f" Known datasets: {listing}"
    )


_ROW = 'a JSON object {"id", "question", "golden_answers": [...]} (FlashRAG format)'


def _row_question(src: str, line: int, row: Any, seen: dict[str, int], dataset: str) -> EvalQuestion:
    where = f"{src}:{line}"
    if not isinstance(row, dict):
        raise DatasetError(f"{where}: expected {_ROW}, got a JSON {type(row).__name__}")
    if "golden_answers" not in row:
        raise DatasetError(f"{where}: row has no 'golden_answers'; want {_ROW}")
    golds = row["golden_answers"]
    if isinstance(golds, str) or not isinstance(golds, list):
        raise DatasetError(f"{where}: 'golden_answers' must be a list of strings, got {type(golds).__name__}")
    for i, g in enumerate(golds):
        # A null or a boolean would become the answer "None" or "True" and score wrong answers right.
        if (
            isinstance(g, bool)
            or not isinstance(g, (str, int, float))
            or (isinstance(g, float) and not math.isfinite(g))
        ):
            raise DatasetError(
                f"{where}: 'golden_answers'[{i}] is {json.dumps(g, default=repr)[:60]}; want a string"
            )
    golds = [str(g).strip() for g in golds if str(g).strip()]
    if not golds:
        raise DatasetError(f"{where}: 'golden_answers' has no non-empty answer")
    question = row.get("question")
    if not isinstance(question, str) or not question.strip():
        got = "missing" if "question" not in row else json.dumps(question, default=repr)[:60]
        raise DatasetError(f"{where}: row has no non-empty 'question' (a string; got {got})")
    qid = row.get("id")
    if qid is None or isinstance(qid, bool) or not isinstance(qid, (str, int)) or not str(qid).strip():
        raise DatasetError(
            f"{where}: row has no 'id' (a non-empty string or integer; got {json.dumps(qid, default=repr)[:60]}):"
            " results are cached per id, so every row needs one"
        )
    qid = str(qid).strip()
    if any(unpaired_surrogate(t) for t in (qid, question, *golds)):
        raise DatasetError(f"{where}: text holds an unpaired surrogate escape (\\udXXX); fix the escape")
    if qid in seen:
        raise DatasetError(f"{where}: id {qid!r} already used on line {seen[qid]}")
    seen[qid] = line
    return EvalQuestion(dataset, qid, question.strip(), tuple(dict.fromkeys(golds)))


def read_jsonl_questions(path: Path, dataset: str, limit: int | None = None) -> list[EvalQuestion]:
    """The first ``limit`` questions of a FlashRAG-style JSONL file; every row read is validated."""
    out: list[EvalQuestion] = []
    seen: dict[str, int] = {}
    for n, row in iter_jsonl(Path(path), DatasetError, _ROW):
        out.append(_row_question(str(path), n, row, seen, dataset))
        if limit is not None and len(out) >= limit:
            break  # before the next line is even read: --limit works on a file with a bad tail
    if not out:
        raise DatasetError(f"{path}: no questions")
    return out


def _read_hf(ref: str, dataset: str, limit: int | None) -> list[EvalQuestion]:
    parts = ref[3:].split(":")
    repo, config = parts[0], (parts[1] if len(parts) > 1 and parts[1] else None)
    split = parts[2] if len(parts) > 2 and parts[2] else "test"
    if os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1":
        raise DatasetError(
            f"{ref}: Hugging Face datasets need the network, and HF_HUB_OFFLINE=1 is set; "
            "download the split as JSONL and pass its path or --data-dir instead"
        )
    import datasets

    try:
        ds = datasets.load_dataset(repo, config, split=split)
    except Exception as exc:  # noqa: BLE001 -- the hub raises many types; name the dataset and the cause
        raise DatasetError(f"{ref}: cannot load {repo} (config {config}, split {split}): {exc}") from None
    seen: dict[str, int] = {}
    out = []
    for i, row in enumerate(ds):
        if limit is not None and len(out) >= limit:
            break
        out.append(_row_question(f"{ref}", i + 1, dict(row), seen, dataset))
    if not out:
        raise DatasetError(f"{ref}: no questions")
    return out


def load_dataset(
    ref: str, data_dir: str | Path | None = None, limit: int | None = None
) -> list[EvalQuestion]:
    """Questions of one dataset (see the module docstring for what ``ref`` may be)."""
    if limit is not None and limit < 1:
        raise DatasetError(f"--limit must be >= 1, got {limit}")
    name, source = resolve_dataset(ref, data_dir)
    if isinstance(source, str):
        return _read_hf(source, name, limit)
    return read_jsonl_questions(source, name, limit)


def load_datasets(
    refs: Sequence[str] | None, data_dir: str | Path | None, limit: int | None = None
) -> dict[str, list[EvalQuestion]]:
    """Several datasets by name (default: every dataset in ``data_dir``). Names must be distinct."""
    if not refs:
        refs = list(known_datasets(data_dir))
        if not refs:
            raise DatasetError(
                "no datasets: give --datasets (names, .jsonl paths or hf:...) or a --data-dir "
                "with *.jsonl files"
            )
    out: dict[str, list[EvalQuestion]] = {}
    for ref in refs:
        qs = load_dataset(ref, data_dir, limit)
        name = qs[0].dataset
        if name in out:
            raise DatasetError(f"dataset name {name!r} given twice (from {ref!r}); rename one file")
        out[name] = qs
    return out


# ---- data hygiene ---------------------------------------------------------------------------------------


@dataclass
class HygieneHit:
    dataset: str
    id: str
    question: str
    source: str
    """Where the question was found (pool file, or the skill id)."""
    match: str
    """'exact' (verbatim substring) or 'normalized' (only after normalization)."""


@dataclass
class HygieneSection:
    """The check against one source of text."""

    source: str
    texts: int
    exact: int = 0
    normalized: int = 0
    hits: list[HygieneHit] = field(default_factory=list)

    def to_json(self, max_hits: int = 20) -> dict[str, Any]:
        return {
            "source": self.source,
            "texts": self.texts,
            "exact": self.exact,
            "normalized": self.normalized,
            "hits": [vars(h) for h in self.hits[:max_hits]],
        }


class _Haystack:
    """Many texts, searched for a needle as an exact substring and as normalized whole words."""

    def __init__(self, labelled: Sequence[tuple[str, str]]) -> None:
        self.labels = [lab for lab, _ in labelled]
        self.raw = [t for _, t in labelled]
        self.norm = [f" {normalize_answer(t)} " for t in self.raw]
        self.raw_all = "\x00".join(self.raw)
        self.norm_all = "\x00".join(self.norm)

    def find(self, needle: str) -> tuple[str, str] | None:
        """(match kind, label of the first text containing it) or None."""
        q = needle.strip()
        if q and q in self.raw_all:
            return "exact", next(lab for lab, t in zip(self.labels, self.raw) if q in t)
        nq = normalize_answer(q)
        if nq and f" {nq} " in self.norm_all:
            return "normalized", next(lab for lab, t in zip(self.labels, self.norm) if f" {nq} " in t)
        return None


def check_contamination(
    questions: Iterable[EvalQuestion], texts: Sequence[tuple[str, str]], source: str
) -> HygieneSection:
    """Which questions occur in ``texts`` ((label, text) pairs), exactly or after normalization."""
    hay = _Haystack(texts)
    sec = HygieneSection(source=source, texts=len(texts))
    for q in questions:
        found = hay.find(q.question)
        if found is None:
            continue
        kind, label = found
        sec.exact += kind == "exact"
        sec.normalized += 1  # an exact hit is also a normalized hit
        sec.hits.append(HygieneHit(q.dataset, q.id, q.question, label, kind))
    return sec


_POOL_KEYS = ("question", "sys_question_example", "ground_truth", "target", "answer", "text")


def read_target_pool(path: str | Path) -> list[tuple[str, str]]:
    """(label, text) pairs of a training target pool: ``embedded`` (the pool ``sesa_graph.corpus.targets``
    builds from the embedded corpus), JSONL rows (SSP's ``{"ground_truth", "sys_question_example",
    "search_turns"}``, or ``question``/``target``/``answer`` fields), or one target per line."""
    if str(path) == "embedded":
        from sesa_graph.corpus.targets import build_embedded_pool

        return [(f"embedded pool #{i}", t.answer) for i, t in enumerate(build_embedded_pool())]
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"target pool {path} does not exist")
    out: list[tuple[str, str]] = []
    try:
        raw_lines = path.read_bytes().split(b"\n")
    except OSError as e:
        raise DatasetError(f"target pool {path}: cannot read the file: {e.strerror or e}") from None
    for n, raw in enumerate(raw_lines, 1):
        try:
            line = raw.decode("utf-8-sig" if n == 1 else "utf-8").strip()
        except UnicodeDecodeError as e:
            raise DatasetError(f"{path}:{n}: not valid UTF-8 ({e.reason} at column {e.start + 1})") from None
        if not line:
            continue
        if line.startswith("{"):
            try:
                row = json.loads(line)
            except (ValueError, RecursionError) as exc:
                raise DatasetError(f"{path}:{n}: not valid JSON ({getattr(exc, 'msg', exc)})") from None
            for key in _POOL_KEYS:
                val = row.get(key)
                for v in val if isinstance(val, list) else [val]:
                    if isinstance(v, str) and v.strip():
                        if unpaired_surrogate(v):
                            raise DatasetError(
                                f"{path}:{n}: '{key}' holds an unpaired surrogate escape (\\udXXX)"
                            )
                        out.append((f"{path.name}:{n}", v))
        else:
            out.append((f"{path.name}:{n}", line))
    return out


def skill_texts(skills: Iterable[Any]) -> list[tuple[str, str]]:
    """(skill id, all its words) for skills of :class:`sesa_graph.memory.skill.Skill`."""
    return [(s.id, s.text()) for s in skills]


def hygiene_report(
    questions: Sequence[EvalQuestion],
    pool_files: Sequence[str | Path] = (),
    skills: Sequence[Any] | None = None,
    bank_label: str = "skill bank",
) -> dict[str, Any]:
    """The hygiene section of an eval report: counts per source, and the first hits."""
    sections: list[HygieneSection] = []
    for p in pool_files:
        sections.append(check_contamination(questions, read_target_pool(p), f"target pool {p}"))
    if skills is not None:
        sections.append(check_contamination(questions, skill_texts(skills), bank_label))
    for name, file in PROBE_FILES.items():
        probes = [q for q in questions if q.dataset == name]
        if probes:
            sections.append(check_probe_split(probes, file))
    return {
        "questions": len(questions),
        "checked": [s.source for s in sections],
        "not_checked": ([] if pool_files else ["target pool (give --target-pool)"])
        + ([] if skills is not None else ["skill bank (no --bank)"]),
        "sections": [s.to_json() for s in sections],
        "clean": all(s.normalized == 0 for s in sections),
    }


def check_probe_split(questions: Sequence[EvalQuestion], probe_file: Path = PROBE_FILE) -> HygieneSection:
    """Whether the held-out split still holds for these probe questions: every article a question uses
    (its row's ``articles``) is held out, and none is a self-play target (``build_embedded_pool``) or a
    warm-up article (``sesa_graph.corpus.articles.load_articles``); no gold answer is a pool target either.
    A hit means someone broke an exclusion, and the probe set no longer measures held-out skill."""
    from sesa_graph.corpus.articles import load_articles
    from sesa_graph.corpus.heldout import SPLIT_VERSION, is_held_out
    from sesa_graph.corpus.targets import build_embedded_pool

    rows = {
        str(r["id"]): r for r in (json.loads(line) for line in probe_file.read_text("utf-8").splitlines())
    }
    pool = {normalize_answer(t.answer) for t in build_embedded_pool()}
    warm = {a.title for a in load_articles()}
    label = "probe" if probe_file == PROBE_FILE else probe_file.stem
    sec = HygieneSection(source=f"{label} held-out split {SPLIT_VERSION}", texts=len(questions))
    for q in questions:
        row = rows.get(q.id)
        if row is None:
            why = f"id not in {probe_file.name}"
        else:
            arts = list(row.get("articles") or [])
            why = (
                ("no articles listed" if not arts else "")
                or next((f"{t!r} not held out" for t in arts if not is_held_out(t)), "")
                or next((f"{t!r} in the target pool" for t in arts if normalize_answer(t) in pool), "")
                or next((f"{t!r} in the warm-up articles" for t in arts if t in warm), "")
                or next(
                    (f"answer {g!r} is a pool target" for g in q.golds if normalize_answer(g) in pool), ""
                )
            )
        if why:
            sec.normalized += 1
            sec.hits.append(HygieneHit(q.dataset, q.id, q.question, sec.source, why))
    if sec.hits:
        log.error(
            "%d probe question(s) use articles the trainer can see (first: %s: %s); the held-out exclusion "
            "is broken (sesa_graph.corpus.heldout, sesa_graph.corpus.targets, sesa_graph.corpus.articles)",
            len(sec.hits),
            sec.hits[0].id,
            sec.hits[0].match,
        )
    return sec


def probe_cut(dataset: str) -> int | None:
    """The ``doc_chars`` a packaged probe set was generated (and its answers checked) at, as its rows
    record it; None for one that records none (v1, made at 400 before the cut was recorded)."""
    file = PROBE_FILES.get(dataset)
    if file is None:
        return None
    with open(file, encoding="utf-8") as f:
        first = json.loads(f.readline() or "{}")
    return first.get("doc_chars")


def check_probe_cut(datasets: Iterable[str], doc_chars: int) -> None:
    """Refuse an eval of a probe set at another cut than the one it was generated at: its questions were
    kept only if every hop can be read within that cut, so at a shorter one some cannot be answered and at
    a longer one the set no longer says what it measures."""
    for ds in datasets:
        cut = probe_cut(ds)
        if cut is not None and cut != doc_chars:
            raise DatasetError(
                f"dataset {ds} ({PROBE_FILES[ds]}) was generated at doc_chars {cut}, but this eval cuts "
                f"documents at {doc_chars} (solver.doc_chars of its config): evaluate with a config whose "
                f"solver.doc_chars is {cut}, or regenerate the set at this cut (`python -m sesa_eval.probe.generate_v2 "
                f"--doc-chars {doc_chars}` rewrites {PROBE_FILES[ds].name})"
            )


def check_warm_split(model: str, datasets: Iterable[str]) -> None:
    """Refuse a probe eval of the format-warmed model (``embedded-warm``) when the one on disk was built
    before today's held-out split: its warm-up then trained on the probe's articles. ``sesa train`` makes
    the same check before it starts from that model (``training.launch.ensure_models``)."""
    if model != "embedded-warm" or not any(ds in PROBE_FILES for ds in datasets):
        return
    from sesa_graph.corpus.heldout import SPLIT_VERSION
    from sesa_graph.warm_model import is_complete, is_current, warm_dir

    path = warm_dir("embedded")
    if is_complete(path) and not is_current(path):
        raise DatasetError(
            f"--model embedded-warm ({path}) was built before the held-out split {SPLIT_VERSION}, so its "
            "warm-up trained on the probe set's articles: rebuild it with `sesa warmup --force`, then run "
            "this eval again"
        )
