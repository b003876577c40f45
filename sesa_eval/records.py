"""The eval's files: the per-question record cache and the checks that keep cached records comparable.

``evals/<name>/records.jsonl`` holds one JSON line per finished (question, mode, seed), keyed
``dataset/id/mode/seed`` and appended (and fsynced) as each finishes; ``eval.json`` holds the settings
that decide a result (model, search, solver loop, judge, top-k). A rerun reuses cached records only if
those settings are the same, and a mode on/placebo record only if the bank gives its question the same
skills today (see :func:`same_skills`): a bank that moved on, or another bank under the same path,
reruns exactly the questions whose prompt it changes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sesa_graph.fsutil import JsonlError, JsonlRows, parse_jsonl
from sesa_graph.owner_lock import OwnerLock, OwnerLockedError
from tools.errors import UserError

log = logging.getLogger(__name__)

RECORDS, SETTINGS, REPORT_MD, REPORT_JSON = "records.jsonl", "eval.json", "report.md", "report.json"
ANSWERABILITY = "answerability.jsonl"  # per question: is a gold answer reachable (sesa_eval.answerability)
OWNER_LOCK = "owner.lock"  # the running eval's owner lock (sesa_graph.owner_lock) and who holds it
RETRY_STATUSES = frozenset({"error"})  # not results: run again on resume


class EvalError(UserError, RuntimeError):
    """An eval that cannot start or cannot go on; the message says why and what to do."""


class EvalInUseError(EvalError, OwnerLockedError):
    """Another eval writes the same output directory; the message names it and the holder."""


def lock_eval(out_dir: Path) -> OwnerLock:
    """Make ``out_dir`` and take its owner lock before anything in it is written or removed: two evals of
    one name would both append records (rollouts done twice, a key twice) and overwrite each other's report."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EvalError(
            f"cannot create the eval's output directory {out_dir} ({exc.strerror or exc}); give another "
            "--name, or an --out-root that is a writable directory"
        ) from None

    def busy(holder: str) -> str:
        return (
            f"eval output {out_dir} is in use by {holder}; an eval's output has one writer at a time and "
            "nothing was changed. Wait for that eval to finish (its records are then reused), or give "
            "another --name"
        )

    return OwnerLock(out_dir / OWNER_LOCK, busy, EvalInUseError)


def record_key(dataset: str, qid: str, mode: str, seed: int | None) -> str:
    return f"{dataset}/{qid}/{mode}/{'greedy' if seed is None else seed}"


def complete_length(data: bytes) -> int:
    """Bytes of ``data`` up to its last newline: a last line without one was torn by a kill (or is being
    written)."""
    return len(data) if not data or data.endswith(b"\n") else data.rfind(b"\n") + 1


def latest_records(rows: JsonlRows) -> dict[str, dict[str, Any]]:
    """The last record of each key among JSONL rows read by :func:`sesa_graph.fsutil.read_jsonl`; a row
    that is not a record (no ``key``) is an error naming ``file:line``."""
    latest: dict[str, dict[str, Any]] = {}
    for n, rec in zip(rows.line_numbers, rows):
        if "key" not in rec:
            raise EvalError(f"{rows.path}:{n}: not a record (no 'key'); move the file away to start over")
        latest[rec["key"]] = rec
    return latest


def parse_records(data: bytes, path: Path) -> dict[str, dict[str, Any]]:
    """The last record of each key in JSONL ``data`` (read under :func:`sesa_graph.fsutil.parse_jsonl`'s
    policy: a torn last line is skipped); a line that is not a record is an error naming ``file:line``."""
    return latest_records(_rows(data, path))


def _rows(data: bytes, path: Path) -> JsonlRows:
    try:
        return parse_jsonl(data, path)
    except JsonlError as exc:
        raise EvalError(
            f"{exc.path}:{exc.line}: not a record ({exc.reason}); move the file away to start over"
        ) from None


