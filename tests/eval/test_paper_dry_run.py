"""The paper preset: its settings construct valid training configs, and its dry run (tiny model,
fixtures) goes through the whole pipeline: mixture training of the four methods over seeds, the
seven-benchmark evaluation of every cell, and the paper's table over seeds."""

import json

import pytest

from ict.compare.presets import get_preset, read_preset_file
from ict.data import PAPER_BENCHMARKS
from ict.errors import ConfigError
from ict.eval.paper import grid_paper_tables

PAPER = read_preset_file("paper")  # src/ict/configs/presets/paper.yaml
PAPER_MODELS, PAPER_METHODS, PAPER_TASK = (
    PAPER["model_sizes"],
    PAPER["methods"],
    PAPER["train"]["task"],
)


def paper_preset(model_size=None, **options):
    return get_preset("paper", model_size=model_size, **options)


@pytest.mark.parametrize("size", sorted(PAPER_MODELS))
def test_paper_preset_configs_are_valid(size):
    from ict.train import TrainConfig

    preset = get_preset("paper", model_size=size)
    assert preset.methods == ["grpo", "entropy", "stapo", "ict"] and preset.seeds == 5
    assert preset.eval.benchmarks == PAPER_BENCHMARKS and set(preset.eval.ks) == {1, 4}
    assert 4 <= preset.eval.n <= 16 and preset.train["task"] == PAPER_TASK
    for method in preset.methods:
        config = TrainConfig(**preset.cell_train(method))
        assert config.method == method and config.model == PAPER_MODELS[size]
    from ict.train.plan import RunPlan

    def resolved(method):
        return RunPlan.from_config(TrainConfig(**preset.cell_train(method))).config

    ict = resolved("ict")  # the paper's ICT (ict.methods)
    assert (ict.scope, ict.reference, ict.loss_agg) == (
        "sequence",
        "group_position",
        "seq_mean_token_mean",
    )
    assert resolved("entropy").ratio == 0.2
    # verl's GRPO recipe's KL term, on every valid token, for every method
    assert (ict.kl_coef, ict.kl_estimator, ict.kl_on) == (0.001, "low_var_kl", "valid")


def test_paper_preset_errors():
    with pytest.raises(ConfigError, match="0.5b"):
        paper_preset("3b")
    with pytest.raises(ConfigError, match="work_dir"):
        paper_preset(dry_run=True)
    with pytest.raises(ConfigError, match="no options"):
        get_preset("toy", model_size="7b")


def test_paper_dry_run_pipeline(tmp_path, capsys):
    """`ict compare --preset paper --dry-run`: mixture training of the four methods over seeds,
    the seven-benchmark evaluation of every cell, the report and the paper's table over seeds."""
    from ict.cli import main

    out = tmp_path / "grid"
    assert main(["compare", "--preset", "paper", "--dry-run", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "AIME 2025 P@4" in printed and "| ict |" in printed
    preset = paper_preset(dry_run=True, work_dir=out)
    dirs = [out / "runs" / f"{m}_seed{s}" for m in preset.methods for s in range(preset.seeds)]
    assert all((d / "final_eval.json").exists() for d in dirs)
    assert len(dirs) == len(preset.methods) * preset.seeds
    # training used the boxed-answer prompt on the decontaminated mixture
    prompts = [
        json.loads(line)["prompt"]
        for run_dir in dirs
        for line in (run_dir / "samples.jsonl").read_text().splitlines()
    ]
    assert prompts and all("\\boxed{}" in p for p in prompts)
    assert not any("apples and buys 4 more" in p.lower() for p in prompts)  # a GSM8K test problem
    tables = grid_paper_tables(dirs)
    assert list(tables) == PAPER_METHODS
    for table in tables.values():
        assert table["seeds"] == 2 and list(table["rows"]) == list(PAPER_BENCHMARKS)
        assert table["average"]["pass@4"]["ci95"] is not None
        for row in table["rows"].values():
            assert 0 <= row["pass@1"]["mean"] <= row["pass@4"]["mean"] <= 1
    saved = json.loads((out / "report" / "paper_table.json").read_text())
    assert set(saved) == set(PAPER_METHODS)
    assert (out / "report" / "report.md").exists()
