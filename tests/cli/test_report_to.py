"""`--report-to tensorboard|wandb`: checked before anything loads, the W&B options, and the real
loggers' files (TensorBoard event files read back with tensorboard's own reader; W&B offline)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ict.errors import ConfigError
from ict.train.outputs import ExternalLogger, check_report_to

HIDE = """\
import sys
sys.modules[{module!r}] = None  # as if not installed
from ict.cli import main
code = main({argv!r})
heavy = sorted(m for m in ("transformers", "reasoning_gym", "datasets") if m in sys.modules)
print("HEAVY", heavy)
sys.exit(code)
"""


@pytest.mark.parametrize("kind", ["tensorboard", "wandb"])
def test_cli_refuses_a_missing_logger_before_loading_anything(kind, tmp_path):
    out = tmp_path / "run"
    argv = ["train", "--report-to", kind, "--output-dir", str(out), "--max-steps", "1"]
    done = subprocess.run(
        [sys.executable, "-c", HIDE.format(module=kind, argv=argv)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert f"--report-to {kind} needs the {kind} package" in lines[0]
    assert f'pip install -e ".[{kind}]"' in lines[0]
    assert "HEAVY []" in done.stdout  # no model (transformers) and no task (reasoning-gym) loaded
    assert not out.exists()  # no half-made run directory


def test_trainer_checks_before_the_task_loads(monkeypatch, tmp_path):
    import ict.train.trainer as trainer_module
    from ict.train import TrainConfig, Trainer

    def no_task(*args, **kwargs):
        raise AssertionError("the task was loaded before the logger check")

    monkeypatch.setattr(trainer_module, "load_problems", no_task)
    monkeypatch.setitem(sys.modules, "wandb", None)
    config = TrainConfig(report_to="wandb", output_dir=str(tmp_path / "run"))
    with pytest.raises(ConfigError, match=r'pip install -e "\.\[wandb\]"'):
        Trainer(config)
    assert not (tmp_path / "run").exists()


def test_check_report_to_names_the_choices():
    check_report_to("none")
    with pytest.raises(ConfigError, match="not one of none, tensorboard, wandb"):
        check_report_to("mlflow")


def test_wandb_mode_is_checked_with_the_config():
    from ict.train import TrainConfig

    with pytest.raises(ConfigError, match="wandb_mode='ofline' is not one of online, offline"):
        TrainConfig(wandb_mode="ofline")


def test_extras_name_the_logger_packages():
    import tomllib

    extras = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for kind in ("tensorboard", "wandb"):
        assert any(req.startswith(kind) for req in extras[kind]), extras.get(kind)


def _png(path: Path, size=(2.0, 1.5)) -> Path:
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, dpi=50)
    fig.add_subplot().plot([0, 1], [1, 0])
    fig.savefig(path)
    return path


# ---- TensorBoard: its own event reader -----------------------------------------------------------
def _events(log_dir: Path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir), size_guidance={"scalars": 0, "images": 0})
    acc.Reload()
    return acc


def test_tensorboard_scalars_and_images(tmp_path):
    pytest.importorskip("tensorboard")
    logger = ExternalLogger("tensorboard", tmp_path, {})
    logger.log({"reward/mean": 0.25, "health/entropy_collapse": True, "note": "text"}, 1)
    logger.log({"reward/mean": 0.75}, 2)
    logger.log_media(2, images={"plots/curve": _png(tmp_path / "c.png")}, html={"map": "x.html"})
    logger.close()
    acc = _events(tmp_path / "tensorboard")
    rewards = [(e.step, e.value) for e in acc.Scalars("reward/mean")]
    assert rewards == [(1, 0.25), (2, 0.75)]
    assert [e.value for e in acc.Scalars("health/entropy_collapse")] == [1.0]
    assert "note" not in acc.Tags()["scalars"]
    (image,) = acc.Images("plots/curve")
    assert (image.step, image.width, image.height) == (2, 100, 75)  # 2 x 1.5 in at 50 dpi


def test_trainer_logs_steps_plots_and_token_map_to_tensorboard(tmp_path):
    pytest.importorskip("tensorboard")
    from ict.testing import tiny_model_and_tokenizer
    from ict.train import Problem, TrainConfig, Trainer

    model, tokenizer = tiny_model_and_tokenizer(seed=0)
    problems = [Problem(f"Say a digit {i}:", lambda t: float(t[:1].isdigit())) for i in range(8)]
    config = TrainConfig(
        max_steps=2, prompts_per_step=2, num_generations=4, max_new_tokens=3, stop=[],
        warmup_steps=0, save_every=0, progress=False, plots=True, log_samples_every=1,
        report_to="tensorboard", output_dir=str(tmp_path / "run"),
    )  # fmt: skip
    summary = Trainer(config, model=model, tokenizer=tokenizer, problems=problems).train()
    acc = _events(tmp_path / "run" / "tensorboard")
    assert [e.step for e in acc.Scalars("reward/mean")] == [1, 2]
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    assert [e.value for e in acc.Scalars("valid/entropy")] == pytest.approx(
        [m["valid/entropy"] for m in metrics]
    )
    plots = sorted(p.stem for p in Path(summary["paths"]["plots"]).glob("*.png"))
    assert plots and sorted(t[len("plots/") :] for t in acc.Tags()["images"]) == plots
    assert {e.step for t in acc.Tags()["images"] for e in acc.Images(t)} == {2}


# ---- W&B: offline and disabled, the real package ---------------------------------------------------
def test_wandb_offline_run_holds_the_options_scalars_and_media(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    logger = ExternalLogger(
        "wandb",
        tmp_path / "run-a",
        {"method": "ict"},
        project="proj",
        name="my-run",
        mode="offline",
    )
    run = logger._wandb
    assert (run.project, run.name, run.settings.mode) == ("proj", "my-run", "offline")
    assert run.config["method"] == "ict"
    logger.log({"reward/mean": 0.123456}, 1)
    logger.log({"reward/mean": 0.654321}, 2)
    assert run.summary["reward/mean"] == 0.123456  # wandb commits a step's row at the next step
    html = tmp_path / "map.html"
    html.write_text("<b>token map</b>")
    logger.log_media(2, images={"plots/curve": _png(tmp_path / "c.png")}, html={"token_map": html})
    logger.close()
    # finish() hands the stream's close to wandb's service process without waiting for it; the
    # record log is complete once the service has shut down (wandb.teardown, as at process exit)
    import wandb

    wandb.teardown()
    (offline,) = (tmp_path / "run-a" / "wandb").glob("offline-run-*")
    media = offline / "files" / "media"
    assert list((media / "images" / "plots").glob("curve_2_*.png"))
    (page,) = (media / "html").glob("token_map_2_*.html")
    assert "<b>token map</b>" in page.read_text()
    records = next(offline.glob("run-*.wandb")).read_bytes()  # the run's record log
    assert b"reward/mean" in records and b"0.654321" in records  # the last row, written at close


def test_wandb_mode_is_not_forced(tmp_path, monkeypatch):
    """No mode given: wandb's own choice ($WANDB_MODE here, online otherwise)."""
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "disabled")
    monkeypatch.setenv("WANDB_PROJECT", "from-env")
    logger = ExternalLogger("wandb", tmp_path / "run-b", {})
    assert logger._wandb.settings.mode == "disabled"
    logger.log({"reward/mean": 0.5}, 1)
    logger.close()
    assert not (tmp_path / "run-b" / "wandb").exists()  # disabled writes nothing


def test_a_resumed_run_continues_its_wandb_run(tmp_path, monkeypatch):
    """The W&B run id is kept in the run directory: a second logger on the same directory (a
    resume) continues that W&B run, a logger on another directory starts its own (offline)."""
    pytest.importorskip("wandb")
    import wandb

    from ict.train.outputs import WANDB_ID_FILE

    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    run_dir = tmp_path / "run"
    ids = []
    for step in (1, 2):  # the first session, then the resumed one
        logger = ExternalLogger("wandb", run_dir, {}, mode="offline")
        ids.append(logger._wandb.id)
        logger.log({"reward/mean": 0.5}, step)
        logger.close()
    other = ExternalLogger("wandb", tmp_path / "other", {}, mode="offline")
    other_id = other._wandb.id
    other.close()
    wandb.teardown()
    assert ids[0] == ids[1] == (run_dir / WANDB_ID_FILE).read_text().strip()
    assert other_id != ids[0]
    sessions = sorted((run_dir / "wandb").glob("offline-run-*"))
    assert len(sessions) == 2 and all(f"-{ids[0]}" in p.name for p in sessions)  # same id
