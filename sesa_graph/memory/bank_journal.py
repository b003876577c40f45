"""A skill bank's commit journal and the files it rewrites: state.json, skills.jsonl, the snapshots.

Crash safety: every JSON/JSONL/YAML file is written atomically (temp + rename). An operation that touches
Chroma and files -- a commit (a consolidation's admissions and evictions) or a counter update (a step's
credit) -- first writes ``journal.json`` (everything it is about to do, embeddings included), then applies
it to Chroma, the queue file, the snapshot, ``skills.jsonl`` and ``state.json``, then deletes the journal.
Opening a bank whose journal is still there re-applies it (each part is idempotent: absolute counters,
upserts), so a process killed mid-commit comes back with the whole commit, and one killed before the
journal was written comes back without any of it.

The journal also keeps ``before``: the state, the skills and the files as they were before the operation.
Readers that never open Chroma (:mod:`sesa_graph.memory.snapshot`) rebuild the last finished state from
it, whichever of the files the writer had already rewritten when it stopped; without a journal the files
equal Chroma.

:class:`BankJournal` is a mixin of :class:`sesa_graph.memory.bank.SkillBank`, which supplies the Chroma
collections, the in-memory skills and tombstones, ``version``, ``skills()``, ``_check_writable()`` and
``_tomb_expired()``.
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sesa_graph.fsutil import write_json_atomic, write_jsonl_atomic
from sesa_graph.memory.bank_layout import (
    COUNTERS,
    JOURNAL,
    LIVE,
    SNAPSHOTS,
    STATE,
    BankCorruptError,
    restore_hint,
    skill_metadata,
    snapshot_name,
)
from sesa_graph.memory.skill import Skill

log = logging.getLogger(__name__)


class BankJournal:
    """Commits (journal, apply) and the files of a skill bank; see the module docstring."""

    path: Path
    _state: dict
    _skills: dict[str, Skill]
    _emb: dict[str, np.ndarray]
    _tomb_emb: dict[str, np.ndarray]
    _tomb_step: dict[str, int]
    _col: Any
    _tombs: Any

    def commit(
        self,
        *,
        step: int,
        admit: Sequence[tuple[Skill, np.ndarray]],
        evict: dict[str, str],
        files: dict[Path, Any] | None = None,
        report: dict | None = None,
        stats: dict[str, int] | None = None,
        state_fields: dict[str, Any] | None = None,
    ) -> int:
        """Apply one consolidation atomically (see the module docstring) and return the new version.

        ``admit``: (skill, embedding) pairs; ``evict``: id -> reason; ``files``: other state files (the
        queue) to rewrite as part of the same commit; ``report``: stored next to the snapshot; ``stats``:
        added to the cumulative statistics; ``state_fields``: other top-level state fields to set.
        """
        self._check_writable()
        expired = [t for t in self._tomb_step if self._tomb_expired(t, step)]
        evict = {sid: r for sid, r in evict.items() if sid in self._skills and not self._skills[sid].seed}
        tombs = []
        if evict:
            got = self._col.get(ids=list(evict), include=["embeddings"])
            emb_by_id = dict(zip(got["ids"], got["embeddings"]))
            for sid, reason in evict.items():
                tombs.append(
                    {
                        "id": sid,
                        "embedding": np.asarray(emb_by_id[sid]).tolist(),
                        "step": step,
                        "reason": reason,
                        "skill": self._skills[sid].model_dump(mode="json"),
                    }
                )
        state = {**self._state, **(state_fields or {})}
        version = self.version + 1
        all_stats = Counter(state.get("stats", {}))
        all_stats.update({k: v for k, v in (stats or {}).items() if v})
        state.update(
            {
                "version": version,
                "last_commit_step": step,
                "stats": dict(all_stats),
                "n_skills": len(self._skills)
                + len([s for s, _ in admit if s.id not in self._skills])
                - len(evict),
                "n_tombstones": len((set(self._tomb_step) - set(expired)) | set(evict)),
            }
        )
        files = {str(Path(p).relative_to(self.path)): obj for p, obj in (files or {}).items()}
        entry = {
            "kind": "commit",
            "state": state,
            "add": [
                {"skill": s.model_dump(mode="json"), "embedding": np.asarray(e).tolist()} for s, e in admit
            ],
            "delete": list(evict),
            "tombstones_add": tombs,
            "tombstones_delete": [t for t in expired if t not in evict],  # (re-evicted ids get a fresh one)
            "files": files,
            "report": {**(report or {}), "version": version, "step": step},
            "before": {
                "state": self._state,
                "skills": {
                    sid: (self._skills[sid].model_dump(mode="json") if sid in self._skills else None)
                    for sid in [*(s.id for s, _ in admit), *evict]
                },
                "files": {rel: _read_json_or_none(self.path / rel) for rel in files},
            },
        }
        write_json_atomic(self.path / JOURNAL, entry)
        self._apply(entry)
        return version

    def _update_counters(self, new: dict[str, Skill], step: int | None = None) -> None:
        """Set the counters of these skills (same ids, new counters) in Chroma and skills.jsonl, journaled;
        with ``step``, state.json's ``credited_step`` in the same entry."""
        entry = {
            "kind": "counters",
            "version": self.version,
            "counters": {sid: {c: getattr(s, c) for c in COUNTERS} for sid, s in new.items()},
            "before": {"skills": {sid: self._skills[sid].model_dump(mode="json") for sid in new}},
            **({"credited_step": step} if step is not None else {}),
        }
        write_json_atomic(self.path / JOURNAL, entry)
        self._apply(entry)

    def _apply(self, entry: dict) -> None:
        """Apply a journal entry to Chroma, the files and the state; idempotent; deletes the journal."""
        if entry.get("kind") == "counters":
            ids = [sid for sid in entry["counters"] if sid in self._skills]
            if ids:
                metas = [{c: int(entry["counters"][sid][c]) for c in COUNTERS} for sid in ids]
                self._col.update(ids=ids, metadatas=metas)
                for sid, m in zip(ids, metas):
                    self._skills[sid] = self._skills[sid].model_copy(update=m)
            self._write_live()
            if isinstance(entry.get("credited_step"), int):
                self._state["credited_step"] = max(
                    self._state.get("credited_step", -1), entry["credited_step"]
                )
                self._write_state()
            os.unlink(self.path / JOURNAL)
            return
        adds = [Skill.model_validate(a["skill"]) for a in entry["add"]]
        if adds:
            embs = np.asarray([a["embedding"] for a in entry["add"]], dtype=np.float32)
            self._col.upsert(
                ids=[s.id for s in adds],
                embeddings=embs,
                metadatas=[skill_metadata(s) for s in adds],
                documents=[s.embed_text() for s in adds],
            )
            for s, e in zip(adds, embs):
                self._skills[s.id], self._emb[s.id] = s, e
        if entry["delete"]:
            self._col.delete(ids=entry["delete"])
            for sid in entry["delete"]:
                self._skills.pop(sid, None)
                self._emb.pop(sid, None)
        if entry["tombstones_add"]:
            t = entry["tombstones_add"]
            self._tombs.upsert(
                ids=[x["id"] for x in t],
                embeddings=np.asarray([x["embedding"] for x in t], np.float32),
                metadatas=[
                    {"skill": json.dumps(x["skill"]), "step": x["step"], "reason": x["reason"]} for x in t
                ],
            )
            for x in t:
                self._tomb_emb[x["id"]] = np.asarray(x["embedding"], np.float32)
                self._tomb_step[x["id"]] = x["step"]
        if entry["tombstones_delete"]:
            self._tombs.delete(ids=entry["tombstones_delete"])
            for tid in entry["tombstones_delete"]:
                self._tomb_emb.pop(tid, None)
                self._tomb_step.pop(tid, None)
        for rel, obj in entry["files"].items():
            write_json_atomic(self.path / rel, obj)
        self._state = entry["state"]
        self._write_snapshot(entry["report"])
        self._write_live()
        self._write_state()
        os.unlink(self.path / JOURNAL)

    # ---- files -----------------------------------------------------------------------------------------
    def _reconcile_live(self) -> None:
        """Make skills.jsonl equal Chroma, saying so when it did not (a bank written before counter
        updates were journaled, or a damaged file): readers must never see other counters than Chroma."""
        want = [s.model_dump(mode="json") for s in self.skills()]
        try:
            have = [json.loads(line) for line in (self.path / LIVE).read_text(encoding="utf-8").splitlines()]
        except (OSError, ValueError) as exc:
            have, why = None, f"unreadable ({exc})"
        else:
            why = "it disagreed with Chroma"
        if have != want:
            log.warning("skill bank %s: rewrote %s from Chroma: %s", self.path, LIVE, why)
            self._write_live()

    def _write_state(self) -> None:
        write_json_atomic(self.path / STATE, self._state)

    def _write_live(self) -> None:
        write_jsonl_atomic(self.path / LIVE, (s.model_dump(mode="json") for s in self.skills()))

    def _write_snapshot(self, report: dict) -> None:
        version = self._state["version"]
        write_jsonl_atomic(
            self.path / SNAPSHOTS / snapshot_name(version), (s.model_dump(mode="json") for s in self.skills())
        )
        write_json_atomic(self.path / SNAPSHOTS / f"v{version:04d}.report.json", report)


