"""The checks `bad_inputs.py` runs: one per bad input or fault, grouped by area.

Each ``run(tmp)`` prepares what it needs under ``tmp`` and returns the command's Result, or a verdict string
``"VERDICT: note"`` when the check has to look at more than the exit code.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from pathlib import Path

from bad_inputs import ROOT, Check, sesa

sys.path.insert(0, str(ROOT / "tests" / "sesa_runs"))
DATA = ROOT.parent / "shared" / "data" / "benchmarks"


def _write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    return path


def config(text: str | bytes, *extra: str):
    def run(tmp: Path):
        return sesa("config", "show", "-c", str(_write(tmp / "bad.yaml", text)), *extra)

    return run


def show_set(*pairs: str):
    def run(tmp: Path):
        return sesa("config", "show", *[a for p in pairs for a in ("--set", p)])

    return run


def train(*args: str):
    def run(tmp: Path):
        return sesa("train", "--runs-dir", str(tmp / "runs"), *args, limit_s=120)

    return run


def train_name(name: str):
    def run(tmp: Path):
        res = sesa("train", "--runs-dir", str(tmp / "runs"), "--name", name, "--steps", "1", limit_s=120)
        outside = [p for p in tmp.rglob("*") if "runs" not in p.relative_to(tmp).parts]
        return f"lost data: wrote {outside[:2]} outside runs/" if outside else res

    return run


CORPUS_OK = '{"id": "1", "contents": "\\"Alpha\\"\\nAlpha is a letter."}\n'


def corpus(text: str | bytes, query: str = "alpha"):
    def run(tmp: Path):
        path = _write(tmp / "corpus.jsonl", text)
        return sesa("search", "query", query, "--corpus", str(path))

    return run


def literal_markup(tmp: Path):
    doc = '{"id": "1", "contents": "\\"Alpha [/] title\\"\\nAlpha [red]is[/red] a [link=x]letter[/link]."}\n'
    res = sesa("search", "query", "alpha [/]", "--corpus", str(_write(tmp / "c.jsonl", doc)))
    if res.code != 0 or "Traceback" in res.text:
        return res
    return "handled: printed literally" if "[red]is[/red]" in res.out else "silently wrong: markup eaten"


def _hanging_server() -> int:
    """A server that accepts connections and never answers."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    held = []
    threading.Thread(target=lambda: [held.append(s.accept()) for _ in iter(int, 1)], daemon=True).start()
    return s.getsockname()[1]


def _refused_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def search_http(kind: str):
    def run(tmp: Path):
        port = _hanging_server() if kind == "hang" else _refused_port()
        return sesa(
            "search", "query", "alpha", "-b", "http", "--url", f"http://127.0.0.1:{port}", limit_s=300
        )

    return run


def eval_data(text: str | bytes):
    def run(tmp: Path):
        _write(tmp / "data" / "nq.jsonl", text)
        res = sesa(
            "eval",
            "--data-dir",
            str(tmp / "data"),
            "--datasets",
            "nq",
            "--limit",
            "2",
            "--engine",
            "local",
            "--out-root",
            str(tmp / "evals"),
            "--name",
            "bad",
            limit_s=300,
        )
        left = tmp / "evals" / "bad"
        if left.is_dir() and not any(left.iterdir()) and res.code:
            return f"silently wrong: left an empty {left.name}/ ({res.err.strip().splitlines()[-1:]})"
        return res

    return run


def bank_damaged(file: str, text: str):
    def run(tmp: Path):
        bank = make_bank(tmp)
        _write(bank / file, text)
        return sesa("bank", "show", str(bank))

    return run


def make_bank(tmp: Path) -> Path:
    from sesa_graph.memory.bank import SkillBank
    from sesa_graph.memory.config import MemoryConfig

    SkillBank.create(tmp / "bank", MemoryConfig()).close()  # the shipped seed skills
    return tmp / "bank"


