"""One owner per run and per eval, where a run lives, resume checks its config, run names.

A second ``sesa train --resume`` of a live run (by any path) or a second ``sesa eval`` of one name is refused
naming the holder and changes nothing -- no file, no signal to the live run's processes; stale-process
clean-up stops only processes provably the run's own; run directories are absolute whatever the working
directory; a hand-edited ``config.yaml`` is refused on resume; bad run names and junk in ``sync/`` are clear
errors or notes. The "live run" is a second process holding the real owner lock, with look-alike trainer
processes recorded in ``sync/trainer_pids.json`` that must survive."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from tests.hostile import hostile_dirs as H
from tests.hostile import ownership_fixtures as F
from tests.hostile.harness import CliResult, Outcome, cli, custom, invoke, judge_cli
from tests.hostile.ownership_more import MORE

A = "ownership"


def _live_resume(name: str, path, *extra: str):
    """``sesa train --resume PATH`` (``path(tmp, run)``) while another process owns the run and its two
    trainers run: refused naming the holder, every file and process as it was."""

    @custom(A, name, timeout_s=20)
    def row(tmp: Path) -> Outcome:
        run = F.run_dir(tmp)
        with F.Procs() as procs:
            owner = procs.owner(run)
            trainers = {
                r: procs.sleeper("-m", "training.trainer", str(run), "--role", r)
                for r in ("solver", "proposer")
            }
            F.record_trainers(run, trainers)
            before = F.snapshot(run)
            res = invoke(["train", "--resume", str(path(tmp, run)), *extra])
            lost, added = F.changes(before, run)
            if lost or added:
                return Outcome("lost" if lost else "wrong", f"changed: {lost}, added: {added}")
            dead = [r for r, p in trainers.items() if not F.alive(p)] + ([] if F.alive(owner) else ["owner"])
            if dead:
                return Outcome("lost", f"the live run's processes were killed: {dead}")
            return judge_cli(
                res, "error", [f"in use by pid {owner.pid}", "sesa train --resume", "nothing was changed"]
            )

    return row


def _symlink(tmp: Path, run: Path) -> Path:
    (tmp / "link").symlink_to(run)
    return tmp / "link"


def _symlinked_parent(tmp: Path, run: Path) -> Path:
    (tmp / "elsewhere").symlink_to(run.parent)
    return tmp / "elsewhere" / "r"


def _cleanup(name: str, make, expect_killed: set[str], finished: bool = False):
    """A resume of an unowned run (its owner is dead) whose ``sync/trainer_pids.json`` names processes made by
    ``make(procs, run)`` ({label: process}): only those in ``expect_killed`` may be stopped."""

    @custom(A, name, timeout_s=20)
    def row(tmp: Path) -> Outcome:
        from training.launch import prepare_run

        run = F.run_dir(tmp, finished=finished)
        with F.Procs() as procs:
            made = make(procs, run)
            _, got, _, lock = prepare_run(None, tmp / "runs", run)
            lock.release()
            for lbl in expect_killed:
                try:
                    made[lbl].wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass  # still alive: judged below
            wrong = [lbl for lbl, p in made.items() if F.alive(p) == (lbl in expect_killed)]
            if wrong:
                return Outcome(
                    "lost" if set(wrong) - expect_killed else "wrong", f"killed/kept wrongly: {wrong}"
                )
            if got != run.resolve():
                return Outcome("wrong", f"run directory {got}, not {run.resolve()}")
            return Outcome("handled", f"stopped {sorted(expect_killed) or 'nothing'}")

    return row


def _own_trainer(procs: F.Procs, run: Path) -> dict:
    made = {"solver": procs.sleeper("-m", "training.trainer", str(run.resolve()), "--role", "solver")}
    F.record_trainers(run, made)
    return made


def _unrelated(procs: F.Procs, run: Path) -> dict:
    made = {"solver": procs.sleeper("some-other-program", str(run.resolve()))}
    F.record_trainers(run, made)
    return made


def _reused_pid(procs: F.Procs, run: Path) -> dict:
    made = {"solver": procs.sleeper("-m", "training.trainer", str(run.resolve()))}
    F.record_trainers(run, made, start={"solver": "1"})  # the recorded process started at another time
    return made


def _other_runs_trainer(procs: F.Procs, run: Path) -> dict:
    other = run.parent / "other"
    other.mkdir()
    made = {"solver": procs.sleeper("-m", "training.trainer", str(other.resolve()))}
    F.record_trainers(run, made)
    return made


def _junk_pids(text: str):
    def make(procs: F.Procs, run: Path) -> dict:
        made = {"bystander": procs.sleeper("-m", "training.trainer", str(run.resolve()))}
        (run / "sync" / "trainer_pids.json").write_text(text)
        return made

    return make


def _stale_lock(tmp: Path) -> None:
    run = F.run_dir(tmp, finished=True)
    (run / "owner.lock").write_text('{"pid": 999999, "start": "1", "cmd": "sesa train x", "since": 0}\n')


def _stale_taken_over(tmp: Path, res: CliResult) -> str | None:
    text = (tmp / "runs" / "r" / "owner.lock").read_text()
    if text:
        return f"the dead owner's record is still there: {text!r}"
    return None if "nothingtoresume" in H.unfolded(res.stdout) else "the run was not taken over"


def _no_runs(tmp: Path, res: CliResult) -> str | None:
    runs = tmp / "runs"
    made = sorted(p.name for p in runs.iterdir()) if runs.is_dir() else []
    return f"run directories made: {made}" if made else None


def _name(name: str, value: str, *contains: str):
    return cli(
        A,
        name,
        lambda t: ["train", "--runs-dir", str(t / "runs"), "--name", value, "--engine", "local"],
        contains=["--name", *contains],
        check=_no_runs,
    )


def _edited(name: str, edit, *contains: str, expect: str = "error"):
    """``sesa train --resume`` of a finished run whose config.yaml ``edit(dict)`` changed after it was
    recorded: refused naming each key (the file as it was), or (no setting changed) taken."""

    def setup(tmp: Path) -> None:
        run = F.run_dir(tmp, finished=True)
        path = run / "config.yaml"
        data = yaml.safe_load(path.read_text())
        text = edit(data)
        path.write_text(text if isinstance(text, str) else yaml.safe_dump(data))
        (tmp / "before.yaml").write_bytes(path.read_bytes())

    def check(tmp: Path, res: CliResult) -> str | None:
        run = tmp / "runs" / "r"
        if (run / "config.yaml").read_bytes() != (tmp / "before.yaml").read_bytes():
            return "config.yaml was rewritten"
        if expect == "error" and (
            (run / "superseded").exists() or '"resume"' in (run / "metrics.jsonl").read_text()
        ):
            return "a refused resume wrote into the run"
        return None

    return cli(
        A,
        name,
        lambda t: ["train", "--resume", str(t / "runs" / "r")],
        expect=expect,
        contains=contains,
        setup=setup,
        check=check,
    )


def _set(key: str, value):
    def edit(data: dict):
        section, leaf = key.split(".")
        data[section][leaf] = value

    return edit


def _two(data: dict) -> None:
    data["rewards"]["proposer"], data["memory"]["mode"], data["judge"]["kind"] = "one_minus_p", "off", "model"


def _comment_only(data: dict) -> str:
    return "# tuned by hand, no setting changed\n" + yaml.safe_dump(data, sort_keys=True)


def _sync(name: str, file: str, text: str, expect: str, *contains: str):
    def setup(tmp: Path) -> None:
        run = F.run_dir(tmp, finished=True)
        (run / "sync" / file).write_text(text)

    def noted(tmp: Path, res: CliResult) -> str | None:
        if expect == "ok" and "not commit records" not in res.stdout:
            return "the junk file was ignored without a note"
        return None

    return cli(
        A,
        name,
        lambda t: ["train", "--resume", str(t / "runs" / "r")],
        expect=expect,
        contains=contains,
        setup=setup,
        check=noted,
    )


def _contested_name(tmp: Path) -> Outcome:
    """Another process is starting runs/NAME (owns the still empty directory): this one takes NAME-<time>."""
    from sesa_graph.config import RunConfig
    from training.launch import prepare_run

    (tmp / "runs" / "same").mkdir(parents=True)
    with F.Procs() as procs:
        owner = procs.owner(tmp / "runs" / "same")
        _, got, _, lock = prepare_run(RunConfig(name="same"), tmp / "runs", None)
        lock.release()
        if got.parent != (tmp / "runs").resolve() or not got.name.startswith("same-"):
            return Outcome("wrong", f"took {got}")
        if any(p.name != "owner.lock" for p in (tmp / "runs" / "same").iterdir()) or not F.alive(owner):
            return Outcome("lost", "wrote into the directory another process owns")
        return Outcome("handled", got.name)


def _relative_runs_dir(tmp: Path) -> Outcome:
    """--runs-dir runs from a working directory outside the project: the run and everything passed on is
    absolute, under that directory (not the project's runs/)."""
    import os

    from sesa_graph.config import RunConfig
    from training.launch import prepare_run

    (tmp / "elsewhere").mkdir()
    os.chdir(tmp / "elsewhere")  # the runner restores the row's working directory
    _, got, _, lock = prepare_run(RunConfig(name="tiny-cpu"), Path("runs"), None)
    lock.release()
    want = (tmp / "elsewhere" / "runs" / "tiny-cpu").resolve()
    if got != want or not got.is_absolute():
        return Outcome("wrong", f"run directory {got}, not {want}")
    if (
        not (got / "config.recorded.json").is_file()
        or yaml.safe_load((got / "config.yaml").read_text())["name"] != "tiny-cpu"
    ):
        return Outcome("wrong", "config or its record missing")
    return Outcome("handled", str(got))


ROWS = [
    _live_resume("train --resume RUN while another sesa train owns it", lambda t, r: r),
    _live_resume("train --resume SYMLINK-TO-RUN while owned", _symlink),
    _live_resume("train --resume via a symlinked runs dir while owned", _symlinked_parent),
    _live_resume("train --resume RUN/ (trailing slash) while owned", lambda t, r: f"{r}/"),
    _live_resume("train --resume runs/x/../r (relative) while owned", lambda t, r: "runs/x/../r"),
    _live_resume("train --resume RUN --steps 9 while owned", lambda t, r: r, "--steps", "9"),
    _cleanup("resume kills only its own recorded trainer (pid+start+cmd)", _own_trainer, {"solver"}),
    _cleanup("trainer_pids.json names an unrelated live process", _unrelated, set()),
    _cleanup("trainer_pids.json pid reused (other start time)", _reused_pid, set()),
    _cleanup("trainer_pids.json names another run's trainer", _other_runs_trainer, set()),
    _cleanup("trainer_pids.json not JSON", _junk_pids("{not json"), set()),
    _cleanup(
        "trainer_pids.json pids 1, -1, true, 'x'", _junk_pids('{"a": 1, "b": -1, "c": true, "d": "x"}'), set()
    ),
    _cleanup("trainer_pids.json legacy ints naming a bystander", _junk_pids('{"solver": 1}'), set()),
    cli(
        A,
        "train --resume RUN whose dead owner left its lock record",
        lambda t: ["train", "--resume", str(t / "runs" / "r")],
        expect="ok",
        setup=_stale_lock,
        check=_stale_taken_over,
    ),
    custom(A, "train --name NAME while another process starts runs/NAME")(_contested_name),
    custom(A, "train --runs-dir runs from a cwd outside the project")(_relative_runs_dir),
    _name("train --name with a newline", "a\nb", "control characters"),
    _name("train --name 300 characters", "n" * 300, "at most"),
    _name("train --name with a slash", "a/b", "plain directory name"),
    _name("train --name empty", "", "plain directory name"),
    _name("train --name ..", "..", "plain directory name"),
    _name("train --name with ESC sequences", "\x1b]0;pwned\x07run", "control characters"),
    _edited(
        "hand-edited solver.max_turns on resume",
        _set("solver.max_turns", 9),
        "solver.max_turns",
        "recorded",
        "--set",
    ),
    _edited(
        "hand-edited reward, bank mode and judge on resume",
        _two,
        "rewards.proposer",
        "memory.mode",
        "judge.kind",
    ),
    _edited(
        "hand-edited safe key train.wait_timeout_s on resume",
        _set("train.wait_timeout_s", 5.0),
        "train.wait_timeout_s",
    ),
    _edited("config.yaml with only a comment added on resume", _comment_only, expect="ok"),
    _sync("junk sync/committed-x.json on resume", "committed-x.json", "{}", "ok"),
    _sync("sync/committed-1e3.json on resume", "committed-1e3.json", "{}", "ok"),
    _sync(
        "sync/committed-1.json not JSON on resume", "committed-1.json", "{torn", "error", "committed-1.json"
    ),
    _sync(
        "sync/committed-2.json a JSON list on resume",
        "committed-2.json",
        "[1, 2]",
        "error",
        "committed-2.json",
    ),
    *MORE,
]
