"""`ict compare --preset toy-cot-long` end to end with a reduced budget (tiny warm start, the new
methods, 1 seed, 4 steps with a periodic evaluation), through the CLI, and the preset's settings."""

import json

from ict.cli import main
from ict.compare import presets
from ict.compare.presets import EvalSpec, WarmStart, get_preset
from ict.data.toy.cot import ToyCotTask, response_tokens
from ict.train import TrainConfig


def test_preset_settings():
    preset = get_preset("toy-cot-long")
    assert preset.methods == ["grpo", "ict", "random_sequence", "entropy", "kl_cov"]
    tuning = preset.tuning  # each method's learning rate tuned on validation, seeds disjoint
    assert tuning.values == (2e-5, 6.3e-5, 2e-4) and tuning.mode == "per_method"
    assert not set(tuning.seeds) & set(range(preset.seeds)) and tuning.metric == (1, 4)
    tuning.validate(range(preset.seeds))
    assert (
        preset.seeds >= 20
        and preset.train["max_steps"] >= 150
        and preset.train["max_steps"] % preset.train["eval_every"] == 0
    )
    assert preset.eval.n == 64 and preset.eval.ks == (1, 2, 4, 8, 16, 32, 64)
    assert preset.train["eval_every"] and preset.train["eval_num_samples"] == 64
    assert preset.warm == get_preset("toy-cot").warm  # the same cached start model as toy-cot
    for method in preset.methods:  # every cell is a valid config, with more than one update
        config = TrainConfig(**preset.cell_train(method))
        assert config.batch_size // config.mini_batch_size > 1


def test_before_rl_is_step_zero_and_the_final_number_is_the_last_periodic_one():
    """toy-cot-long's final evaluation (its EvalSpec) is its cells' periodic evaluation: one set of
    settings, so the before-RL evaluation is step 0 and a cell's final number is its last step's
    (before the one evaluation pipeline: 0.640 before RL vs 0.636 at step 0 on one model)."""
    from ict.compare.grid import final_evaluation
    from ict.train.evaluation import training_evaluation

    preset = get_preset("toy-cot-long")
    for method in preset.methods:
        config = TrainConfig(**preset.cell_train(method))
        final, periodic = final_evaluation(config, preset), training_evaluation(config)
        assert final.tasks == periodic.tasks and final.settings == periodic.settings


def test_toy_cot_long_grid_end_to_end(tmp_path, monkeypatch):
    monkeypatch.setenv("ICT_CACHE", str(tmp_path / "cache"))
    real = presets.get_preset

    def reduced(name, **options):
        preset = real(name, **options)
        if name == "toy-cot-long":
            preset.warm = WarmStart(
                hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32,
                max_steps=4, check_every=4, batch_size=8,
            )  # fmt: skip
            preset.train.update(
                task_config={"digits": 2},
                max_new_tokens=response_tokens(ToyCotTask(digits=2)) + 2, prompts_per_step=2,
                num_generations=4, mini_batch_size=4, num_log_samples=8, max_steps=4,
                save_every=2, log_samples_every=2, dense_warmup_steps=1, train_size=20,
                eval_every=2, eval_size=3, eval_num_samples=4,
            )  # fmt: skip
            preset.eval = EvalSpec(size=4, n=4, ks=(1, 2, 4))
        return preset

    monkeypatch.setattr(presets, "get_preset", reduced)
    out = tmp_path / "grid"
    methods = "clip_cov,kl_cov,entropy_bonus,ict_branch"
    args = ["compare", "--preset", "toy-cot-long", "--methods", methods, "--seeds", "1"]
    args += ["--tuning", "off"]  # every method at the preset's lr (the stage: test_tuning.py)
    assert main([*args, "--out", str(out)]) == 0
    for method in methods.split(","):
        run = out / "runs" / f"{method}_seed0"
        final = json.loads((run / "final_eval.json").read_text())
        assert {f"eval/toy:cot?digits=2/pass@{k}" for k in (1, 2, 4)} <= set(final["metrics"])
        steps = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        evaluated = [s["step"] for s in steps if any(k.startswith("eval/") for k in s)]
        assert evaluated == [2, 4]
    saved = (out / "runs" / "kl_cov_seed0" / "config.yaml").read_text()
    assert "loss_mode: kl_cov" in saved and "kl_cov_ratio: 0.002" in saved
    assert (out / "report" / "report.md").is_file()
