"""More ownership rows (see rows_ownership.py): one owner per eval output, and where a run may live."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

from tests.hostile import ownership_fixtures as F
from tests.hostile.harness import CliResult, Outcome, cli, custom, invoke, judge_cli

A = "ownership"
QUESTIONS = [
    {"id": "a1", "question": "Capital of France? answer: Paris", "golden_answers": ["Paris"]},
    {"id": "a2", "question": "Largest planet? answer: Saturn", "golden_answers": ["Jupiter"]},
]


@contextlib.contextmanager
def _scripted() -> Iterator[None]:
    """``sesa eval`` on a scripted policy and an in-memory search instead of a model and a corpus."""
    from tests.sesa_eval.eval_fakes import ListSearch, ScriptedSolver

    policy = ScriptedSolver()
    with (
        mock.patch("sesa_eval.harness.make_policy", lambda cfg, tokenizer=None, log_path=None: policy),
        mock.patch("tools.backends.make_backend", lambda cfg: ListSearch()),
    ):
        yield


def _eval_args(tmp: Path, out_root: Path, *extra: str) -> list[str]:
    data = tmp / "data"
    data.mkdir(exist_ok=True)
    (data / "alpha.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    return [
        "eval",
        "--data-dir",
        str(data),
        "--out-root",
        str(out_root),
        "--judge",
        "none",
        "--no-progress",
        "--name",
        "x",
        *extra,
    ]


def _live_eval(name: str, via_symlink: bool = False, *extra: str):
    """A second ``sesa eval --name x`` while another eval writes evals/x (with a record already kept):
    refused naming the holder; the live eval's files untouched."""

    @custom(A, name, timeout_s=30)
    def row(tmp: Path) -> Outcome:
        out = tmp / "evals" / "x"
        out.mkdir(parents=True)
        (out / "records.jsonl").write_text(json.dumps({"key": "alpha/a1/off/greedy", "status": "ok"}) + "\n")
        root = tmp / "evals"
        if via_symlink:
            (tmp / "link").symlink_to(root)
            root = tmp / "link"
        with F.Procs() as procs, _scripted():
            owner = procs.owner(out, "eval")
            before = F.snapshot(out)
            res = invoke(_eval_args(tmp, root, *extra))
            lost, added = F.changes(before, out)
            if lost or added:
                return Outcome("lost" if lost else "wrong", f"changed: {lost}, added: {added}")
            if not F.alive(owner):
                return Outcome("lost", "the live eval died")
            return judge_cli(res, "error", [f"in use by pid {owner.pid}", "--name"])

    return row


def _eval_after_killed(tmp: Path) -> Outcome:
    """An eval whose previous run was killed (its lock record left behind) runs and writes its report."""
    out = tmp / "evals" / "x"
    out.mkdir(parents=True)
    (out / "owner.lock").write_text('{"pid": 999999, "cmd": "sesa eval", "since": 0}\n')
    with _scripted():
        res = invoke(_eval_args(tmp, tmp / "evals"))
    if res.exit_code == 0 and not (out / "report.json").is_file():
        return Outcome("wrong", "no report written")
    if res.exit_code == 0 and (out / "owner.lock").read_text():
        return Outcome("wrong", "the lock record was not cleared")
    return judge_cli(res, "ok")


def _file(tmp: Path) -> None:
    (tmp / "afile").write_text("precious\n")


def _file_kept(tmp: Path, res: CliResult) -> str | None:
    return None if (tmp / "afile").read_text() == "precious\n" else "the file was changed"


def _not_a_run(tmp: Path) -> None:
    (tmp / "notes").mkdir()
    (tmp / "notes" / "todo.txt").write_text("x\n")


def _nothing_made(tmp: Path, res: CliResult) -> str | None:
    made = sorted(p.name for p in (tmp / "notes").iterdir())
    return None if made == ["todo.txt"] else f"wrote into a directory that is not a run: {made}"


def _loop(tmp: Path) -> None:
    (tmp / "loop").symlink_to(tmp / "loop")


