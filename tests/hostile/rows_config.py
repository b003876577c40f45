"""Bad config values, files and flags: quoted numbers, non-finite floats, bools that are not bools, values
out of range, YAML alias bombs and deep nesting, config "files" that are FIFOs, directories, devices or
100 MB, odd encodings, malformed --set pairs and the rollout/propose flags that skipped validation.

Most rows run ``sesa config show -c FILE`` (milliseconds): it loads a config exactly as `sesa train` does.
A value accepted when it must be refused is ``wrong``; an accepted file whose shown value differs from what
was written is ``wrong`` too.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from tests.hostile.harness import Outcome, cli, custom, invoke, judge_cli

AREA = "config"
# a 500-byte "billion laughs": nine levels of nine aliases expand to 9**9 (387 million) list items
ALIAS_BOMB = "".join(
    f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" if i else '  l0: &l0 ["lol"]\n' for i in range(9)
)


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    return path


def shows(*lines: str):
    """A check: the config show output holds each line (the value was read as written)."""

    def check(tmp: Path, res) -> str | None:
        missing = [x for x in lines if x not in res.stdout]
        return f"output lacks {missing}" if missing else None

    return check


def bad(name: str, text: str | bytes, *contains: str) -> object:
    """``sesa config show -c FILE`` with ``text`` in FILE must be refused naming each of ``contains``."""
    return cli(
        AREA,
        name,
        lambda t: ["config", "show", "-c", write(t / "bad.yaml", text)],
        contains=("bad.yaml", *contains),
    )


def good(name: str, text: str | bytes, *expect_lines: str) -> object:
    return cli(
        AREA,
        name,
        lambda t: ["config", "show", "-c", write(t / "ok.yaml", text)],
        expect="ok",
        check=shows(*expect_lines),
    )


def show_set(name: str, pairs: list[str], *contains: str) -> object:
    return cli(AREA, name, ["config", "show", *[x for p in pairs for x in ("--set", p)]], contains=contains)


def special(name: str, make, *contains: str, timeout_s: float = 10.0) -> object:
    """``-c`` a path ``make(tmp)`` returns (a FIFO, a directory, a device)."""
    return cli(
        AREA, name, lambda t: ["config", "show", "-c", make(t)], contains=contains, timeout_s=timeout_s
    )


def fifo(tmp: Path) -> Path:
    os.mkfifo(tmp / "fifo.yaml")
    return tmp / "fifo.yaml"


def directory(tmp: Path) -> Path:
    (tmp / "dir.yaml").mkdir()
    return tmp / "dir.yaml"


def sparse_100mb(tmp: Path) -> Path:
    path = tmp / "huge.yaml"
    with path.open("wb") as f:
        f.write(b"solver:\n  max_turns: 4\n")
        f.truncate(100 * 2**20)  # a sparse file: instant, no disk
    return path


def nested_block(depth: int) -> str:
    return (
        "extra:\n" + "".join(f"{'  ' * (i + 1)}k{i}:\n" for i in range(depth)) + "  " * (depth + 1) + "v: 1\n"
    )


@custom(AREA, "config show -c FIFO with a writer that never closes")
def fifo_with_writer(tmp: Path) -> Outcome:
    """A FIFO someone holds open for writing: a reader would block until the writer goes away."""
    path = fifo(tmp)
    stop = threading.Event()

    def hold() -> None:
        fd = os.open(path, os.O_RDWR)  # opens without waiting for a reader
        stop.wait(10)
        os.close(fd)

    t = threading.Thread(target=hold, daemon=True)
    t.start()
    try:
        return judge_cli(invoke(["config", "show", "-c", path]), "error", ["fifo.yaml", "not a regular file"])
    finally:
        stop.set()
        t.join()


def nothing_written(tmp: Path, res) -> str | None:
    """A check: a refused command left no run, eval or bank behind."""
    made = [p.name for p in tmp.iterdir() if p.name not in ("fifo.yaml", "bad.yaml", ".sesa-home")]
    return f"wrote {made} before refusing" if made else None


def other_command(name: str, argv, make, *contains: str) -> object:
    """A command other than config show given ``-c`` a bad config: refused before it writes anything."""
    return cli(
        AREA,
        name,
        lambda t: [*argv(t), "-c", make(t)],
        contains=contains,
        check=nothing_written,
        timeout_s=20,
    )


def skill_file(name: str, make, *contains: str) -> object:
    """A priming/seeds skill file (memory.priming_files, memory.seeds_file) read by the loader a new bank
    uses: refused with a SkillFileError (a UserError) naming it, in bounded time and memory."""

    @custom(AREA, name, timeout_s=10)
    def row(tmp: Path) -> Outcome:
        from sesa_graph.memory.skill import SkillFileError, load_skill_file

        path = make(tmp)
        try:
            load_skill_file(path)
        except SkillFileError as exc:
            missing = [c for c in (str(path), *contains) if c not in str(exc)]
            return Outcome("unclear", f"{exc} (missing {missing})") if missing else Outcome("clear", str(exc))
        return Outcome("wrong", "accepted")

    return row


def rollout(name: str, *args: str, contains=()) -> object:
    # every row here must be refused before a model loads or a server starts (a few seconds at most)
    return cli(AREA, name, ["rollout", "who wrote hamlet?", *args], contains=contains, timeout_s=20)


def propose(name: str, *args: str, contains=()) -> object:
    return cli(AREA, name, ["propose", "Shakespeare", *args], contains=contains, timeout_s=20)


ROWS = [
    # quoted numbers, one per config section
    bad('solver.max_turns: "4"', 'solver:\n  max_turns: "4"\n', "bad.yaml:2", "solver.max_turns", "'4'"),
    bad('proposer.temperature: "1.0"', 'proposer:\n  temperature: "1.0"\n', "proposer.temperature", "'1.0'"),
    bad('judge.max_tokens: "16"', 'judge:\n  max_tokens: "16"\n', "judge.max_tokens", "quotes"),
    bad('rewards.frontier_lambda: "0.5"', 'rewards:\n  frontier_lambda: "0.5"\n', "rewards.frontier_lambda"),
    bad('memory.top_k: "3"', 'memory:\n  top_k: "3"\n', "bad.yaml:2", "memory.top_k"),
    bad('search.k: "3"', 'search:\n  k: "3"\n', "bad.yaml:2", "search.k"),
    bad('train.steps: "6"', 'train:\n  steps: "6"\n', "train.steps"),
    bad('train.learning_rate: "1e-6"', 'train:\n  learning_rate: "1e-6"\n', "train.learning_rate"),
    bad('cluster.heartbeat_s: "5"', 'cluster:\n  heartbeat_s: "5"\n', "cluster.heartbeat_s"),
    bad('solver_policy.max_batch_size: "16"', 'solver_policy:\n  max_batch_size: "16"\n', "max_batch_size"),
    bad('seed: "0"', 'seed: "0"\n', "bad.yaml:1", "seed"),
    bad(
        'models.frozen.serve.threads: "1"',
        'models:\n  frozen:\n    serve: {model: embedded-warm, backend: local, threads: "1"}\n',
        "models.frozen.serve.threads",
    ),
    bad(
        'train.trainer_ranks.solver: "1"', 'train:\n  trainer_ranks: {solver: "1"}\n', "trainer_ranks.solver"
    ),
    # non-finite floats
    bad("solver.temperature: .inf", "solver:\n  temperature: .inf\n", "solver.temperature", "finite"),
    bad("proposer.temperature: .nan", "proposer:\n  temperature: .nan\n", "proposer.temperature", "finite"),
    bad("rewards.format_penalty: -.inf", "rewards:\n  format_penalty: -.inf\n", "rewards.format_penalty"),
    bad("judge.timeout_s: .inf", "judge:\n  timeout_s: .inf\n", "judge.timeout_s", "finite"),
    bad("memory.similarity_floor: .nan", "memory:\n  similarity_floor: .nan\n", "memory.similarity_floor"),
    bad("search.timeout_s: .Inf", "search:\n  timeout_s: .Inf\n", "search.timeout_s", "finite"),
    bad("train.learning_rate: .nan", "train:\n  learning_rate: .nan\n", "train.learning_rate"),
    # bools that are not bools, numbers that are bools
    bad('memory.use_seeds: "yes"', 'memory:\n  use_seeds: "yes"\n', "memory.use_seeds", "true or false"),
    bad("solver.force_final_answer: 1", "solver:\n  force_final_answer: 1\n", "solver.force_final_answer"),
    bad('proposer.rag_check: "no"', 'proposer:\n  rag_check: "no"\n', "proposer.rag_check"),
    bad('solver_policy.enforce_eager: "true"', 'solver_policy:\n  enforce_eager: "true"\n', "enforce_eager"),
    bad("train.steps: true", "train:\n  steps: true\n", "train.steps", "boolean"),
    # out of range
    bad("solver.max_turns: 0", "solver:\n  max_turns: 0\n", "solver.max_turns"),
    bad("search.k: -1", "search:\n  k: -1\n", "search.k"),
    bad("memory.queue_cap: 0", "memory:\n  queue_cap: 0\n", "memory.queue_cap"),
    bad("seed: -1", "seed: -1\n", "seed"),
    bad("seed: 2**40", f"seed: {2**40}\n", "seed"),
    bad("solver.max_tokens_per_turn: 10**30", f"solver:\n  max_tokens_per_turn: {10**30}\n", "out of range"),
    bad("extra: {n: 10**400}", f"extra:\n  n: {10**400}\n", "extra", "out of range"),
    bad(
        "judge.base_url: ftp://x",
        "judge:\n  kind: openai\n  base_url: ftp://x\n  model: m\n",
        "judge.base_url",
    ),
    bad("name with a newline", 'name: "a\\nb"\n', "name", "control"),
    bad("name of 300 characters", f"name: {'r' * 300}\n", "name", "at most 100"),
    # bounded parsing
    bad("alias bomb under extra:", "extra:\n" + ALIAS_BOMB, "alias"),
    bad("merge key <<: *base", "base: &b {max_turns: 3}\nsolver:\n  <<: *b\n", "bad.yaml:1", "alias"),
    bad("flow nesting 10000 deep", "extra: " + "[" * 10000 + "]" * 10000 + "\n", "nested deeper"),
    bad("block nesting 40 deep", nested_block(40), "nested deeper"),
    good("block nesting 20 deep (fine)", nested_block(20), "k19:"),
    special("-c FIFO", fifo, "fifo.yaml", "not a regular file"),
    fifo_with_writer,
    special("-c a directory", directory, "dir.yaml", "is a directory"),
    special("-c /dev/zero", lambda t: "/dev/zero", "/dev/zero", "not a regular file"),
    special("-c /dev/urandom", lambda t: "/dev/urandom", "/dev/urandom", "not a regular file"),
    special("-c a 100 MB file", sparse_100mb, "huge.yaml", "larger than"),
    special("-c a missing file", lambda t: t / "nope.yaml", "nope.yaml", "does not exist"),
    other_command("train -c /dev/zero", lambda t: ["train", "--runs-dir", t / "runs"], lambda t: "/dev/zero"),
    other_command("train -c FIFO", lambda t: ["train", "--runs-dir", t / "runs"], fifo, "not a regular file"),
    other_command(
        'train -c with max_turns: "4"',
        lambda t: ["train", "--runs-dir", t / "runs"],
        lambda t: write(t / "bad.yaml", 'solver:\n  max_turns: "4"\n'),
        "bad.yaml:2",
        "solver.max_turns",
    ),
    other_command("eval -c FIFO", lambda t: ["eval", "--out-root", t / "evals"], fifo, "not a regular file"),
    other_command("plan -c FIFO", lambda t: ["plan"], fifo, "not a regular file"),
    other_command("policy serve -c FIFO", lambda t: ["policy", "serve"], fifo, "not a regular file"),
    skill_file(
        "skill file: alias bomb",
        lambda t: write(t / "s.yaml", "version: 1\nskills: []\nx:\n" + ALIAS_BOMB),
        "alias",
    ),
    skill_file("skill file: FIFO", fifo, "not a regular file"),
    skill_file("skill file: a directory", directory, "is a directory"),
    # encodings and layout
    bad("Latin-1 bytes (not UTF-8)", b"name: caf\xe9\n", "UTF-8"),
    bad("UTF-16 file", "solver:\n  max_turns: 4\n".encode("utf-16"), "UTF-8"),
    good("UTF-8 BOM", b"\xef\xbb\xbfsolver:\n  max_turns: 4\n", "max_turns: 4"),
    bad("tab indentation", "solver:\n\tmax_turns: 4\n", "bad.yaml:2", "YAML"),
    bad(
        "unknown key solver.max_turnz", "solver:\n  max_turnz: 4\n", "bad.yaml:2", "max_turnz", "unknown key"
    ),
    bad("unknown section", "solvr:\n  max_turns: 4\n", "bad.yaml:1", "solvr", "unknown key"),
    bad("ESC in a value", "name: \x1b[2J\n", "bad.yaml", "not allowed"),
    good("exact 4.0 for an int", "solver:\n  max_turns: 4.0\n", "max_turns: 4\n"),
    # --set
    show_set("--set without =", ["solver.max_turns"], "--set solver.max_turns", "KEY=VALUE"),
    show_set("--set =4", ["=4"], "not a dotted key"),
    show_set("--set solver..x=1", ["solver..x=1"], "not a dotted key"),
    show_set('--set solver.max_turns="4"', ['solver.max_turns="4"'], "solver.max_turns", '"4"'),
    show_set("--set solver.max_turns= (empty)", ["solver.max_turns="], "solver.max_turns"),
    show_set("--set solver.temperature=.nan", ["solver.temperature=.nan"], "solver.temperature", "finite"),
    show_set("--set memory.use_seeds=yes", ["memory.use_seeds=yes"], "memory.use_seeds"),
    show_set("--set seed=10**30", [f"seed={10**30}"], "--set seed", "out of range"),
    show_set("--set unclosed bracket", ["extra={a: [1"], "--set", "not valid YAML"),
    show_set("--set alias bomb", ["extra={" + ALIAS_BOMB.replace("\n", ", ").strip(", ") + "}"], "alias"),
    show_set("--set flow nesting 10000 deep", ["extra=" + "[" * 10000 + "]" * 10000], "nested deeper"),
    show_set("--set name.sub=1", ["name.sub=1"], "name is a value"),
    show_set("--set solver=3", ["solver=3"], "solver"),
    show_set("--set twice, second bad", ["solver.max_turns=4", "solver.max_turns=-4"], "solver.max_turns"),
    cli(
        AREA,
        "config show --set a value with ESC",
        ["config", "show", "--set", "extra.note=\x1b]0;pwned\x07"],
        contains=["--set", "not allowed"],
    ),
    # flags of commands that used to skip validation (model_copy(update=...))
    rollout("rollout --max-turns 0", "--max-turns", "0", contains=["--max-turns 0", "greater than"]),
    rollout("rollout --max-turns -1", "--max-turns", "-1", contains=["--max-turns -1"]),
    rollout("rollout --max-turns 51", "--max-turns", "51", contains=["--max-turns 51", "less than"]),
    rollout("rollout --base-url ftp://x", "--base-url", "ftp://x", contains=["--base-url", "http"]),
    rollout("rollout --engine bogus", "--engine", "bogus", contains=["--engine"]),
    rollout("rollout --corpus /dev/zero", "--corpus", "/dev/zero", contains=["--corpus /dev/zero"]),
    rollout("rollout --corpus a missing file", "--corpus", "nope.jsonl", contains=["--corpus nope.jsonl"]),
    cli(AREA, "rollout --max-turns x", ["rollout", "q", "--max-turns", "x"], contains=["--max-turns"]),
    cli(AREA, "rollout with no question", ["rollout", "   "], contains=["question"]),
    propose("propose --hops 0", "--hops", "0", contains=["--hops"]),
    propose("propose --hops 6", "--hops", "6", contains=["--hops"]),
    propose("propose --base-url not-a-url", "--base-url", "not-a-url", contains=["--base-url"]),
]
