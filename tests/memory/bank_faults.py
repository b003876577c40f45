"""Stop a bank writer at any point of a journaled change, as a kill would: a fuse that trips before the
k-th Chroma call or file operation of the journal code, and a bank grown to have something to commit."""

from pathlib import Path

from fakes import failure
from hash_encoder import HashEncoder

from sesa_graph.memory import FailureQueue, MemoryConfig, Skill, SkillBank, bank_journal


class Killed(BaseException):
    """The simulated kill (a BaseException: nothing in the bank may catch it)."""


class Fuse:
    def __init__(self, at: int) -> None:
        self.at, self.n, self.tripped = at, 0, None

    def tick(self, what: str) -> None:
        if self.n == self.at:
            self.tripped = what
            raise Killed(what)
        self.n += 1

    def wrap(self, fn, what: str):
        def wrapped(*a, **kw):
            self.tick(what)
            return fn(*a, **kw)

        return wrapped


class _Col:
    def __init__(self, col, fuse: Fuse, name: str) -> None:
        self._col, self._fuse, self._name = col, fuse, name

    def __getattr__(self, attr):
        fn = getattr(self._col, attr)
        return self._fuse.wrap(fn, f"{self._name}.{attr}") if attr in ("upsert", "delete", "update") else fn


def arm(bank: SkillBank, monkeypatch, at: int) -> Fuse:
    """Trip before the ``at``-th operation of the bank's next journaled change."""
    fuse = Fuse(at)
    bank._col, bank._tombs = _Col(bank._col, fuse, "chroma"), _Col(bank._tombs, fuse, "tombstones")
    for name in ("write_json_atomic", "write_jsonl_atomic"):
        monkeypatch.setattr(bank_journal, name, fuse.wrap(getattr(bank_journal, name), name))
    monkeypatch.setattr(bank_journal.os, "unlink", fuse.wrap(bank_journal.os.unlink, "unlink journal"))
    return fuse


def skill(sid: str, text: str) -> Skill:
    return Skill(id=sid, description=text, trigger=f"questions about {text}", category="other")


def grown_bank(path: Path) -> tuple[SkillBank, FailureQueue]:
    """Seeds plus two admitted skills with counters, and a queue of four failures (version 1)."""
    enc = HashEncoder()
    bank = SkillBank.create(path, MemoryConfig(), enc)
    new = [skill("m-a", "check the birth year twice"), skill("m-b", "search the spouse by full name")]
    bank.commit(step=1, admit=list(zip(new, enc.encode_documents([s.embed_text() for s in new]))), evict={})
    bank.apply_outcomes([(["m-a", "seed-dates-exact"], True, "answered"), (["m-b"], False, "answered")])
    queue = FailureQueue.load(path / "queue.json")
    queue.add([failure(i) for i in range(4)])
    return bank, queue


def second_commit(bank: SkillBank, queue: FailureQueue) -> None:
    """Admit one skill, evict m-b, consume two queued failures: every part of a commit at once."""
    c = skill("m-c", "compare the two dates before answering")
    queue.remove(list(queue.entries)[:2], save=False)
    bank.commit(
        step=2,
        admit=[(c, bank.encoder.encode_documents([c.embed_text()])[0])],
        evict={"m-b": "low_utility"},
        files={queue.path: queue.to_json()},
        stats={"consolidations": 1},
    )