def _read_json_or_none(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def describe_journal(entry: dict) -> str:
    """What a (checked) journal entry is about to do, for logs and readers' warnings."""
    if entry.get("kind") == "counters":
        return f"counter update of {len(entry['counters'])} skills (a step's credit)"
    step = entry["report"].get("step", entry["state"].get("last_commit_step"))
    return f"commit to version {entry['state']['version']} (consolidation at step {step})"


def _journal_problem(obj: Any, state_version: int | None) -> str | None:
    if not isinstance(obj, dict):
        return f"expected a JSON object, got {type(obj).__name__}"
    kind = obj.get("kind", "commit")
    if kind == "counters":
        counters = obj.get("counters")
        if not isinstance(counters, dict) or not all(
            isinstance(c, dict) and all(isinstance(c.get(k), int) for k in COUNTERS)
            for c in counters.values()
        ):
            return "'counters' must map skill ids to {retrieved, helpful, hurt} integers"
        return None
    if kind != "commit":
        return f"unknown kind {kind!r}"
    shapes = {
        "state": dict,
        "add": list,
        "delete": list,
        "tombstones_add": list,
        "tombstones_delete": list,
        "files": dict,
        "report": dict,
    }
    missing = [k for k in shapes if k not in obj]
    if missing:
        return f"keys {missing} are missing"
    wrong = [k for k, t in shapes.items() if not isinstance(obj[k], t)]
    if wrong:
        return f"{wrong} have the wrong type"
    version = obj["state"].get("version")
    if not isinstance(version, int):
        return "state.version is not an integer"
    if state_version is not None and version not in (state_version, state_version + 1):
        return f"it commits version {version} but state.json is at version {state_version}"
    try:
        for a in obj["add"]:
            Skill.model_validate(a["skill"])
            np.asarray(a["embedding"], dtype=np.float32)
        for t in obj["tombstones_add"]:
            t["id"], int(t["step"]), t["reason"], np.asarray(t["embedding"], dtype=np.float32)
        if not all(isinstance(x, str) for x in [*obj["delete"], *obj["tombstones_delete"]]):
            return "'delete' and 'tombstones_delete' must list skill ids"
    except (KeyError, TypeError, ValueError) as exc:
        return f"a skill or tombstone in it is malformed ({type(exc).__name__}: {str(exc).splitlines()[0]})"
    return None


def _damaged(file: Path, problem: str) -> BankCorruptError:
    return BankCorruptError(
        f"{file} is damaged: {problem}. It records an unfinished change to the bank that cannot be finished "
        f"from it. Restore {file.name} from a copy of the bank, or delete it to drop that change; if the "
        f"bank then does not open (Chroma already had part of it), {restore_hint(file.parent)}"
    )


def check_journal(obj: Any, file: Path, state_version: int | None = None) -> dict:
    """``obj`` (parsed ``journal.json``) if a writer can finish it, else BankCorruptError naming the file,
    what is wrong and how to recover (``state_version``: state.json's version, to catch a foreign journal)."""
    problem = _journal_problem(obj, state_version)
    if problem:
        raise _damaged(file, problem)
    return obj


def load_journal(file: Path, state_version: int | None = None) -> dict | None:
    """The checked journal entry at ``file`` (None when there is none); see :func:`check_journal`."""
    try:
        obj = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise _damaged(file, f"not readable JSON ({exc})") from None
    return check_journal(obj, file, state_version)
