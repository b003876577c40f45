"""benchmarks/experiment_keep.py: an experiment spanning sittings on machines that lose runs/ and evals/."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import experiment
import experiment_keep as keep

from tests.sesa_eval.test_experiment_table import HEAD, LAYOUT, _eval_dir, _probe
from tests.sesa_runs.test_runs_learning_curve import _run

ROOT = Path(__file__).resolve().parents[2]


def _finished(d: Path, aborted=None) -> Path:
    (d / "eval.json").write_text(json.dumps({"model": "m"}))
    (d / "report.json").write_text(json.dumps({"aborted": aborted}))
    return d


def _summary(run: Path) -> Path:
    (run / "summary.json").write_text(json.dumps({"steps": 4}))
    return run


def test_a_finished_piece_is_kept_small_and_comes_back_whole(tmp_path):
    k = tmp_path / "kept"
    ev = _finished(_eval_dir(tmp_path / "evals", "x-sesa-s0-probe", "on", _probe(HEAD, lambda i: i % 2)))
    run = _summary(_run(tmp_path / "runs" / "tmp"))
    (run / "policies").mkdir()
    (run / "policies" / "weights.bin").write_bytes(b"\0" * 1000)
    assert keep.keep_eval(ev, k)
    keep.keep_run(run, k)
    gz = (k / "evals" / ev.name / "records.jsonl.gz").read_bytes()
    assert keep.keep_eval(ev, k) and (k / "evals" / ev.name / "records.jsonl.gz").read_bytes() == gz
    assert not (k / "runs" / run.name / "policies").exists()  # only the small files travel
    records = (ev / "records.jsonl").read_bytes()
    shutil.rmtree(tmp_path / "evals")
    shutil.rmtree(tmp_path / "runs")
    assert keep.restore_piece(run, [ev], k)
    assert (ev / "records.jsonl").read_bytes() == records and keep.finished_eval(ev)
    assert (run / "summary.json").is_file() and (run / "metrics.jsonl").is_file()


def test_an_unfinished_eval_is_not_kept_and_a_partly_kept_piece_runs_as_usual(tmp_path):
    k = tmp_path / "kept"
    ev = _eval_dir(tmp_path / "evals", "x-ssp-s1-probe", "off", _probe(HEAD, lambda i: 1))
    assert not keep.keep_eval(_finished(ev, aborted="interrupted"), k)
    assert not (k / "evals").exists()
    run = tmp_path / "runs" / "x-ssp-s1"
    # the probe eval kept, the benchmark eval not: nothing restored, the run left for training
    done = _finished(_eval_dir(tmp_path / "evals", "x-ssp-s0-probe", "off", _probe(HEAD, lambda i: 1)))
    keep.keep_eval(done, k)
    shutil.rmtree(done)
    assert not keep.restore_piece(run, [done, tmp_path / "evals" / "x-ssp-s0-bench"], k)
    assert not run.exists() and not done.exists()


def _pretend_sesa(tmp_path: Path, monkeypatch) -> list:
    """`sesa train` and `sesa eval` replaced by what they leave behind (a finished run, a finished eval)."""
    calls = []

    def fake_sesa(args, log):
        calls.append(args[:3])
        name = args[args.index("--name") + 1]
        if args[0] == "train":
            _summary(_run(tmp_path / "runs" / "tmp")).rename(tmp_path / "runs" / name)
        else:
            mode = args[args.index("--bank-modes") + 1]
            _finished(_eval_dir(tmp_path / "evals", name, mode, _probe(HEAD + LAYOUT, lambda i: i < 6)))

    monkeypatch.setattr(experiment, "sesa", fake_sesa)
    monkeypatch.setattr(experiment, "warm_up", lambda log: None)
    return calls


def _args(tmp_path: Path, seeds: int, keep_dir: Path | None) -> list[str]:
    args = ["--name", "x", "--arms", "sesa", "--steps", "2", "--seeds", str(seeds)]
    args += ["--runs-dir", str(tmp_path / "runs"), "--evals-dir", str(tmp_path / "evals")]
    return args + (["--keep", str(keep_dir)] if keep_dir else [])


def test_pieces_finished_before_keep_was_given_are_kept_without_running_again(tmp_path, monkeypatch):
    calls = _pretend_sesa(tmp_path, monkeypatch)
    experiment.main(_args(tmp_path, 1, None))
    assert len(calls) == 3 and not (tmp_path / "kept").exists()
    experiment.main(_args(tmp_path, 1, tmp_path / "kept"))
    assert len(calls) == 3
    assert sorted(p.name for p in (tmp_path / "kept" / "evals").iterdir()) == [
        "x-base-probe",
        "x-sesa-s0-probe",
    ]
    assert (tmp_path / "kept" / "runs" / "x-sesa-s0" / "summary.json").is_file()


def test_a_fresh_machine_takes_up_the_experiment_from_the_kept_pieces(tmp_path, monkeypatch):
    """Sitting one kept base and sesa seed 0; sitting two, on a machine without runs/ or evals/, runs
    nothing of those, goes on with seed 1 and writes the table with both seeds."""
    calls = _pretend_sesa(tmp_path, monkeypatch)
    k = tmp_path / "kept"
    experiment.main(_args(tmp_path, 1, k))
    assert [c[0] for c in calls] == ["eval", "train", "eval"]
    assert sorted(p.name for p in (k / "evals").iterdir()) == ["x-base-probe", "x-sesa-s0-probe"]
    assert (k / "runs" / "x-sesa-s0" / "metrics.jsonl").is_file() and (k / "timing.json").is_file()
    shutil.rmtree(tmp_path / "runs")
    shutil.rmtree(tmp_path / "evals")
    calls.clear()
    experiment.main(_args(tmp_path, 2, k))
    assert calls == [["train", "--name", "x-sesa-s1"], ["eval", "--name", "x-sesa-s1-probe"]]
    table = json.loads((tmp_path / "evals" / "x-table.json").read_text())
    assert table["em"]["probe-v2"]["sesa"]["seeds"] == [60.0, 60.0]
    assert "sesa s0 train" in table["timing"]


def test_the_directory_an_experiment_keeps_its_pieces_in_is_one_git_commits(monkeypatch):
    """Kept pieces were once silently ignored by the tree's ``runs/`` and ``evals/`` rules."""
    assert keep.ignored_by_git(ROOT / "benchmarks" / "results" / "abl2") is None
    monkeypatch.chdir(ROOT)  # as the documented command gives it: relative to the repository
    assert keep.ignored_by_git(Path("benchmarks/results/abl2")) is None
    assert keep.ignored_by_git(ROOT / "benchmarks" / "results" / "a-new-name") is None
    rule = keep.ignored_by_git(ROOT / "runs")  # the check does see this tree's rules
    assert rule and rule.startswith(".gitignore:") and rule.endswith(":runs/"), rule