def bank_second_writer(tmp: Path):
    from sesa_graph.memory.bank import SkillBank
    from sesa_graph.memory.config import MemoryConfig

    bank = make_bank(tmp)
    code = (
        "import sys; from sesa_graph.memory.bank import SkillBank; from sesa_graph.memory.config import "
        f"MemoryConfig; b = SkillBank.open({str(bank)!r}, MemoryConfig()); print('opened'); sys.exit(0)"
    )
    with SkillBank.open(bank, MemoryConfig()):
        import subprocess

        p = subprocess.run(
            [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120
        )
    if "opened" in p.stdout:
        return "lost data: a second writer opened the bank"
    return (
        "clear error: " + p.stderr.strip().splitlines()[-1]
        if "pid" in p.stderr
        else "no place: " + p.stderr[-150:]
    )


def run_dir_metrics(mutate: str):
    def run(tmp: Path):
        from conftest import build_run

        run = build_run(tmp / "runs")
        m = run / "metrics.jsonl"
        if mutate == "torn":
            m.write_text(m.read_text() + '{"step": 9, "solver_rew')
            res = sesa("report", str(run), limit_s=300)
            return res if res.code else "handled: report written, torn line skipped"
        lines = m.read_text().splitlines()
        lines.insert(1, "{not json")
        m.write_text("\n".join(lines) + "\n")
        return sesa("report", str(run), limit_s=300)

    return run


def policy_taken_port(tmp: Path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port = s.getsockname()[1]
    res = sesa("policy", "serve", "--engine", "local", "--port", str(port), limit_s=120)
    s.close()
    return res


def resume_with(*flags: str, final: bool = True):
    def run(tmp: Path):
        sys.path.insert(0, str(ROOT / "tests" / "training"))
        from resume_fixtures import make_run

        run_dir = make_run(tmp, steps=3, committed=3, uncommitted_line=False, final=final)
        before = (run_dir / "metrics.jsonl").read_bytes()
        res = sesa("train", "--resume", str(run_dir), *flags, limit_s=120)
        if not (run_dir / "metrics.jsonl").read_bytes().startswith(before):
            return "lost data: metrics.jsonl lost lines"
        return res

    return run


def torn_metrics_resume(tmp: Path):
    sys.path.insert(0, str(ROOT / "tests" / "training"))
    from resume_fixtures import make_run

    run_dir = make_run(
        tmp, steps=3, committed=3, uncommitted_line=False, final=True, torn=b'{"step": 3, "ite'
    )
    res = sesa("train", "--resume", str(run_dir), limit_s=120)
    if res.code == 0 and "Traceback" not in res.text:
        return "handled: " + (res.out.strip().splitlines() or [""])[-1]
    return res


def bm25_cache_damaged(tmp: Path):
    import os

    corpus_file = _write(
        tmp / "c.jsonl", CORPUS_OK + '{"id": "2", "contents": "\\"Beta\\"\\nBeta is next."}\n'
    )
    home = tmp / "home"
    os.environ["SESA_HOME"] = str(home)
    try:
        first = sesa("search", "query", "beta", "--corpus", str(corpus_file))
        if first.code != 0:
            return first
        for f in (home / "bm25").rglob("*"):
            if f.is_file() and f.suffix in (".npy", ".json") and "manifest" not in f.name:
                f.write_bytes(b"garbage")
        res = sesa("search", "query", "beta", "--corpus", str(corpus_file))
    finally:
        os.environ.pop("SESA_HOME", None)
    if res.code == 0 and "Beta" in res.out:
        return "handled: damaged cache rebuilt, right result"
    return res if res.code else "silently wrong: " + res.out[-120:]


def bank_pending(tmp: Path):
    sys.path.insert(0, str(ROOT / "tests" / "memory"))
    import pytest
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
    res = sesa("bank", "show", str(tmp / "bank"))
    if res.code == 0 and "pending" in res.err:
        return "handled: " + next(x for x in res.err.splitlines() if "pending" in x)[:140]
    return res if res.code else "silently wrong: no warning of the pending commit"


_SERVER: dict = {}


def _policy_server() -> str:
    import atexit
    import os
    import signal
    import subprocess

    import httpx

    if "url" not in _SERVER:
        port = _refused_port()
        p = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sesa_cli.main",
                "policy",
                "serve",
                "--engine",
                "local",
                "--port",
                str(port),
                "--threads",
                "1",
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        atexit.register(lambda: os.killpg(p.pid, signal.SIGTERM))
        url = f"http://127.0.0.1:{port}"
        for _ in range(240):
            try:
                if httpx.get(url + "/v1/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        _SERVER["url"] = url
    return _SERVER["url"]


def policy_request(body: dict, field_name: str):
    def run(tmp: Path):
        import httpx

        r = httpx.post(_policy_server() + "/v1/completions", json={"model": "embedded", **body}, timeout=120)
        if r.status_code == 200:
            return "silently wrong: 200 " + r.text[:100]
        msg = r.text[:140]
        ok = 400 <= r.status_code < 500 and field_name in r.text
        return ("clear error: " if ok else "no place: ") + f"{r.status_code} {msg}"

    return run


def policy_batch_isolation(tmp: Path):
    import concurrent.futures

    import httpx

    url = _policy_server() + "/v1/completions"
    bodies = [{"prompt": "Hello", "max_tokens": 4}] * 3 + [{"prompt": [10**6], "max_tokens": 4}]
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        codes = list(ex.map(lambda b: httpx.post(url, json=b, timeout=120).status_code, bodies))
    return ("handled: " if codes == [200, 200, 200, 400] else "lost data: ") + f"status codes {codes}"


def launch_public_dev_mode(tmp: Path):
    import os
    import subprocess

    t = time.monotonic()
    p = subprocess.run(
        ["bash", str(ROOT / "scripts" / "launch_gpu.sh"), str(ROOT / "configs" / "qwen3-4b-h200.yaml")],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "VLLM_HOST": "0.0.0.0"},
    )
    from bad_inputs import Result

    return Result(p.returncode, p.stdout, p.stderr, time.monotonic() - t)


def json_line(**row) -> str:
    return json.dumps(row) + "\n"


CHECKS: list[Check] = [
    # config files and flags
    Check("config", "malformed YAML (unclosed bracket)", config("solver: {max_turns: 3\n"), ("bad.yaml:2",)),
    Check(
        "config",
        "duplicate key",
        config("solver:\n  max_turns: 3\n  max_turns: 4\n"),
        ("bad.yaml", "max_turns"),
    ),
    Check(
        "config", "bool for an int (max_turns: true)", config("solver:\n  max_turns: true\n"), ("max_turns",)
    ),
    Check(
        "config",
        "fraction for an int (max_turns: 2.5)",
        config("solver:\n  max_turns: 2.5\n"),
        ("max_turns",),
    ),
    Check("config", "unknown key", config("solver:\n  max_turnz: 3\n"), ("max_turnz",)),
    Check("config", "top level is a list", config("- 1\n- 2\n"), ("bad.yaml",)),
    Check("config", "bad UTF-8 in the file", config(b"name: \xff\xfe\n"), ("bad.yaml",)),
    Check("config", "empty file (all defaults)", config(""), expect_error=False),
    Check(
        "config", "missing file", lambda t: sesa("config", "show", "-c", str(t / "nope.yaml")), ("nope.yaml",)
    ),
    Check("config", "--set without =", show_set("solver.max_turns"), ("--set",)),
    Check("config", "--set wrong type", show_set("solver.max_turns=x"), ("--set", "solver.max_turns")),
    Check("config", "--set under a scalar (name.sub=1)", show_set("name.sub=1"), ("name",)),
    Check("config", "--set unknown key", show_set("solver.nope=1"), ("solver.nope",)),
    Check(
        "config", "--set out of range (max_turns=0)", show_set("solver.max_turns=0"), ("--set", "max_turns")
    ),
    Check("train", "--steps 0", train("--steps", "0"), ("--steps",)),
    Check("train", "--bank maybe", train("--bank", "maybe"), ("--bank",)),
    Check("train", "--engine gpu", train("--engine", "gpu"), ("--engine",)),
    Check("train", "--proposer-reward 2p", train("--proposer-reward", "2p"), ("--proposer-reward",)),
    Check("train", "run name ../x", train_name("../x"), ("name",)),
    Check("train", "run name absolute path", train_name("/tmp/sesa-abs-run"), ("name",)),
    Check("train", 'run name ""', train_name(""), ("name",)),
    Check(
        "train",
        "--resume a path that is no run",
        lambda t: sesa("train", "--resume", str(t)),
        ("resume",),
    ),
    # search and corpora
    Check("search", "corpus with bad UTF-8", corpus(b'{"id": "1", "contents": "\xff"}\n'), ("corpus.jsonl",)),
    Check("search", "corpus line not JSON", corpus(CORPUS_OK + "{oops\n"), ("corpus.jsonl", "2")),
    Check("search", "corpus duplicate ids", corpus(CORPUS_OK + CORPUS_OK), ("corpus.jsonl", "1")),
    Check(
        "search", "corpus null id", corpus('{"id": null, "contents": "x"}\n' + CORPUS_OK), ("corpus.jsonl",)
    ),
    Check("search", "corpus row without contents", corpus('{"id": "9"}\n' + CORPUS_OK), ("corpus.jsonl",)),
    Check(
        "search",
        "missing corpus file",
        lambda t: sesa("search", "query", "a", "--corpus", str(t / "no.jsonl")),
        ("no.jsonl",),
    ),
    Check("search", "-k 0", lambda t: sesa("search", "query", "a", "-k", "0"), ("-k",)),
    Check("search", "markup in documents and query", literal_markup),
    Check("search", "http: port refused", search_http("refused"), ("127.0.0.1",)),
    Check("search", "http: server accepts, never answers", search_http("hang"), ("127.0.0.1",), limit_s=300),
    # evaluation data
    Check("eval", "eval file with bad UTF-8", eval_data(b'{"id": "1", "question": "\xff"}\n'), ("nq.jsonl",)),
    Check(
        "eval",
        "eval line not JSON",
        eval_data(json_line(id="1", question="q?", golden_answers=["a"]) + "{x\n"),
        ("nq.jsonl", "2"),
    ),
    Check("eval", "eval row without answers", eval_data(json_line(id="1", question="q?")), ("nq.jsonl",)),
    Check(
        "eval",
        "eval answers not a list",
        eval_data(json_line(id="1", question="q?", golden_answers=5)),
        ("nq.jsonl",),
    ),
    # run directories
    Check("runs", "metrics.jsonl torn last line (report)", run_dir_metrics("torn")),
    Check("runs", "metrics.jsonl bad middle line (report)", run_dir_metrics("bad"), ("metrics.jsonl", "2")),
    Check("runs", "trace of a missing run", lambda t: sesa("trace", str(t / "nope")), ("nope",)),
    # skill banks
    Check("bank", "show a missing bank", lambda t: sesa("bank", "show", str(t / "nope")), ("nope",)),
    Check("bank", "damaged state.json", bank_damaged("state.json", "{trunc"), ("state.json",)),
    Check("bank", "damaged queue.json", bank_damaged("queue.json", "[1, 2"), ("queue.json",)),
    Check("bank", "journal.json of the wrong shape", bank_damaged("journal.json", "{}"), ("journal.json",)),
    Check("bank", "skills.jsonl bad line", bank_damaged("skills.jsonl", "{oops\n"), ("skills.jsonl",)),
    Check("bank", "second writer while one holds the bank", bank_second_writer),
    Check("bank", "show while a commit is pending", bank_pending),
    # resume
    Check("resume", "--steps below the committed steps", resume_with("--steps", "2"), ("--steps",)),
    Check("resume", "--bank changed on --resume", resume_with("--bank", "off"), ("--bank",)),
    Check(
        "resume",
        "--set of a method setting on --resume",
        resume_with("--set", "solver.max_turns=9"),
        ("--set solver.max_turns",),
    ),
    Check("resume", "--runs-dir with --resume", resume_with("--runs-dir", "elsewhere"), ("--runs-dir",)),
    Check("resume", "torn last line of metrics.jsonl, finished run", torn_metrics_resume),
    # search caches
    Check("search", "damaged BM25 cache", bm25_cache_damaged),
    # the policy server
    Check("policy", "serve on a taken port", policy_taken_port, ("port",)),
    Check("policy", "max_tokens -5", policy_request({"prompt": "Hi", "max_tokens": -5}, "max_tokens")),
    Check(
        "policy",
        "temperature -1",
        policy_request({"prompt": "Hi", "max_tokens": 4, "temperature": -1}, "temperature"),
    ),
    Check(
        "policy",
        "token id out of the vocabulary",
        policy_request({"prompt": [10**6], "max_tokens": 4}, "vocabulary"),
    ),
    Check("policy", "unknown model name", policy_request({"model": "gpt-9", "prompt": "Hi"}, "embedded")),
    Check("policy", "unsupported option echo", policy_request({"prompt": "Hi", "echo": True}, "echo")),
    Check("policy", "one bad request among four concurrent", policy_batch_isolation),
    Check("launch", "launch_gpu.sh with dev-mode endpoints on 0.0.0.0", launch_public_dev_mode, ("0.0.0.0",)),
]
