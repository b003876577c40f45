"""Outputs never clobber inputs, and user errors in the reading and reporting commands: ``-o``/``--html``
over an existing file (refused without --force), onto a directory, inside a bank, run or eval (refused even
with --force), ``--out-root`` a file, a disk that refuses the write, damaged parquet shards, a run without
metrics.jsonl, negative counts, an out-of-range port."""

from __future__ import annotations

import errno
import hashlib
from pathlib import Path

from tests.hostile import hostile_dirs as H
from tests.hostile.harness import CliResult, Outcome, cli, custom, invoke, judge_cli

A = "outputs"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _kept(*rel: str):
    """Setup + check: the files at ``rel`` (under the row's directory) are byte-for-byte as before, and a
    bank under ``bank/`` still opens (``sesa bank show``)."""
    before: dict[str, str] = {}

    def setup(tmp: Path) -> None:
        H.bank(tmp)
        H.run(tmp)
        H.evaluation(tmp)
        (tmp / "existing.yaml").write_text("mine: true\n")
        (tmp / "a-dir").mkdir()
        (tmp / "a-file").write_text("x")
        before.clear()
        before.update({r: _digest(tmp / r) for r in rel})

    def check(tmp: Path, res: CliResult) -> str | Outcome | None:
        changed = [r for r, d in before.items() if not (tmp / r).is_file() or _digest(tmp / r) != d]
        if changed:
            return Outcome("lost", f"changed: {changed}")
        shown = invoke(["bank", "show", tmp / "bank"])
        if shown.exit_code != 0:
            return Outcome("lost", f"the bank no longer opens: {shown.stderr.strip()[:120]}")
        return None

    return setup, check


def _row(name: str, argv, kept: tuple[str, ...] = (), contains=(), expect="error"):
    setup, check = _kept(*kept)
    return cli(A, name, argv, setup=setup, check=check, contains=contains, expect=expect)


def _export(*extra):
    return lambda t: ["bank", "export", t / "bank", *extra]


def _run_with(damage):
    def setup(tmp: Path) -> None:
        damage(H.run(tmp))

    return setup


