"""TrainConfig: defaults, YAML (flat and grouped), precedence flags > YAML > defaults, errors."""

import argparse
import dataclasses

import pytest

from ict.errors import ConfigError
from ict.train.config import TrainConfig, preset_path


def resolved(config):
    """The config with the method's settings explicit, as the run resolves it (RunPlan)."""
    from ict.train.plan import RunPlan

    return RunPlan.from_config(config).config


def parse(argv):
    from ict.cli.train import add_parser, resolve_config

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"), "train a model")
    return resolve_config(parser.parse_args(["train", *argv]))


def test_packaged_default_preset_equals_dataclass_defaults():
    assert TrainConfig.from_yaml(preset_path("default")) == TrainConfig()


def test_defaults_follow_method_md():
    c = TrainConfig()
    # method settings left None take the method's (ict.methods): the paper's ICT
    assert (c.method, c.reference, c.scope, c.loss_agg, c.dense_warmup_steps) == (
        "ict",
        None,
        None,
        None,
        None,
    )
    r = resolved(c)
    assert (r.reference, r.scope, r.granularity, r.ratio) == (
        "group_position",
        "sequence",
        "position",
        0.1,
    )
    assert (r.eps_low, r.eps_high, r.loss_agg, r.normalize_by) == (
        0.2,
        0.28,
        "seq_mean_token_mean",
        "selected",
    )
    # the paper's Theta = 10, capped at half of a short run; explicit values are kept
    assert r.dense_warmup_steps == min(10, c.max_steps // 2)
    assert resolved(TrainConfig(max_steps=60)).dense_warmup_steps == 10
    assert resolved(TrainConfig(max_steps=60, dense_warmup_steps=40)).dense_warmup_steps == 40
    assert resolved(TrainConfig(max_steps=4, dense_warmup_steps=3)).dense_warmup_steps == 3
    # the earlier guess stays reachable by name and by flags
    b = resolved(TrainConfig(method="ict_batch_mean"))
    assert (b.reference, b.scope, b.loss_agg, b.dense_warmup_steps) == (
        "batch_mean",
        "global",
        "token_mean",
        0,
    )
    f = resolved(
        TrainConfig(reference="batch_mean", scope="global", loss_agg="token_mean", max_steps=30)
    )
    assert (f.reference, f.scope, f.loss_agg, f.dense_warmup_steps) == (
        "batch_mean",
        "global",
        "token_mean",
        10,
    )
    e = resolved(TrainConfig(method="entropy"))
    assert (e.scope, e.ratio, e.dense_warmup_steps) == ("global", 0.2, 0)
    assert (c.stapo_prob_below, c.stapo_entropy_quantile, c.kl_coef, resolved(c).advantage) == (
        0.01,
        0.05,
        0.0,
        "grpo",
    )
    assert c.model is None and c.task.startswith("rg:basic_arithmetic")


def test_flat_and_grouped_yaml_agree(tmp_path):
    flat = tmp_path / "flat.yaml"
    flat.write_text("learning_rate: 1e-5\nmethod: grpo\nmax_steps: 3\n")
    grouped = tmp_path / "grouped.yaml"
    grouped.write_text(
        "optim:\n  learning_rate: 1.0e-5\nmethod:\n  method: grpo\nrun: {max_steps: 3}\n"
    )
    a, b = TrainConfig.from_yaml(flat), TrainConfig.from_yaml(grouped)
    assert a == b
    assert a.learning_rate == 1e-5 and isinstance(
        a.learning_rate, float
    )  # YAML reads "1e-5" as a string


def test_saved_yaml_round_trips(tmp_path):
    c = TrainConfig(method="ict+stapo", ratio=0.2, dual_clip=3.0, stop=[], task_config={"a": 1})
    c.save_yaml(tmp_path / "c.yaml")
    assert TrainConfig.from_yaml(tmp_path / "c.yaml") == c


def test_unknown_key_names_key_and_close_match(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("learning_rte: 1e-5\n")
    with pytest.raises(ConfigError, match=r"unknown config key 'learning_rte'.*learning_rate"):
        TrainConfig.from_yaml(path)
    path.write_text("optim:\n  warmup: 3\n")
    with pytest.raises(ConfigError, match=r"'warmup'.*section optim.*warmup_steps"):
        TrainConfig.from_yaml(path)


@pytest.mark.parametrize(
    ("changes", "pattern"),
    [
        ({"method": "ictt"}, r"method='ictt' is unknown.*did you mean ict"),
        ({"method": "ict+foo"}, r"unknown selector 'foo'"),
        ({"reference": "mean"}, r"reference='mean' is unknown: use one of batch_mean"),
        ({"ratio": 1.5}, r"ratio=1.5 must be in \(0, 1\]"),
        ({"num_generations": 1}, r"num_generations must be >= 2"),
        ({"max_steps": 0}, r"max_steps must be a positive integer"),
        ({"temperature": 0.0}, r"temperature must be > 0"),
        ({"dual_clip": 0.5}, r"dual_clip must be > 1"),
        ({"loss_agg": "sum"}, r"loss_agg='sum'"),
    ],
)
def test_invalid_values_raise_clear_errors(changes, pattern):
    with pytest.raises(ConfigError, match=pattern):
        TrainConfig(**changes)


def test_flags_override_yaml_override_defaults(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("method: entropy\nlearning_rate: 1e-5\nmax_steps: 7\n")
    config, resume = parse(
        ["--config", str(path), "--learning-rate", "3e-6", "--no-plots", "--dual-clip", "3"]
    )
    assert resume is None
    assert config.method == "entropy"  # from YAML
    assert config.learning_rate == 3e-6  # flag beats YAML
    assert config.max_steps == 7 and config.plots is False and config.dual_clip == 3.0
    assert config.eps_high == TrainConfig().eps_high  # default
    config, _ = parse(["--task-config", "{min_terms: 3}", "--stop", "[]", "--ratio", "none"])
    assert config.task_config == {"min_terms": 3} and config.stop == [] and config.ratio is None


def test_bad_flag_value_and_preset_name():
    with pytest.raises(ConfigError, match=r"max_steps='ten'.*not a valid int"):
        parse(["--max-steps", "ten"])
    config, _ = parse(["--config", "default"])
    assert config == TrainConfig()
    with pytest.raises(ConfigError, match="no such file or packaged preset"):
        parse(["--config", "nonexistent"])


def test_help_lists_every_option_grouped_by_section(capsys):
    from ict.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--help"])
    text = capsys.readouterr().out
    for section in ("model:", "data:", "rollout:", "method:", "loss:", "optim:", "run:", "health:"):
        assert section in text
    for field in dataclasses.fields(TrainConfig):
        assert "--" + field.name.replace("_", "-") in text


def test_task_config_values_survive_the_spec_string():
    """A '+' (or '&', '=') in a task option reads back as itself, not as a space or a split."""
    from ict.data.tasks import parse_spec
    from ict.train.problems import task_spec

    config = TrainConfig(
        task="rg:basic_arithmetic?min_terms=2",
        task_config={"operators": ["+"], "note": "a&b=c d"},
    )
    name, options = parse_spec(task_spec(config))
    assert name == "rg:basic_arithmetic"
    assert options == {"min_terms": 2, "operators": ["+"], "note": "a&b=c d"}
