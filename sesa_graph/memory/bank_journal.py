"""A skill bank's commit journal and the files it rewrites: state.json, skills.jsonl, the snapshots.

Crash safety: every JSON/JSONL/YAML file is written atomically (temp + rename). A commit -- the one
operation that touches several stores -- first writes ``journal.json`` (everything it is about to do,
embeddings included), then applies it to Chroma, the queue file, the snapshot and ``state.json``, then
deletes the journal. Opening a bank whose journal is still there re-applies it (each part is
idempotent), so a process killed mid-commit comes back with the whole commit, and one killed before the
journal was written comes back without any of it.

:class:`BankJournal` is a mixin of :class:`sesa_graph.memory.bank.SkillBank`, which supplies the Chroma
collections, the in-memory skills and tombstones, ``version``, ``skills()``, ``_check_writable()`` and
``_tomb_expired()``.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sesa_graph.fsutil import write_json_atomic, write_jsonl_atomic
from sesa_graph.memory.bank_layout import JOURNAL, LIVE, SNAPSHOTS, STATE, _metadata, snapshot_name
from sesa_graph.memory.skill import Skill


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
        entry = {
            "state": state,
            "add": [
                {"skill": s.model_dump(mode="json"), "embedding": np.asarray(e).tolist()} for s, e in admit
            ],
            "delete": list(evict),
            "tombstones_add": tombs,
            "tombstones_delete": [t for t in expired if t not in evict],  # (re-evicted ids get a fresh one)
            "files": {str(Path(p).relative_to(self.path)): obj for p, obj in (files or {}).items()},
            "report": {**(report or {}), "version": version, "step": step},
        }
        write_json_atomic(self.path / JOURNAL, entry)
        self._apply(entry)
        return version

    def _apply(self, entry: dict) -> None:
        """Apply a journal entry to Chroma, the files and the state; idempotent; deletes the journal."""
        adds = [Skill.model_validate(a["skill"]) for a in entry["add"]]
        if adds:
            embs = np.asarray([a["embedding"] for a in entry["add"]], dtype=np.float32)
            self._col.upsert(
                ids=[s.id for s in adds],
                embeddings=embs,
                metadatas=[_metadata(s) for s in adds],
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