def test_a_keep_directory_git_ignores_is_refused_naming_the_rule(tmp_path, capsys):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("out/\n")
    try:
        experiment.parse(["--keep", str(tmp_path / "out" / "kept")])
    except SystemExit as e:
        assert e.code == 2
    else:
        raise AssertionError("an ignored --keep directory was accepted")
    err = capsys.readouterr().err
    assert f"--keep {tmp_path / 'out' / 'kept'}" in err and ".gitignore:1:out/" in err
    assert experiment.parse(["--keep", str(tmp_path / "kept")]).keep == tmp_path / "kept"


def test_the_documented_table_is_what_the_committed_pieces_give(tmp_path, monkeypatch):
    """docs/EXPERIMENT.md's v2 table, recomputed from benchmarks/results/abl2 (the real run's records) on a
    machine with no runs/ or evals/: every number a reviewer reads there comes from the kept pieces, and
    nothing is trained or evaluated again."""
    ran = []
    monkeypatch.setattr(experiment, "sesa", lambda args, log: ran.append(args))
    monkeypatch.setattr(experiment, "warm_up", lambda log: ran.append("warm-up"))
    kept = shutil.copytree(ROOT / "benchmarks" / "results" / "abl2", tmp_path / "kept")
    doc = tmp_path / "EXPERIMENT.md"
    doc.write_text(f"{experiment.DOC_BEGIN}\n{experiment.DOC_END}\n")
    experiment.main(
        ["--name", "abl2", "--steps", "12", "--seeds", "2", "--probe", "probe-v2"]
        + ["--train-set", "train.probe_dataset=probe-v2", "--keep", str(kept), "--doc", str(doc)]
        + ["--runs-dir", str(tmp_path / "runs"), "--evals-dir", str(tmp_path / "evals")]
    )
    assert ran == []

    def table(text: str) -> list[str]:
        body = text[text.index(experiment.DOC_BEGIN) : text.index(experiment.DOC_END)]
        return [line for line in body.splitlines() if not line.startswith("Wall time:")]

    committed = table((ROOT / "docs" / "EXPERIMENT.md").read_text("utf-8"))
    assert table(doc.read_text("utf-8")) == committed
    assert "| probe-v2 | sesa - nobank | the bank alone (same frontier reward) | -9.8 |" in "\n".join(
        committed
    )
