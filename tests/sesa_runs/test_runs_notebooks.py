"""Execute every notebook (nbclient, a real kernel) against the tiny run and eval, and against an empty
run and eval (a run that has just started); any cell error fails the test.

Same as ``SESA_RUN_DIR=... SESA_EVAL_DIR=... pytest --nbmake notebooks/``.
"""

from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


def _execute(path: Path, run_dir: Path, eval_dir: Path, monkeypatch) -> list[str]:
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("SESA_RUN_DIR", str(run_dir))
    monkeypatch.setenv("SESA_EVAL_DIR", str(eval_dir))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    nb = nbformat.read(path, as_version=4)
    NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    return [
        mime
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        for mime in o.get("data", {})
    ]


def test_the_three_notebooks_exist():
    assert {p.name for p in NOTEBOOKS} >= {
        "trace_failures.ipynb",
        "skill_bank.ipynb",
        "training_curves.ipynb",
    }


@pytest.mark.timeout(180)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path, dirs, monkeypatch):
    mimes = _execute(path, dirs["run"], dirs["eval"], monkeypatch)
    assert "image/png" in mimes or "text/html" in mimes  # it showed figures or traces, not only text


@pytest.mark.timeout(180)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_on_empty_dirs(path, dirs, monkeypatch):
    _execute(path, dirs["empty_run"], dirs["empty_eval"], monkeypatch)


@pytest.mark.timeout(180)
def test_parameters_cell_names_the_run_over_the_environment(dirs, tmp_path, monkeypatch):
    """papermill's convention: `-p RUN_DIR ... -p EVAL_DIR ...` wins over $SESA_RUN_DIR and the newest run."""
    import nbformat
    import papermill

    for nb in NOTEBOOKS:
        tags = [c.get("metadata", {}).get("tags", []) for c in nbformat.read(nb, 4).cells]
        assert sum("parameters" in t for t in tags) == 1, nb.name
    monkeypatch.setenv("SESA_RUN_DIR", str(dirs["empty_run"]))
    monkeypatch.setenv("SESA_EVAL_DIR", str(dirs["empty_eval"]))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    out = tmp_path / "out.ipynb"
    path = next(p for p in NOTEBOOKS if p.stem == "trace_failures")
    papermill.execute_notebook(
        str(path),
        str(out),
        parameters={"RUN_DIR": str(dirs["run"]), "EVAL_DIR": str(dirs["eval"])},
        kernel_name="python3",
        cwd=str(path.parent),
        progress_bar=False,
    )
    text = out.read_text()
    assert str(dirs["run"]) in text and str(dirs["empty_run"]) not in text


@pytest.mark.timeout(180)
def test_a_relative_run_dir_is_taken_from_where_jupyter_was_started(dirs, monkeypatch):
    """`SESA_RUN_DIR=runs/NAME jupyter lab notebooks/`: the kernel runs in notebooks/, the path was typed in
    the shell's directory ($PWD, which the kernel inherits)."""
    import os

    base = dirs["run"].parent
    monkeypatch.setenv("PWD", str(base))
    path = next(p for p in NOTEBOOKS if p.stem == "training_curves")
    relative = (Path(dirs["run"].name), Path(os.path.relpath(dirs["eval"], base)))
    assert not (path.parent / relative[0]).exists()  # not found from the kernel's directory
    assert "image/png" in _execute(path, *relative, monkeypatch)


@pytest.mark.timeout(180)
def test_training_curves_shows_the_learning_curve_and_who_gave_the_rewards(dirs, monkeypatch):
    """The notebook's probe table and judge table agree with the run's own records (metrics.jsonl's probe
    records, the solver rollouts' verdicts)."""
    import json

    import nbformat
    from nbclient import NotebookClient

    from sesa_runs import load

    monkeypatch.setenv("SESA_RUN_DIR", str(dirs["run"]))
    monkeypatch.setenv("SESA_EVAL_DIR", str(dirs["eval"]))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    path = next(p for p in NOTEBOOKS if p.stem == "training_curves")
    nb = nbformat.read(path, as_version=4)
    NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()

    def outputs(marker: str) -> list[dict]:
        (cell,) = [c for c in nb.cells if c.cell_type == "code" and marker in c.source]
        return [o.get("data", {}) for o in cell.outputs]

    curve = outputs("fig_learning_curve")
    assert any("image/png" in o for o in curve)
    probes = [
        json.loads(line)["probe"]
        for line in (dirs["run"] / "metrics.jsonl").read_text().splitlines()
        if "probe_of" in line
    ]
    table = next(o["text/plain"] for o in curve if "text/plain" in o and "em" in o["text/plain"])
    for probe in probes:
        for mode in ("off", "on"):
            assert f"{probe[mode]['em']:.1f}" in table

    run = load.open_run(dirs["run"])
    solver = run.rollouts("solver")
    correct = solver[solver["correct"].map(load.truthy)]
    judged = next(o["text/plain"] for o in outputs('judge_method"]') if "text/plain" in o)
    last_row = judged.strip().splitlines()[-1].split()
    assert last_row[0] == "All" and int(last_row[-1]) == len(correct) > 0
