"""The skill bank: a Chroma collection (cosine) of skills with precomputed embeddings, owned by one writer.

The directory layout, the errors and how a skill is stored in Chroma are in
:mod:`sesa_graph.memory.bank_layout`; the crash-safe commit (journal, apply, snapshots) in
:mod:`sesa_graph.memory.bank_journal`.

Chroma's PersistentClient is not process-safe: only the process that created or opened a bank with
``read_only=False`` may write it, and that is enforced: the writer holds the bank's OS lock
(:mod:`sesa_graph.memory.bank_lock`) until :meth:`SkillBank.close` or its death, and a second writer gets
:class:`BankLockedError` naming the holder. Across machines run ``chroma run --path DIR`` and set
``chroma_host``.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Self

import numpy as np

from sesa_graph.memory.bank_journal import BankJournal, describe_journal, load_journal
from sesa_graph.memory.bank_layout import (
    CHROMA,
    JOURNAL,
    LOCK,
    QUEUE,
    STATE,
    STATE_FORMAT,
    BankCorruptError,
    BankError,
    BankExistsError,
    BankNotFoundError,
    load_state,
    skill_from_metadata,
    skill_metadata,
)
from sesa_graph.memory.bank_lock import BankLock
from sesa_graph.memory.config import MemoryConfig
from sesa_graph.memory.queue import FailureQueue
from sesa_graph.memory.skill import Skill, load_seeds, load_skill_file, render_for_prompt
from sesa_graph.memory.utility import Outcome, tally

log = logging.getLogger(__name__)


def max_cosine(emb: np.ndarray, matrix: np.ndarray) -> float:
    """Largest cosine similarity of one normalized vector to the rows of ``matrix`` (-1 when empty)."""
    return float((matrix @ emb).max()) if len(matrix) else -1.0


class SkillBank(BankJournal):
    """Skills, their embeddings and counters; tombstones; the version counter. See the module docstring.

    Make one with :meth:`create` (a new directory) or :meth:`open` (an existing bank); the two are never
    confused, so a missing or damaged bank is an error, not a silently empty one.
    """

    def __init__(
        self, path: Path, config: MemoryConfig, encoder: Any, client: Any, state: dict, read_only: bool
    ) -> None:
        self.path = path
        self.config = config
        self.encoder = encoder
        self.read_only = read_only
        self._client = client
        self._state = state
        self._skills: dict[str, Skill] = {}
        self._emb: dict[str, np.ndarray] = {}
        self._tomb_emb: dict[str, np.ndarray] = {}
        self._tomb_step: dict[str, int] = {}
        self._lock: BankLock | None = None
        self._closed = False
        try:
            self._col = client.get_collection(state["collection"])
            self._tombs = client.get_collection(state["collection"] + "_tombstones")
        except Exception as exc:  # noqa: BLE001 -- Chroma raises several types for a missing collection
            raise BankCorruptError(
                f"skill bank {path}: Chroma collection {state['collection']!r} is missing or "
                f"unreadable ({exc})"
            ) from None

    # ---- construction --------------------------------------------------------------------------------
    @staticmethod
    def _connect(path: Path, config: MemoryConfig, create: bool) -> Any:
        import chromadb
        from chromadb.config import Settings

        settings = Settings(anonymized_telemetry=False)
        if config.chroma_host:
            return chromadb.HttpClient(host=config.chroma_host, port=config.chroma_port, settings=settings)
        chroma_dir = path / CHROMA
        if not create and not (chroma_dir / "chroma.sqlite3").is_file():
            raise BankCorruptError(f"skill bank {path}: {chroma_dir}/chroma.sqlite3 is missing")
        try:
            return chromadb.PersistentClient(path=str(chroma_dir), settings=settings)
        except Exception as exc:  # noqa: BLE001
            raise BankCorruptError(f"skill bank {path}: Chroma cannot open {chroma_dir} ({exc})") from None

    @classmethod
    def create(
        cls,
        path: str | Path,
        config: MemoryConfig | None = None,
        encoder: Any = None,
        *,
        seeds: Sequence[Skill] | None = None,
        priming: Iterable[str | Path] | None = None,
    ) -> SkillBank:
        """A new bank at ``path`` (which must not exist or be empty) holding the seeds and priming skills.

        ``seeds`` default to ``config.seeds_file`` (or the shipped seeds.yaml); ``priming`` to
        ``config.priming_files``. Priming skills that are near-duplicates (cosine > admit_max_cosine) of
        a seed or of each other are skipped and counted in the state.
        """
        path = Path(path)
        config = config or MemoryConfig()
        if path.exists() and any(path.iterdir()):
            raise BankExistsError(
                f"{path} already exists and is not empty; open it to resume, or pick a new "
                "directory for a new bank"
            )
        encoder = encoder or _default_encoder(config)
        seeds_version = None
        if seeds is None and not config.use_seeds:
            seeds = []  # the paper's "w/o priming": the bank starts empty (or with priming files only)
        if seeds is None:
            seeds_version, seeds = load_seeds(config.seeds_file)
        priming_paths = [Path(p) for p in (config.priming_files if priming is None else priming)]
        loaded = [(p, *load_skill_file(p)) for p in priming_paths]  # fail on a bad file before writing
        if config.mode == "off":
            raise BankError("memory mode 'off' has no bank; do not create one")

        path.mkdir(parents=True, exist_ok=True)
        lock = BankLock(path)
        try:
            if any(p.name != LOCK for p in path.iterdir()):  # another creator got here first
                raise BankExistsError(
                    f"{path} was filled by another process while this one created a bank there"
                )
            bank = cls._create_locked(path, config, encoder, seeds, seeds_version, loaded)
        except BaseException:
            lock.release()
            raise
        bank._lock = lock
        return bank

    @classmethod
    def _create_locked(
        cls,
        path: Path,
        config: MemoryConfig,
        encoder: Any,
        seeds: Sequence[Skill],
        seeds_version: Any,
        loaded: list,
    ) -> SkillBank:
        client = cls._connect(path, config, create=True)
        try:
            bank = cls._create_collections(path, config, encoder, client, seeds_version)
        except BaseException:
            client.close()
            raise
        try:
            cls._fill(bank, bank._state, seeds, loaded)
        except BaseException:
            bank.close()
            raise
        return bank

    @classmethod
    def _create_collections(
        cls, path: Path, config: MemoryConfig, encoder: Any, client: Any, seeds_version: Any
    ) -> SkillBank:
        name = config.collection
        if name in {c.name for c in client.list_collections()}:
            raise BankExistsError(
                f"Chroma collection {name!r} already exists at "
                f"{config.chroma_host or path / CHROMA}; pick another `collection` name"
            )
        client.create_collection(name, configuration={"hnsw": {"space": "cosine"}}, embedding_function=None)
        client.create_collection(
            name + "_tombstones", configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
        )
        state = {
            "format": STATE_FORMAT,
            "version": 0,
            "collection": name,
            "embedder": config.embedder,
            "dim": int(encoder.dim),
            "n_skills": 0,
            "n_tombstones": 0,
            "seeds_version": seeds_version,
            "seeds_file": str(config.seeds_file or "shipped"),
            "priming": [],
            "created_at": time.time(),
            "last_commit_step": 0,
            "chroma_host": config.chroma_host,
            "stats": {},
        }
        return cls(path, config, encoder, client, state, read_only=False)

    @staticmethod
    def _fill(bank: SkillBank, state: dict, seeds: Sequence[Skill], loaded: list) -> None:
        path, config = bank.path, bank.config
        seed_list = [s.model_copy(update={"seed": True, "source": "seed"}) for s in seeds]
        bank._add(seed_list, bank._embed(seed_list))
        for p, version, file_skills in loaded:
            skills = [s.model_copy(update={"seed": False}) for s in file_skills if s.id not in bank._skills]
            embs = bank._embed(skills)
            keep = []
            matrix = bank._matrix()
            for s, e in zip(skills, embs):
                if max_cosine(e, matrix) <= config.admit_max_cosine:
                    keep.append((s, e))
                    matrix = np.vstack([matrix, e[None]])
            bank._add([s for s, _ in keep], np.array([e for _, e in keep]))
            state["priming"].append(
                {
                    "file": str(p),
                    "version": version,
                    "loaded": len(keep),
                    "skipped_duplicates": len(file_skills) - len(keep),
                }
            )
        state["n_skills"] = len(bank._skills)
        FailureQueue(path / QUEUE).save()
        bank._write_snapshot({"version": 0, "step": 0, "created": True, "n_skills": len(bank._skills)})
        bank._write_live()
        bank._write_state()  # last: a directory without state.json is an interrupted create

    @classmethod
    def open(
        cls,
        path: str | Path,
        config: MemoryConfig | None = None,
        encoder: Any = None,
        *,
        read_only: bool = False,
    ) -> SkillBank:
        """The existing bank at ``path``; finishes an interrupted commit (unless ``read_only``).

        A writer (not ``read_only``) holds the bank's lock until :meth:`close`; BankLockedError (naming the
        holder) when another writer has it. Read-only opens never lock."""
        path = Path(path)
        config = config or MemoryConfig()
        if not path.is_dir() or not any(path.iterdir()):
            raise BankNotFoundError(
                f"no skill bank at {path} (create one, e.g. by starting a new run, or check the path)"
            )
        lock = None if read_only else BankLock(path)
        try:
            bank = cls._open(path, config, encoder, read_only)
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        bank._lock = lock
        return bank

    @classmethod
    def _open(cls, path: Path, config: MemoryConfig, encoder: Any, read_only: bool) -> SkillBank:
        state_file = path / STATE
        if not state_file.is_file():
            raise BankCorruptError(
                f"{path} has no {STATE}: not a skill bank, or its creation was interrupted "
                "(delete the directory and create it again)"
            )
        state = load_state(state_file)
        if state["embedder"] != config.embedder:
            raise BankError(
                f"skill bank {path} was built with embedder {state['embedder']!r}, the config says "
                f"{config.embedder!r}; embeddings from different models cannot be mixed"
            )
        if state.get("chroma_host") != config.chroma_host:
            raise BankError(
                f"skill bank {path} keeps its skills in "
                f"{'the Chroma server at ' + state['chroma_host'] if state.get('chroma_host') else path / CHROMA}"
                f", the config says chroma_host={config.chroma_host!r}"
            )
        journal = path / JOURNAL
        entry = load_journal(journal, state["version"])
        if read_only and entry is not None:
            raise BankError(
                f"skill bank {path} has an unfinished {describe_journal(entry)} ({journal}); the next "
                "writer to open the bank (e.g. `sesa train --resume`) finishes it; `sesa bank show` reads "
                "the last finished state meanwhile"
            )
        client = cls._connect(path, config, create=False)
        try:
            bank = cls(path, config, encoder or _default_encoder(config), client, state, read_only)
            bank._load()
            if entry is not None:
                log.warning(
                    "skill bank %s: finishing the %s interrupted last time", path, describe_journal(entry)
                )
                bank._apply(entry)
            if len(bank._skills) != bank._state["n_skills"]:
                raise BankCorruptError(
                    f"skill bank {path}: Chroma holds {len(bank._skills)} skills but {STATE} "
                    f"says {bank._state['n_skills']}"
                )
            if not read_only:
                bank._reconcile_live()
        except BaseException:
            client.close()
            raise
        return bank

    def close(self) -> None:
        """Close Chroma and release the writer lock (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            close = getattr(self._client, "close", None)
            if close is not None:
                close()
        finally:
            if self._lock is not None:
                self._lock.release()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- reading ---------------------------------------------------------------------------------------
    @property
    def version(self) -> int:
        return int(self._state["version"])

    @property
    def stats(self) -> Counter[str]:
        return Counter(self._state.get("stats", {}))

    @property
    def state(self) -> dict:
        return json.loads(json.dumps(self._state))

    def __len__(self) -> int:
        return len(self._skills)

    def __contains__(self, skill_id: str) -> bool:
        return skill_id in self._skills

    def get(self, skill_id: str) -> Skill | None:
        s = self._skills.get(skill_id)
        return s.model_copy() if s is not None else None

    def skills(self) -> list[Skill]:
        """Copies of every skill, seeds first, then by creation step."""
        return [
            s.model_copy()
            for s in sorted(self._skills.values(), key=lambda s: (not s.seed, s.created_step, s.id))
        ]

    def embedding_snapshot(self, step: int) -> tuple[dict[str, Skill], np.ndarray, np.ndarray]:
        """(skills by id, bank embedding matrix, matrix of tombstones still live at ``step``): what a
        consolidation checks its candidates against."""
        live = [t for t in self._tomb_emb if not self._tomb_expired(t, step)]
        tombs = np.stack([self._tomb_emb[t] for t in live]) if live else np.zeros((0, self._dim), np.float32)
        return {k: v.model_copy() for k, v in self._skills.items()}, self._matrix().copy(), tombs

    def _tomb_expired(self, tomb_id: str, step: int) -> bool:
        ttl = self.config.tombstone_ttl_steps
        return ttl is not None and step - self._tomb_step[tomb_id] >= ttl

    @property
    def _dim(self) -> int:
        return int(self._state.get("dim") or 0)

    def _matrix(self) -> np.ndarray:
        return np.stack(list(self._emb.values())) if self._emb else np.zeros((0, self._dim), np.float32)

    def query(self, embeddings: np.ndarray, k: int | None = None) -> list[list[tuple[Skill, float]]]:
        """Top-k skills per query embedding, as (skill, cosine similarity), best first, one Chroma call.

        Hits below ``config.similarity_floor`` are dropped (so a question may get fewer than k).
        """
        k = k or self.config.top_k
        embeddings = np.asarray(embeddings, dtype=np.float32)
        if len(embeddings) == 0:
            return []
        if not self._skills:
            return [[] for _ in range(len(embeddings))]
        res = self._col.query(
            query_embeddings=embeddings, n_results=min(k, len(self._skills)), include=["distances"]
        )
        floor = self.config.similarity_floor
        out = []
        for ids, dists in zip(res["ids"], res["distances"]):
            hits = []
            for sid, d in zip(ids, dists):
                sim = 1.0 - float(d)
                skill = self._skills.get(sid)
                if skill is not None and (floor is None or sim >= floor):
                    hits.append((skill.model_copy(), sim))
            out.append(hits)
        return out

    def retrieve_scored(
        self, questions: Sequence[str], k: int | None = None
    ) -> list[list[tuple[Skill, float]]]:
        """Embed the questions (one batch) and return their top-k (skill, cosine) lists."""
        return self.query(self.encoder.encode_queries(list(questions)), k)

    def retrieve(self, questions: Sequence[str], k: int | None = None) -> list[list[Skill]]:
        """Top-k skills for each question, best first (batched: one embedding call, one Chroma query)."""
        return [[s for s, _ in hits] for hits in self.retrieve_scored(questions, k)]

    def render_for_prompt(self, skills: Sequence[Skill]) -> str:
        """The solver-prompt block for these skills: escaped, at most ``config.render_max_chars`` long."""
        return render_for_prompt(skills, self.config.render_max_chars)

    # ---- writing ---------------------------------------------------------------------------------------
    def _check_writable(self) -> None:
        if self.read_only:
            raise BankError(f"skill bank {self.path} was opened read-only")
        if self._closed:
            raise BankError(f"skill bank {self.path} is closed (its writer lock is released)")

    def _embed(self, skills: Sequence[Skill]) -> np.ndarray:
        return self.encoder.encode_documents([s.embed_text() for s in skills])

    def _add(self, skills: Sequence[Skill], embeddings: np.ndarray) -> None:
        if not skills:
            return
        self._col.upsert(
            ids=[s.id for s in skills],
            embeddings=np.asarray(embeddings, dtype=np.float32),
            metadatas=[skill_metadata(s) for s in skills],
            documents=[s.embed_text() for s in skills],
        )
        for s, e in zip(skills, embeddings):
            self._skills[s.id] = s
            self._emb[s.id] = np.asarray(e, dtype=np.float32)

    def apply_outcomes(self, outcomes: Iterable[Outcome | tuple], step: int | None = None) -> dict[str, int]:
        """Credit a step's judged rollouts (``(retrieved skill ids, correct, status)``, the rule in
        :mod:`sesa_graph.memory.utility`) to their skills in one Chroma update; counts of helpful / hurt /
        neutral / ignored rollouts, skills updated and unknown ids (e.g. placebo skills). ``step`` is journaled
        with the counters, and a step already credited is not credited again (a step run again on resume was)."""
        self._check_writable()
        if step is not None and self._state.get("credited_step", -1) >= step:
            log.info("skill bank: step %d's credits are already in the bank; not applied again", step)
            return {"already_credited": len(list(outcomes)), "skills_updated": 0, "unknown_skill_ids": 0}
        deltas, kinds = tally(outcomes)
        new: dict[str, Skill] = {}
        unknown = 0
        for sid, d in deltas.items():
            skill = self._skills.get(sid)
            if skill is None:
                unknown += 1
                continue
            new[sid] = skill.model_copy(
                update={
                    "retrieved": skill.retrieved + d.retrieved,
                    "helpful": skill.helpful + d.helpful,
                    "hurt": skill.hurt + d.hurt,
                }
            )
        if new or step is not None:
            self._update_counters(new, step)
        return {**kinds, "skills_updated": len(new), "unknown_skill_ids": unknown}

    def record_stats(self, counts: dict[str, int], **fields: Any) -> None:
        """Add to the cumulative statistics in state.json (and set top-level state fields)."""
        self._check_writable()
        stats = Counter(self._state.get("stats", {}))
        stats.update({k: v for k, v in counts.items() if v})
        self._state["stats"] = dict(stats)
        self._state.update(fields)
        self._write_state()

    def _load(self) -> None:
        try:
            got = self._col.get(include=["metadatas", "embeddings"])
            tombs = self._tombs.get(include=["metadatas", "embeddings"])
            skills = [skill_from_metadata(m) for m in got["metadatas"]]
        except Exception as exc:  # noqa: BLE001
            raise BankCorruptError(
                f"skill bank {self.path}: cannot read its Chroma collections ({exc})"
            ) from None
        self._skills = {s.id: s for s in skills}
        self._emb = {sid: np.asarray(e, np.float32) for sid, e in zip(got["ids"], got["embeddings"])}
        self._tomb_emb = {tid: np.asarray(e, np.float32) for tid, e in zip(tombs["ids"], tombs["embeddings"])}
        self._tomb_step = {tid: int(m["step"]) for tid, m in zip(tombs["ids"], tombs["metadatas"])}


def _default_encoder(config: MemoryConfig) -> Any:
    from tools.encoder import Encoder

    return Encoder(config.embedder)