def _damaged_shard(run: Path) -> None:
    shard = run / "trajectories" / "step-00001" / "solver.parquet"
    shard.write_bytes(shard.read_bytes()[: len(shard.read_bytes()) // 2])


def _junk_shard(run: Path) -> None:
    (run / "trajectories" / "step-00002" / "proposer.parquet").write_bytes(b"PAR1 not a parquet file")


def _metrics_gone(tmp: Path, res: CliResult) -> str | None:
    html = (tmp / "runs" / "tiny" / "report.html").read_text()
    if "metrics.jsonl is missing" not in res.stderr:
        return "sesa report did not say that metrics.jsonl is missing"
    if "metrics.jsonl" not in html or "is missing" not in html:
        return "report.html has no note that metrics.jsonl is missing"
    return None


def _eval_row(name: str, out_root, kept: tuple[str, ...], contains):
    """A ``sesa eval --out-root`` row."""
    return _row(name, _eval_argv(out_root), kept, contains)


def _eval_argv(out_root):
    return lambda t: [
        "eval",
        "--data-dir",
        t,
        "--model",
        "embedded",
        "--limit",
        "1",
        "--out-root",
        out_root(t),
    ]


@custom(A, "bank export -o FILE on a full disk (ENOSPC)")
def _full_disk(tmp: Path) -> Outcome:
    import unittest.mock

    from sesa_graph.memory import skill

    H.bank(tmp)

    def full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    with unittest.mock.patch.object(skill, "write_yaml_atomic", full):
        res = invoke(["bank", "export", tmp / "bank", "-o", tmp / "out.yaml"])
    return judge_cli(res, "error", ["out.yaml", "No space left"])


@custom(A, "report on a full disk (ENOSPC writing report.html)")
def _report_full_disk(tmp: Path) -> Outcome:
    import unittest.mock

    run = H.run(tmp)
    real = Path.write_text

    def full(self, *a, **kw):
        if self.name.endswith("report.html.tmp"):
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return real(self, *a, **kw)

    with unittest.mock.patch.object(Path, "write_text", full):
        res = invoke(["report", run])
    return judge_cli(res, "error", ["report.html", "No space left"])


@custom(A, "trace --html on a read-only file system (EROFS)")
def _html_readonly(tmp: Path) -> Outcome:
    import unittest.mock

    run = H.run(tmp)
    real = Path.write_text

    def readonly(self, *a, **kw):
        if self.name == "t.html":
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        return real(self, *a, **kw)

    with unittest.mock.patch.object(Path, "write_text", readonly):
        res = invoke(["trace", run, "-r", H.RUN_ROLLOUT, "--html", tmp / "t.html"])
    return judge_cli(res, "error", ["t.html", "Read-only"])


ROWS = [
    # ---- sesa bank export / mine -o -------------------------------------------------------------------------
    _row(
        "bank export -o BANK/state.json",
        _export("-o", "bank/state.json"),
        ("bank/state.json",),
        ["skill bank"],
    ),
    _row(
        "bank export -o BANK/state.json --force",
        _export("-o", "bank/state.json", "--force"),
        ("bank/state.json",),
        ["skill bank"],
    ),
    _row(
        "bank export --format jsonl -o BANK/skills.jsonl --force",
        _export("--format", "jsonl", "-o", "bank/skills.jsonl", "--force"),
        ("bank/skills.jsonl",),
        ["skill bank"],
    ),
    _row(
        "bank export -o BANK/snapshots/v0001.jsonl --force",
        _export("-o", "bank/snapshots/v0001.jsonl", "--force"),
        ("bank/snapshots/v0001.jsonl",),
        ["skill bank"],
    ),
    _row(
        "bank export -o an existing file",
        _export("-o", "existing.yaml"),
        ("existing.yaml",),
        ["existing.yaml", "--force"],
    ),
    _row(
        "bank export --format jsonl -o an existing file",
        _export("--format", "jsonl", "-o", "existing.yaml"),
        ("existing.yaml",),
        ["--force"],
    ),
    cli(
        A,
        "bank export -o an existing file --force",
        _export("-o", "existing.yaml", "--force"),
        expect="ok",
        setup=_kept()[0],
        check=lambda t, r: None if "skills:" in (t / "existing.yaml").read_text() else "not replaced",
    ),
    _row("bank export -o a directory", _export("-o", "a-dir"), (), ["a-dir", "directory"]),
    _row(
        "bank export -o under a file (a-file/x.yaml)", _export("-o", "a-file/x.yaml"), ("a-file",), ["a-file"]
    ),
    _row(
        "bank export -o RUN/config.yaml --force",
        _export("-o", "runs/tiny/config.yaml", "--force"),
        ("runs/tiny/config.yaml",),
        ["run"],
    ),
    _row(
        "bank export -o RUN/new.yaml (a new file inside a run)",
        _export("-o", "runs/tiny/new.yaml"),
        ("runs/tiny/config.yaml",),
        ["run"],
    ),
    _row(
        "bank export -o EVAL/report.json --force",
        _export("-o", "evals/tiny-eval/report.json", "--force"),
        ("evals/tiny-eval/report.json",),
        ["eval"],
    ),
    _row(
        "bank export -o RUN/bank/state.json through a symlink",
        lambda t: (
            Path(t / "link").symlink_to(t / "runs/tiny/bank"),
            ["bank", "export", t / "bank", "-o", t / "link/state.json", "--force"],
        )[1],
        ("runs/tiny/bank/state.json",),
        ["skill bank"],
    ),
    _full_disk,
    _row(
        "bank mine -o an existing priming file",
        ["bank", "mine", "runs/tiny", "-o", "existing.yaml", "--distiller", "no.such:factory"],
        ("existing.yaml",),
        ["--force"],
    ),
    _row(
        "bank mine -o BANK/skills.jsonl --force",
        ["bank", "mine", "runs/tiny", "-o", "bank/skills.jsonl", "--force", "--distiller", "no.such:factory"],
        ("bank/skills.jsonl",),
        ["skill bank"],
    ),
    # ---- sesa bank show -n ----------------------------------------------------------------------------------
    _row("bank show -n -5", ["bank", "show", "bank", "-n", "-5"], (), ["-5"]),
    # ---- sesa trace ----------------------------------------------------------------------------------------
    _row(
        "trace --html over an existing file",
        lambda t: ["trace", t / "runs/tiny", "-r", H.RUN_ROLLOUT, "--html", "existing.yaml"],
        ("existing.yaml",),
        ["--force"],
    ),
    _row(
        "trace --html RUN/config.yaml --force",
        lambda t: [
            "trace",
            t / "runs/tiny",
            "-r",
            H.RUN_ROLLOUT,
            "--html",
            t / "runs/tiny/config.yaml",
            "--force",
        ],
        ("runs/tiny/config.yaml",),
        ["run"],
    ),
    _row(
        "trace --html EVAL/records.jsonl --force",
        lambda t: [
            "trace",
            t / "evals/tiny-eval",
            "-r",
            H.EVAL_ROLLOUT,
            "--html",
            t / "evals/tiny-eval/records.jsonl",
            "--force",
        ],
        ("evals/tiny-eval/records.jsonl",),
        ["eval"],
    ),
    _row(
        "trace --html a directory",
        lambda t: ["trace", t / "runs/tiny", "-r", H.RUN_ROLLOUT, "--html", "a-dir"],
        (),
        ["a-dir"],
    ),
    _html_readonly,
    _row("trace --limit 0", lambda t: ["trace", t / "runs/tiny", "--limit", "0"], (), ["--limit"]),
    _row("trace --limit -3", lambda t: ["trace", t / "runs/tiny", "--limit", "-3"], (), ["--limit"]),
    cli(
        A,
        "trace: a truncated parquet shard",
        lambda t: ["trace", t / "runs/tiny"],
        setup=_run_with(_damaged_shard),
        contains=["solver.parquet"],
    ),
    cli(
        A,
        "trace: a junk file named proposer.parquet",
        lambda t: ["trace", t / "runs/tiny"],
        setup=_run_with(_junk_shard),
        contains=["proposer.parquet"],
    ),
    # ---- sesa report ---------------------------------------------------------------------------------------
    cli(
        A,
        "report: a truncated parquet shard",
        lambda t: ["report", t / "runs/tiny"],
        setup=_run_with(_damaged_shard),
        contains=["solver.parquet"],
        timeout_s=60,
    ),
    cli(
        A,
        "report: metrics.jsonl gone",
        lambda t: ["report", t / "runs/tiny"],
        expect="ok",
        setup=_run_with(lambda r: (r / "metrics.jsonl").unlink()),
        check=_metrics_gone,
        timeout_s=60,
    ),
    _report_full_disk,
    _row("report: a file instead of a run directory", ["report", "a-file"], (), ["a-file is a file"]),
    # ---- sesa eval --out-root ------------------------------------------------------------------------------
    _eval_row("eval --out-root a file", lambda t: t / "a-file", ("a-file",), ["--out-root", "a-file"]),
    _eval_row(
        "eval --out-root under a file",
        (lambda t: t / "a-file" / "evals"),
        ("a-file",),
        ["--out-root"],
    ),
    _eval_row(
        "eval --out-root inside a skill bank",
        (lambda t: t / "bank"),
        ("bank/state.json",),
        ["--out-root", "skill bank"],
    ),
    _eval_row(
        "eval --out-root inside another eval",
        (lambda t: t / "evals/tiny-eval"),
        ("evals/tiny-eval/records.jsonl",),
        ["--out-root", "eval"],
    ),
    # ---- sesa search serve --port --------------------------------------------------------------------------
    cli(A, "search serve --port 70000", ["search", "serve", "--port", "70000"], contains=["--port", "70000"]),
    cli(A, "search serve --port -1", ["search", "serve", "--port", "-1"], contains=["--port"]),
    cli(A, "search serve --port 0", ["search", "serve", "--port", "0"], contains=["--port"]),
]


def _refusing(err: int, text: str, name: str):
    """A replacement for a writer taking the path first: it raises OSError ``err`` for that path."""

    def write(path, *a, **kw):
        raise OSError(err, text, str(path))

    return write


def _eval_fault(name: str, patches: dict, contains: list[str]):
    @custom(A, name)
    def row(tmp: Path) -> Outcome:
        res = H.scripted_eval(tmp, ["--no-progress"], patches=patches)
        return judge_cli(res, "error", contains, tmp=tmp)

    return row


def _full_append(store, rec):
    """RecordStore.append on a full disk: the first record's write raises ENOSPC."""
    raise OSError(errno.ENOSPC, "No space left on device", str(store.path))


ROWS += [
    _eval_fault(
        "eval: a full disk writing records.jsonl (ENOSPC)",
        {"sesa_eval.records.RecordStore.append": _full_append},
        ["records.jsonl", "No space left", "resume"],
    ),
    _eval_fault(
        "eval: a read-only disk writing the report (EROFS)",
        {"sesa_eval.report_markdown.write_report": _refusing(errno.EROFS, "Read-only file system", "report")},
        ["Read-only file system"],
    ),
]
