"""The first reliability round's bad inputs and faults (they were ``benchmarks/bad_input_checks.py``), kept as
rows so they never regress: config files and flags, run names, corpora, eval files, damaged run and bank
files, resume flags, search servers that refuse or hang, the policy server's request checks."""

from __future__ import annotations

import json
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from tests.hostile.harness import Outcome, cli, custom, invoke, judge_cli
from tools.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
CORPUS_OK = '{"id": "1", "contents": "\\"Alpha\\"\\nAlpha is a letter."}\n'


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    return path


def config(name: str, text: str | bytes, *contains: str, expect: str = "error"):
    return cli(
        "r1-config",
        name,
        lambda t: ["config", "show", "-c", write(t / "bad.yaml", text)],
        contains=contains,
        expect=expect,
    )


def show_set(name: str, pair: str, *contains: str):
    return cli("r1-config", name, ["config", "show", "--set", pair], contains=contains)


def train(name: str, *args: str, contains=()):
    return cli("r1-train", name, lambda t: ["train", "--runs-dir", t / "runs", *args], contains=contains)


def outside_runs(tmp: Path, res) -> str | Outcome | None:
    outside = [p for p in tmp.rglob("*") if p.relative_to(tmp).parts[0] not in ("runs", ".sesa-home")]
    return Outcome("lost", f"wrote {outside[:2]} outside runs/") if outside else None


def train_name(name: str, run_name: str):
    return cli(
        "r1-train",
        name,
        lambda t: ["train", "--runs-dir", t / "runs", "--name", run_name, "--steps", "1"],
        contains=["name"],
        check=outside_runs,
    )


def corpus(name: str, text: str | bytes, *contains: str):
    return cli(
        "r1-search",
        name,
        lambda t: ["search", "query", "alpha", "--corpus", write(t / "corpus.jsonl", text)],
        contains=contains,
    )


def markup_printed(tmp: Path, res) -> str | None:
    return None if "[red]is[/red]" in res.stdout else f"markup eaten: {res.stdout[-120:]!r}"