def _lock_is_dir(tmp: Path) -> None:
    run = F.run_dir(tmp, finished=True)
    (run / "owner.lock").mkdir()


def _name_is_file(tmp: Path) -> Outcome:
    """runs/NAME is a file: a new run takes NAME-<time> and leaves the file alone."""
    from sesa_graph.config import RunConfig
    from training.launch import prepare_run

    (tmp / "runs").mkdir()
    (tmp / "runs" / "same").write_text("precious\n")
    _, got, _, lock = prepare_run(RunConfig(name="same"), tmp / "runs", None)
    lock.release()
    if (tmp / "runs" / "same").read_text() != "precious\n":
        return Outcome("lost", "runs/same was changed")
    return Outcome("handled", got.name) if got.name.startswith("same-") else Outcome("wrong", str(got))


def _read_only_lock(tmp: Path) -> Outcome:
    """The owner lock of a directory that cannot be written: a clear error, never an OSError traceback."""
    from sesa_graph.owner_lock import OwnerLock, OwnerLockedError

    try:
        OwnerLock(Path("/sys/owner.lock"), lambda h: h).release()
    except OwnerLockedError as exc:
        return (
            Outcome("clear", str(exc))
            if "/sys/owner.lock" in str(exc) and "writable" in str(exc)
            else Outcome("unclear", str(exc))
        )
    return Outcome("wrong", "a lock in /sys was taken")


def _second_trainer_node(tmp: Path) -> Outcome:
    """Two `sesa trainers` on one --workdir would write the same checkpoints: the second is refused."""
    from sesa_graph.owner_lock import OwnerLockedError
    from training.trainer_node import lock_workdir

    (tmp / "work").mkdir()
    first = lock_workdir(tmp / "work")
    try:
        lock_workdir(tmp / "work").release()
    except OwnerLockedError as exc:
        ok = "--workdir" in str(exc) and f"pid {os.getpid()}" in str(exc)
        return Outcome("clear" if ok else "unclear", str(exc)[:200])
    finally:
        first.release()
    return Outcome("wrong", "a second trainer node took the same --workdir")


MORE = [
    _live_eval("eval --name x while another eval writes evals/x"),
    _live_eval("eval --name x via a symlinked --out-root while another eval writes it", True),
    _live_eval("eval --name x --overwrite while another eval writes evals/x", False, "--overwrite"),
    custom(A, "eval --name x after a killed eval of x (stale lock record)", timeout_s=30)(_eval_after_killed),
    cli(
        A,
        "eval --out-root FILE",
        lambda t: _eval_args(t, t / "afile"),
        contains=["afile"],
        setup=_file,
        check=_file_kept,
    ),
    cli(
        A,
        "train --runs-dir FILE",
        ["train", "--runs-dir", "afile"],
        contains=["--runs-dir", "afile"],
        setup=_file,
        check=_file_kept,
    ),
    cli(
        A,
        "train --runs-dir FILE/runs",
        ["train", "--runs-dir", "afile/runs"],
        contains=["--runs-dir"],
        setup=_file,
        check=_file_kept,
    ),
    cli(
        A,
        "train --runs-dir /sys/sesa-runs (not writable)",
        ["train", "--runs-dir", "/sys/sesa-runs"],
        contains=["--runs-dir", "/sys/sesa-runs"],
    ),
    custom(A, "owner lock in a directory that cannot be written")(_read_only_lock),
    cli(
        A,
        "train --resume DIR that is not a run",
        ["train", "--resume", "notes"],
        contains=["config.yaml"],
        setup=_not_a_run,
        check=_nothing_made,
    ),
    cli(A, "train --resume a symlink loop", ["train", "--resume", "loop"], contains=["loop"], setup=_loop),
    cli(
        A,
        "train --resume RUN whose owner.lock is a directory",
        lambda t: ["train", "--resume", str(t / "runs" / "r")],
        contains=["owner.lock"],
        setup=_lock_is_dir,
    ),
    custom(A, "train --name NAME where runs/NAME is a file")(_name_is_file),
    custom(A, "trainers --workdir DIR while another trainer node works in DIR")(_second_trainer_node),
]
