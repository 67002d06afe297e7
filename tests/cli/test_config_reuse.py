"""A run's config.yaml records what was chosen apart from what the method implied: reused with
`--config RUN/config.yaml --method B` it trains B as B is registered, for every pair of methods;
a resumed run keeps its method."""

from __future__ import annotations

import argparse

import pytest
import yaml

from ict.errors import ConfigError
from ict.methods import METHODS
from ict.train.config import TrainConfig
from ict.train.plan import RunPlan


def parse(argv):
    from ict.cli.train import add_parser, resolve_config

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"), "train a model")
    return resolve_config(parser.parse_args(["train", *argv]))[0]


def write_run_config(run_dir, method: str):
    """config.yaml as the trainer writes it (Trainer._setup_run_dir) for a run of `method`."""
    chosen = TrainConfig(method=method, max_steps=20)
    plan = RunPlan.from_config(chosen)
    run_dir.mkdir(parents=True, exist_ok=True)
    chosen.save_yaml(
        run_dir / "config.yaml",
        extra={"precision": plan.precision.as_dict()},
        resolved=plan.config,
    )
    return run_dir / "config.yaml"


@pytest.fixture(scope="module")
def run_configs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    return {name: write_run_config(root / name, name) for name in METHODS}


def test_config_yaml_keeps_the_choices_apart_from_the_method_defaults(run_configs):
    saved = yaml.safe_load(run_configs["ict"].read_text())
    assert saved["method"]["method"] == "ict"
    assert saved["method"]["ratio"] is None and saved["method"]["scope"] is None  # not chosen
    plan = RunPlan.from_config(TrainConfig(method="ict", max_steps=20))
    assert saved["resolved"]["ratio"] == plan.method.ratio == 0.1
    assert saved["resolved"]["scope"] == plan.method.scope
    assert saved["resolved"]["dense_warmup_steps"] == plan.method.dense_warmup_steps
    assert "precision" in saved["facts"]
    # reloading gives back the chosen config, not the resolved one
    assert TrainConfig.from_yaml(run_configs["ict"]) == TrainConfig(method="ict", max_steps=20)


@pytest.mark.parametrize("b", list(METHODS))
def test_config_of_any_run_plus_method_b_is_method_b(run_configs, b):
    alone = RunPlan.from_config(parse(["--method", b, "--max-steps", "20"]))
    assert alone.method.name == b or alone.config.method == b
    for a, path in run_configs.items():
        reused = RunPlan.from_config(parse(["--config", str(path), "--method", b]))
        assert reused == alone, f"--config <{a} run>/config.yaml --method {b}"


def test_an_explicit_choice_is_kept_when_reused(tmp_path):
    chosen = TrainConfig(method="entropy", ratio=0.3)
    chosen.save_yaml(tmp_path / "config.yaml", resolved=RunPlan.from_config(chosen).config)
    reused = parse(["--config", str(tmp_path / "config.yaml"), "--method", "random"])
    assert reused.ratio == 0.3 and RunPlan.from_config(reused).method.ratio == 0.3


def test_resume_keeps_the_method(run_configs):
    run_dir = run_configs["ict"].parent
    with pytest.raises(ConfigError) as err:
        parse(["--resume", str(run_dir), "--method", "grpo"])
    line = str(err.value)
    assert "\n" not in line and "keeps its method" in line and "--method grpo" in line
    assert parse(["--resume", str(run_dir), "--method", "ict"]).method == "ict"  # the same: fine
    assert parse(["--resume", str(run_dir)]).method == "ict"


def test_an_older_resolved_config_is_refused_for_another_method(tmp_path):
    resolved = RunPlan.from_config(TrainConfig(method="ict")).config
    old = resolved.to_dict()
    old["facts"] = {"precision": {}}  # written by ict train before `resolved:` existed
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(old))
    with pytest.raises(ConfigError, match="cannot be reused for --method grpo"):
        parse(["--config", str(tmp_path / "config.yaml"), "--method", "grpo"])


def test_the_trainer_writes_the_chosen_config(tiny, tmp_path):
    """The config.yaml the native trainer writes (not a copy of its code) reuses as chosen."""
    from ict.train import Trainer

    run_dir = tmp_path / "entropy-run"
    chosen = TrainConfig(method="entropy", max_steps=20, output_dir=str(run_dir), plots=False)
    problems = [{"prompt": f"{i} + {i} = ?", "reward": len} for i in range(4)]
    Trainer(chosen, model=tiny[0], tokenizer=tiny[1], problems=problems)
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert saved["method"]["ratio"] is None and saved["resolved"]["ratio"] == 0.2
    reused = parse(["--config", str(run_dir / "config.yaml"), "--method", "grpo"])
    alone = parse(
        ["--method", "grpo", "--max-steps", "20", "--no-plots", "--output-dir", str(run_dir)]
    )
    assert RunPlan.from_config(reused) == RunPlan.from_config(alone)