def _hanging_port() -> int:
    """A server that accepts connections and never answers (closed with the process)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    held = []
    threading.Thread(target=lambda: [held.append(s.accept()) for _ in iter(int, 1)], daemon=True).start()
    return s.getsockname()[1]


def eval_data(name: str, text: str | bytes, *contains: str):
    def args(t: Path):
        write(t / "data" / "nq.jsonl", text)
        return ["eval", "--data-dir", t / "data", "--datasets", "nq", "--limit", "2", "--engine", "local"] + [
            "--out-root",
            t / "evals",
            "--name",
            "bad",
        ]

    def no_empty_dir(t: Path, res) -> str | None:
        left = t / "evals" / "bad"
        return f"left an empty {left.name}/" if left.is_dir() and not any(left.iterdir()) else None

    return cli("r1-eval", name, args, contains=contains, check=no_empty_dir, timeout_s=60)


def make_bank(tmp: Path) -> Path:
    from sesa_graph.memory.bank import SkillBank
    from sesa_graph.memory.config import MemoryConfig

    SkillBank.create(tmp / "bank", MemoryConfig()).close()  # the shipped seed skills
    return tmp / "bank"


def bank_damaged(file: str, text: str):
    def args(t: Path):
        write(make_bank(t) / file, text)
        return ["bank", "show", t / "bank"]

    return cli("r1-bank", f"damaged {file}", args, contains=[file])


@custom("r1-bank", "second writer while one holds the bank", timeout_s=60)
def bank_second_writer(tmp: Path) -> Outcome:
    import subprocess

    from sesa_graph.memory.bank import SkillBank
    from sesa_graph.memory.config import MemoryConfig

    bank = make_bank(tmp)
    code = (
        "import sys; from sesa_graph.memory.bank import SkillBank; from sesa_graph.memory.config import "
        f"MemoryConfig; b = SkillBank.open({str(bank)!r}, MemoryConfig()); print('opened'); sys.exit(0)"
    )
    with SkillBank.open(bank, MemoryConfig()):
        p = subprocess.run(
            [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60
        )
    if "opened" in p.stdout:
        return Outcome("lost", "a second writer opened the bank")
    last = (p.stderr.strip().splitlines() or [""])[-1]
    return Outcome("clear", last[:200]) if "pid" in p.stderr else Outcome("unclear", p.stderr[-150:])


def _sys_path(*parts: str) -> None:
    path = str(ROOT.joinpath("tests", *parts))
    if path not in sys.path:
        sys.path.insert(0, path)


@custom("r1-bank", "show while a commit is pending")
def bank_pending(tmp: Path) -> Outcome:
    import pytest

    _sys_path("memory")
    from bank_faults import Killed, arm, grown_bank, second_commit

    mp = pytest.MonkeyPatch()
    bank, queue = grown_bank(tmp / "bank")
    arm(bank, mp, 8)
    try:
        second_commit(bank, queue)
    except Killed:
        pass
    bank.close()
    mp.undo()
    res = invoke(["bank", "show", tmp / "bank"])

    def warned(t, r):
        return None if "pending" in r.stderr else "no warning of the pending commit"

    return judge_cli(res, "ok", check=warned)


def run_metrics(name: str, mutate: str, *contains: str):
    def args(t: Path):
        from tests.sesa_runs.conftest import build_run

        run = build_run(t / "runs")
        m = run / "metrics.jsonl"
        if mutate == "torn":
            m.write_text(m.read_text() + '{"step": 9, "solver_rew')
        else:
            lines = m.read_text().splitlines()
            lines.insert(1, "{not json")
            m.write_text("\n".join(lines) + "\n")
        return ["report", run]

    return cli(
        "r1-runs", name, args, contains=contains, expect="ok" if mutate == "torn" else "error", timeout_s=90
    )


def resume_with(name: str, *flags: str, contains=()):
    def args(t: Path):
        _sys_path("training")
        from resume_fixtures import make_run

        run_dir = make_run(t, steps=3, committed=3, uncommitted_line=False, final=True)
        (t / "before").write_bytes((run_dir / "metrics.jsonl").read_bytes())
        return ["train", "--resume", run_dir, *flags]

    def kept(t: Path, res) -> Outcome | None:
        now = next(t.rglob("metrics.jsonl")).read_bytes()
        return (
            None
            if now.startswith((t / "before").read_bytes())
            else Outcome("lost", "metrics.jsonl lost lines")
        )

    return cli("r1-resume", name, args, contains=contains, check=kept)


def _http_search(port: Callable[[], int]) -> Callable[[Path], list]:
    """``sesa search`` against the server ``port()`` starts, without retries."""

    def args(t: Path) -> list:
        url = f"http://127.0.0.1:{port()}"
        return ["search", "query", "alpha", "-b", "http", "--url", url, "--retries", "0"]

    return args


@custom("r1-resume", "torn last line of metrics.jsonl, finished run")
def torn_metrics_resume(tmp: Path) -> Outcome:
    _sys_path("training")
    from resume_fixtures import make_run

    run_dir = make_run(
        tmp, steps=3, committed=3, uncommitted_line=False, final=True, torn=b'{"step": 3, "ite'
    )
    (run_dir / "policies" / "proposer").mkdir()  # finished: both roles' final policies are complete
    (run_dir / "policies" / "proposer" / ".complete").write_text("ok\n")
    return judge_cli(invoke(["train", "--resume", run_dir]), "ok")


@custom("r1-search", "damaged BM25 cache")
def bm25_cache_damaged(tmp: Path) -> Outcome:
    import os

    corpus_file = write(
        tmp / "c.jsonl", CORPUS_OK + '{"id": "2", "contents": "\\"Beta\\"\\nBeta is next."}\n'
    )
    first = invoke(["search", "query", "beta", "--corpus", corpus_file])
    if first.exit_code != 0:
        return judge_cli(first, "ok")
    for f in (Path(os.environ["SESA_HOME"]) / "bm25").rglob("*"):
        if f.is_file() and f.suffix in (".npy", ".json") and "manifest" not in f.name:
            f.write_bytes(b"garbage")

    def right(t, r):
        return None if "Beta" in r.stdout else f"wrong result: {r.stdout[-120:]!r}"

    return judge_cli(invoke(["search", "query", "beta", "--corpus", corpus_file]), "ok", check=right)


@custom("r1-launch", "launch_gpu.sh with dev-mode endpoints on 0.0.0.0")
def launch_public_dev_mode(tmp: Path) -> Outcome:
    import os
    import subprocess

    from tests.hostile.harness import CliResult

    p = subprocess.run(
        ["bash", str(ROOT / "scripts" / "launch_gpu.sh"), str(ROOT / "configs" / "qwen3-4b-h200.yaml")],
        check=False,
        capture_output=True,
        text=True,
        timeout=25,
        env={**os.environ, "VLLM_HOST": "0.0.0.0"},
    )
    return judge_cli(CliResult(p.returncode, p.stdout, p.stderr), "error", ["0.0.0.0"])


ROWS = [
    config("malformed YAML (unclosed bracket)", "solver: {max_turns: 3\n", "bad.yaml:2"),
    config("duplicate key", "solver:\n  max_turns: 3\n  max_turns: 4\n", "bad.yaml", "max_turns"),
    config("bool for an int (max_turns: true)", "solver:\n  max_turns: true\n", "max_turns"),
    config("fraction for an int (max_turns: 2.5)", "solver:\n  max_turns: 2.5\n", "max_turns"),
    config("unknown key", "solver:\n  max_turnz: 3\n", "max_turnz"),
    config("top level is a list", "- 1\n- 2\n", "bad.yaml"),
    config("bad UTF-8 in the file", b"name: \xff\xfe\n", "bad.yaml"),
    config("empty file (all defaults)", "", expect="ok"),
    cli(
        "r1-config",
        "missing file",
        lambda t: ["config", "show", "-c", t / "nope.yaml"],
        contains=["nope.yaml"],
    ),
    show_set("--set without =", "solver.max_turns", "--set"),
    show_set("--set wrong type", "solver.max_turns=x", "--set", "solver.max_turns"),
    show_set("--set under a scalar (name.sub=1)", "name.sub=1", "name"),
    show_set("--set unknown key", "solver.nope=1", "solver.nope"),
    show_set("--set out of range (max_turns=0)", "solver.max_turns=0", "--set", "max_turns"),
    train("--steps 0", "--steps", "0", contains=["--steps"]),
    train("--bank maybe", "--bank", "maybe", contains=["--bank"]),
    train("--engine gpu", "--engine", "gpu", contains=["--engine"]),
    train("--proposer-reward 2p", "--proposer-reward", "2p", contains=["--proposer-reward"]),
    train_name("run name ../x", "../x"),
    train_name("run name absolute path", "/tmp/sesa-abs-run"),
    train_name('run name ""', ""),
    cli(
        "r1-train", "--resume a path that is no run", lambda t: ["train", "--resume", t], contains=["resume"]
    ),
    corpus("corpus with bad UTF-8", b'{"id": "1", "contents": "\xff"}\n', "corpus.jsonl"),
    corpus("corpus line not JSON", CORPUS_OK + "{oops\n", "corpus.jsonl", "2"),
    corpus("corpus duplicate ids", CORPUS_OK + CORPUS_OK, "corpus.jsonl", "1"),
    corpus("corpus null id", '{"id": null, "contents": "x"}\n' + CORPUS_OK, "corpus.jsonl"),
    corpus("corpus row without contents", '{"id": "9"}\n' + CORPUS_OK, "corpus.jsonl"),
    cli(
        "r1-search",
        "missing corpus file",
        lambda t: ["search", "query", "a", "--corpus", t / "no.jsonl"],
        contains=["no.jsonl"],
    ),
    cli("r1-search", "-k 0", ["search", "query", "a", "-k", "0"], contains=["-k"]),
    cli(
        "r1-search",
        "markup in documents and query",
        lambda t: [
            "search",
            "query",
            "alpha [/]",
            "--corpus",
            write(
                t / "c.jsonl",
                '{"id": "1", "contents": "\\"Alpha [/] t\\"\\nAlpha [red]is[/red] a [link=x]l[/link]."}\n',
            ),
        ],
        expect="ok",
        check=markup_printed,
    ),
    cli("r1-search", "http: port refused", _http_search(free_port), expect="service", contains=["127.0.0.1"]),
    cli(
        "r1-search",
        "http: server accepts, never answers",
        _http_search(_hanging_port),
        expect="service",
        contains=["127.0.0.1"],
        timeout_s=40,
    ),
    eval_data("eval file with bad UTF-8", b'{"id": "1", "question": "\xff"}\n', "nq.jsonl"),
    eval_data(
        "eval line not JSON",
        json.dumps({"id": "1", "question": "q?", "golden_answers": ["a"]}) + "\n{x\n",
        "nq.jsonl",
        "2",
    ),
    eval_data("eval row without answers", json.dumps({"id": "1", "question": "q?"}) + "\n", "nq.jsonl"),
    eval_data(
        "eval answers not a list",
        json.dumps({"id": "1", "question": "q?", "golden_answers": 5}) + "\n",
        "nq.jsonl",
    ),
    run_metrics("metrics.jsonl torn last line (report)", "torn"),
    run_metrics("metrics.jsonl bad middle line (report)", "bad", "metrics.jsonl", "2"),
    cli("r1-runs", "trace of a missing run", lambda t: ["trace", t / "nope"], contains=["nope"]),
    cli("r1-bank", "show a missing bank", lambda t: ["bank", "show", t / "nope"], contains=["nope"]),
    bank_damaged("state.json", "{trunc"),
    bank_damaged("queue.json", "[1, 2"),
    bank_damaged("journal.json", "{}"),
    bank_damaged("skills.jsonl", "{oops\n"),
    bank_second_writer,
    bank_pending,
    resume_with("--steps below the committed steps", "--steps", "2", contains=["--steps"]),
    resume_with("--bank changed on --resume", "--bank", "off", contains=["--bank"]),
    resume_with(
        "--set of a method setting on --resume",
        "--set",
        "solver.max_turns=9",
        contains=["--set solver.max_turns"],
    ),
    resume_with("--runs-dir with --resume", "--runs-dir", "elsewhere", contains=["--runs-dir"]),
    torn_metrics_resume,
    bm25_cache_damaged,
    launch_public_dev_mode,
]
