"""`ict compare --preset toy-cot` end to end with a reduced budget (tiny warm start, 2 methods,
1 seed, 2 steps), through the CLI, and the preset's own settings."""

import json

from ict.cli import main
from ict.compare import presets
from ict.compare.presets import EvalSpec, WarmStart, get_preset
from ict.data.toy import toy_task
from ict.data.toy.cot import CATEGORIES, ToyCotTask, response_tokens


def test_preset_settings():
    preset = get_preset("toy-cot")
    assert preset.methods == [
        "grpo", "entropy", "stapo", "random", "random_sequence", "ict", "ict_batch_mean",
    ]  # fmt: skip
    assert preset.seeds >= 5 and toy_task(preset.task) == ToyCotTask()
    assert preset.train["max_new_tokens"] > response_tokens(toy_task(preset.task)) >= 40
    assert preset.train["num_log_samples"] % preset.train["num_generations"] == 0  # whole groups
    assert preset.train["task"] == "toy:cot"


def test_toy_cot_grid_end_to_end(tmp_path, monkeypatch):
    monkeypatch.setenv("ICT_CACHE", str(tmp_path / "cache"))
    real = presets.get_preset

    def reduced(name, **options):
        preset = real(name, **options)
        if name == "toy-cot":
            preset.warm = WarmStart(
                hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32,
                max_steps=4, check_every=4, batch_size=8,
            )  # fmt: skip
            preset.train.update(
                task_config={"digits": 2},  # the task: toy:cot?digits=2
                max_new_tokens=response_tokens(ToyCotTask(digits=2)) + 2, prompts_per_step=2,
                num_generations=4, num_log_samples=8, max_steps=2, save_every=1,
                log_samples_every=1, dense_warmup_steps=1, train_size=20,
            )  # fmt: skip
            preset.eval = EvalSpec(size=4, n=2, ks=(1, 2))
        return preset

    monkeypatch.setattr(presets, "get_preset", reduced)
    out = tmp_path / "grid"
    args = ["compare", "--preset", "toy-cot", "--methods", "grpo,ict", "--seeds", "1"]
    assert main([*args, "--out", str(out)]) == 0
    final = json.loads((out / "runs" / "ict_seed0" / "final_eval.json").read_text())
    label = "toy:cot?digits=2"  # the cells' task spec labels every evaluation
    assert {k for k in final["metrics"] if "/pass@" in k} == {
        f"eval/{label}/pass@1",
        f"eval/{label}/pass@2",
    }
    assert final["per_problem"][label]["n"] == [2, 2, 2, 2]
    report = (out / "report" / "report.md").read_text()
    assert "Where the picks fall" in report and "share at first divergence" in report
    positions = json.loads((out / "report" / "report.json").read_text())["positions"]
    # the chain task's own labels (an untrained model writes few well-formed steps)
    assert set(positions["categories"]["all tokens"]) <= set(CATEGORIES)
    assert positions["groups"] >= 1
    start = json.loads((out / "start_eval.json").read_text())  # the warm start before RL
    assert start["settings"] == final["settings"] and f"eval/{label}/pass@1" in start["metrics"]