class RecordStore:
    """``records.jsonl``: one JSON line per finished (question, mode, seed), appended and flushed at once.

    Reading keeps the last record of each key (a re-judged or re-run record supersedes the earlier one).
    A torn last line (the process was killed mid-write) is cut off before appending.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.latest: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            self._load()

    def _load(self) -> None:
        data = self.path.read_bytes()
        rows = _rows(data, self.path)
        if rows.torn:
            cut = complete_length(data)
            log.warning(
                "%s: dropping a torn last line (%d bytes) left by an interrupted run",
                self.path,
                len(data) - cut,
            )
            with open(self.path, "r+b") as f:
                f.truncate(cut)
        elif data and not data.endswith(b"\n"):  # a complete last record without its newline
            with open(self.path, "ab") as f:
                f.write(b"\n")
        self.latest = latest_records(rows)

    def done(self, key: str) -> dict[str, Any] | None:
        """The cached record for ``key`` if it is a result (not a failure to run again)."""
        rec = self.latest.get(key)
        return rec if rec is not None and rec.get("status") not in RETRY_STATUSES else None

    def append(self, rec: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.latest[rec["key"]] = rec


def bank_ref(bank: Mapping[str, Any] | None) -> str | None:
    """Where a record's skills came from (provenance; reuse is decided by :func:`same_skills`)."""
    return f"{bank['path']}@v{bank['version']}" if bank else None


def skills_sha(block: str) -> str:
    """A digest of the skills block a rollout's prompt held ('' for none)."""
    return hashlib.sha1(block.encode("utf-8")).hexdigest()[:16]


def same_skills(rec: Mapping[str, Any], skill_ids: Sequence[str], block: str) -> bool:
    """Whether a cached mode-on/placebo record was made with the skills its question retrieves now.

    The prompt is the only way a bank reaches a rollout, so equal skills blocks mean the record still
    holds. Records written before ``skills_sha`` existed are compared by their skill ids, which are
    content hashes of a skill's advice (seed skills: fixed names).
    """
    if "skills_sha" in rec:
        return rec["skills_sha"] == skills_sha(block)
    return list(rec.get("skill_ids") or []) == list(skill_ids)


def _flat(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping) and v:
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def check_settings_file(out_dir: Path, identity: dict[str, Any], overwrite: bool) -> None:
    """Records in ``out_dir`` are reused only if they were made with the same identity settings."""
    settings_file = out_dir / SETTINGS
    if overwrite:
        for f in (RECORDS, SETTINGS, REPORT_MD, REPORT_JSON, ANSWERABILITY):
            (out_dir / f).unlink(missing_ok=True)
    if settings_file.exists() and ((out_dir / RECORDS).exists() or (out_dir / ANSWERABILITY).exists()):
        old = _flat(json.loads(settings_file.read_text()).get("identity", {}))
        new = _flat(json.loads(json.dumps(identity)))
        diff = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        if diff:
            lines = "\n".join(
                f"  {k}: was {json.dumps(old.get(k))}, now {json.dumps(new.get(k))}" for k in diff
            )
            raise EvalError(
                f"{out_dir} holds records made with other settings:\n{lines}\n"
                "use another --name, or --overwrite to discard those records"
            )


_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")


def weights_fingerprint(model: str) -> str | None:
    """A cheap fingerprint (file names, sizes, mtimes) of a local model directory's weight files, so that
    retrained weights under the same path do not reuse old records. None for hub ids and 'embedded'
    (immutable) and for directories that do not exist (yet)."""
    if model == "embedded":
        return None
    if model == "embedded-warm":
        from sesa_graph.embedded import resolve_policy_model

        try:
            model = resolve_policy_model(model)
        except FileNotFoundError:
            return None
    path = Path(model)
    if not path.is_dir():
        return None
    h = hashlib.sha1()
    for f in sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith(_WEIGHT_SUFFIXES)):
        st = f.stat()
        h.update(f"{f.relative_to(path)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]
