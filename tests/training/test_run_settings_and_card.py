"""What a finished run leaves for a reader: the resolved settings in ``settings.txt`` (one log line names it, the
table is not in the log), and model cards that name the base model and the run (TRL's said "None")."""

from pathlib import Path

from typer.testing import CliRunner

from sesa_cli.main import build_app
from sesa_graph.config import load_config
from training import launch
from training.model_card import write_model_card

ROOT = Path(__file__).resolve().parents[2]


def test_sesa_train_writes_the_settings_to_the_run_and_names_the_file(tmp_path, monkeypatch):
    started = {}
    monkeypatch.setattr("training.tracking.check_tracker", lambda kind: None)
    monkeypatch.setattr(launch, "check_gpu_plan", lambda cfg: None)
    monkeypatch.setattr(launch, "check_cpu_memory", lambda cfg: None)
    monkeypatch.setattr(
        launch, "_run", lambda cfg, run_dir, start, resumed: started.setdefault("dir", run_dir)
    )
    out = CliRunner().invoke(
        build_app(), ["train", "--name", "cardrun", "--runs-dir", str(tmp_path), "--steps", "2"]
    )
    assert out.exit_code == 0, out.output
    settings = (tmp_path / "cardrun" / "settings.txt").read_text()
    assert "train.steps = 2  # flag --steps" in settings
    assert "# reference choices no setting expresses" in settings
    assert "train.steps = 2" not in out.output  # the table is in the file, not the log
    assert f"settings: {tmp_path / 'cardrun' / 'settings.txt'}" in out.output
    assert started["dir"] == tmp_path / "cardrun"


def test_the_model_card_names_the_base_model_and_the_run(tmp_path):
    cfg = load_config(ROOT / "configs" / "tiny-cpu.yaml")
    final, ckpt = tmp_path / "policies" / "solver", tmp_path / "checkpoints" / "solver"
    final.mkdir(parents=True)
    ckpt.mkdir(parents=True)
    (ckpt / "README.md").write_text(
        "This model is a fine-tuned version of [None](https://huggingface.co/None)."
    )
    write_model_card(cfg, "solver", tmp_path, 4, final, ckpt)
    for d in (final, ckpt):
        card = (d / "README.md").read_text()
        assert "None" not in card
        assert "trained from **`embedded-warm`**" in card
        assert f"run `tiny-cpu` (`{tmp_path}`), after 4 self-play steps" in card
        assert str(final) in card
