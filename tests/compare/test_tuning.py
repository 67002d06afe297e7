"""The tuning stage: the declared rule by hand, and a grid that tunes on validation problems, grows
its grid at an edge, resumes, and runs its test cells at the selected learning rates."""

import json
import math
import os
import subprocess
import sys

import pytest
import yaml

from ict.compare import grid as grid_module
from ict.compare.grid import GridOptions, StartPoint, cell_dir, claim, run_grid, run_tuning
from ict.compare.tuning import (
    EDGES,
    TuningSpec,
    cell_score,
    choose_smallest_within_margin,
    edge_of,
    grown,
    select_value,
    shared_per_seed,
    tuning_path,
)
from ict.errors import ConfigError

from .test_grid import tiny_preset


def result(step, **passes):
    return {"step": step, "benchmarks": {"t": {f"pass@{k}": v for k, v in passes.items()}}}


def test_cell_score_is_the_mean_over_checkpoints_of_the_mean_over_k():
    results = [result(50, **{"1": 0.2, "4": 0.6}), result(100, **{"1": 0.4, "4": 0.8})]
    assert cell_score(results, (1, 4)) == pytest.approx(((0.2 + 0.6) / 2 + (0.4 + 0.8) / 2) / 2)
    assert cell_score(results, (1,)) == pytest.approx(0.3)
    assert math.isnan(cell_score([], (1,)))


def test_the_smallest_value_within_the_margin_of_the_best_wins():
    assert select_value({1e-5: 0.50, 1e-4: 0.60, 1e-3: 0.59}, 0.02) == 1e-4
    assert select_value({1e-5: 0.585, 1e-4: 0.60, 1e-3: 0.61}, 0.02) == 1e-4
    assert select_value({1e-5: 0.595, 1e-4: 0.60, 1e-3: 0.61}, 0.02) == 1e-5
    assert select_value({1e-5: 0.595, 1e-4: 0.60, 1e-3: 0.61}, 0.0) == 1e-3
    assert select_value({1e-5: math.nan, 1e-4: 0.1}, 0.0) == 1e-4
    with pytest.raises(ConfigError, match="no tuning cell"):
        select_value({1e-5: math.nan}, 0.0)


def test_a_choice_at_an_edge_grows_the_grid_by_its_own_ratio_once():
    grid = (2e-5, 6.3e-5, 2e-4)
    assert (
        grown(grid, "high") == pytest.approx(6.35e-4) and grown(grid, "low") == 6.35e-6
    )  # 2e-5 * 2e-5 / 6.3e-5
    spec = TuningSpec(values=grid, tie_margin=0.0, grow=1)
    none = dict.fromkeys(EDGES, 0)
    at_top = {2e-5: {0: 0.1, 1: 0.3}, 6.3e-5: {0: 0.3, 1: 0.3}, 2e-4: {0: 0.5, 1: 0.4}}
    c = choose_smallest_within_margin(at_top, spec, grid, none)
    assert c.selected == 2e-4 and c.grow == (grown(grid, "high"),) and c.at_edge == ()
    assert c.scores[2e-5] == pytest.approx(0.2) and c.scores[2e-4] == pytest.approx(0.45)
    used = choose_smallest_within_margin(at_top, spec, grid, {"low": 0, "high": 1})
    assert used.grow == () and used.at_edge == ("high",)  # growth used up: flagged
    inside = {2e-5: {0: 0.1}, 6.3e-5: {0: 0.5}, 2e-4: {0: 0.4}}
    c = choose_smallest_within_margin(inside, spec, grid, none)
    assert c.grow == () and c.at_edge == () and edge_of(6.3e-5, grid) is None


def test_shared_mode_averages_the_methods_on_common_values_and_seeds():
    per_method = {
        "grpo": {1e-4: {0: 0.6, 1: 0.4}, 1e-3: {0: 0.2, 1: 0.2}},
        "ict": {1e-4: {0: 0.2, 1: 0.2}, 1e-3: {0: 0.8}},
    }
    shared = shared_per_seed(per_method)
    assert shared == {1e-4: {0: 0.4, 1: 0.30000000000000004}, 1e-3: {0: 0.5}}


def test_the_spec_refuses_overlapping_seeds_and_bad_grids():
    with pytest.raises(ConfigError, match="disjoint"):
        TuningSpec(seeds=(1, 1000)).validate(range(5))
    with pytest.raises(ConfigError, match="two positive"):
        TuningSpec(values=(1e-4,)).validate(range(5))
    with pytest.raises(ConfigError, match="not one of"):
        TuningSpec(mode="best").validate(range(5))
    TuningSpec().validate(range(5))


def test_a_claim_is_exclusive_and_a_dead_holder_is_taken_over(tmp_path):
    run = tmp_path / "runs" / "grpo_seed0"
    with claim(run) as mine:
        assert mine
        with claim(run) as again:  # held by a live process (this one)
            assert not again
    assert not list(run.parent.glob(".*.claim"))  # released
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    lock = run.parent / f".{run.name}.claim"
    lock.write_text(f"{int(dead.stdout)} {os.uname().nodename}")
    with claim(run) as mine:  # the holder is gone: taken over
        assert mine


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ICT_CACHE", str(tmp_path / "cache"))


def test_a_grid_tunes_on_validation_then_tests_at_each_methods_choice(tmp_path, cache):
    preset = tiny_preset()
    preset.tuning = TuningSpec(values=(1e-4, 1e-3), seeds=(1000,), metric=(1, 2), grow=1)
    preset.train.update(eval_every=1, eval_size=4, eval_num_samples=4)  # checkpoints: steps 1, 2
    out, logs = tmp_path / "grid", []
    assert run_grid(preset, out, seeds=[0], stop_after=1, log=logs.append) == []  # interrupted
    assert not tuning_path(out).exists()
    dirs = run_grid(preset, out, seeds=[0], log=logs.append)  # resumes the tuning cells

    record = json.loads(tuning_path(out).read_text())
    for method in ("grpo", "ict"):
        m = record["methods"][method]
        # a two-point grid always puts the choice at an edge: grown once, to three points
        assert len(m["grid"]) == 3 and m["selected"] in m["grid"]
        scores = {}  # the rule recomputed from the tuning cells' own validation results
        for value in m["grid"]:
            run = out / "tuning" / "runs" / f"{method}_lr{value:.3g}_seed1000"
            final = json.loads((run / "final_eval.json").read_text())
            steps = [json.loads((run / "eval_steps" / f"step_00000{i}.json").read_text())
                     for i in (1, 2)]  # fmt: skip
            assert all(r["settings"]["split"] == "validation" for r in [final, *steps])
            same = ("settings", "per_problem", "metrics", "step")  # the last periodic one, reused
            assert {k: final[k] for k in same} == {k: steps[1][k] for k in same}
            per_step = [(b["pass@1"] + b["pass@2"]) / 2
                        for r in steps for b in r["benchmarks"].values()]  # fmt: skip
            scores[value] = sum(per_step) / 2  # the mean over checkpoints after RL
        assert m["selected"] == select_value(scores, record["rule"]["tie_margin"])
        test_cell = cell_dir(out, method, 0)
        config = yaml.safe_load((test_cell / "config.yaml").read_text())
        assert config["optim"]["learning_rate"] == m["selected"]
        test_final = json.loads((test_cell / "final_eval.json").read_text())
        assert test_final["settings"]["split"] == "eval"
    assert dirs == [cell_dir(out, "grpo", 0), cell_dir(out, "ict", 0)]
    grid_record = json.loads((out / "grid.json").read_text())
    assert grid_record["tuned"] and grid_record["learning_rate"] == record["selected"]
    assert any("adding learning_rate=" in line for line in logs)


def fake_cells(monkeypatch, curve):
    """Replace the grid's cell runner: each tuning cell gets a final_eval.json whose pass@4 is
    curve(method, lr, seed) (a validation result at the last step), so the stage's loop, growth,
    files and record run as in a study without training. Returns the configs it was given."""
    seen = []

    def run_all(cells, start, preset, grid):
        for c in cells:
            seen.append(c.config)
            lr, path = c.config.learning_rate, c.run_dir / "final_eval.json"
            if not path.exists():
                result = {"step": c.config.max_steps, "settings": {"split": c.config.eval_split},
                          "benchmarks": {"t": {"pass@4": curve(c.method, lr, c.seed)}}}  # fmt: skip
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(result))

    monkeypatch.setattr(grid_module, "run_all", run_all)
    return seen


def final_argmax_preset(**change):
    preset = tiny_preset()
    preset.primary = ["ict-grpo@pass@4"]
    preset.tuning = TuningSpec(**{
        "rule": "final_argmax", "centre": 2e-5, "seeds": (1000, 1001, 1002), "metric": (4,),
        "validation_size": 128, "validation_samples": 16, **change,
    })  # fmt: skip
    return preset


def test_the_stage_runs_final_argmax_growing_each_method_on_its_own_edge(tmp_path, monkeypatch):
    peaks = {"grpo": 8e-5, "ict": 5e-6}  # above and below the grid 1e-5, 2e-5, 4e-5
    wobble = {1000: 0.003, 1001: -0.002, 1002: -0.001}

    def curve(method, lr, seed):
        return 0.6 - 0.03 * abs(math.log2(lr / peaks[method])) + wobble[seed] * math.log2(lr / 1e-6)

    seen = fake_cells(monkeypatch, curve)
    preset, logs = final_argmax_preset(), []
    options = GridOptions(log=logs.append)
    spec = grid_module.tuning_spec(preset, options)
    selected = run_tuning(preset, tmp_path, spec, StartPoint(), options)
    assert selected == {"grpo": 8e-5, "ict": 5e-6}
    record = json.loads(tuning_path(tmp_path).read_text())
    assert record["rule"]["name"] == "final_argmax" and record["selected"] == selected
    grpo, ict = record["methods"]["grpo"], record["methods"]["ict"]
    assert grpo["grid"] == [1e-5, 2e-5, 4e-5, 8e-5, 1.6e-4] and grpo["growths"]["high"] == 2
    assert ict["grid"] == [2.5e-6, 5e-6, 1e-5, 2e-5, 4e-5] and ict["growths"]["low"] == 2
    assert grpo["at_edge"] == [] == ict["at_edge"]
    assert all(c.eval_split == "validation" and c.eval_size == 128 for c in seen)
    assert all(c.eval_num_samples == 16 for c in seen)
    assert sum("adding learning_rate=" in line for line in logs) == 4


def test_shared_final_argmax_gives_every_method_one_lr_and_flags_a_capped_edge(
    tmp_path, monkeypatch
):
    fake_cells(monkeypatch, lambda method, lr, seed: 0.3 + (lr < 1e-5) * 0.1 + seed * 1e-4)
    preset, logs = final_argmax_preset(grow=1, mode="shared"), []
    options = GridOptions(log=logs.append)
    spec = grid_module.tuning_spec(preset, options)
    selected = run_tuning(preset, tmp_path, spec, StartPoint(), options)
    assert selected == {"grpo": 5e-6, "ict": 5e-6}  # the one point below, after one growth
    record = json.loads(tuning_path(tmp_path).read_text())
    assert record["shared"]["at_edge"] == ["low"] and record["shared"]["grid"][0] == 5e-6
    assert any("shared: the best region still reaches the grid's low edge" in x for x in logs)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"seeds": (1000, 1001)}, ">= 3 tuning seeds"),
        ({"validation_size": None}, "got 64"),  # the cells' eval_size (TrainConfig's default)
        ({"metric": (2,), "validation_samples": 16}, "not a declared primary endpoint"),
    ],
)
def test_a_grid_refuses_a_final_argmax_spec_before_the_start_model(
    tmp_path, monkeypatch, change, message
):
    def never(*args, **kwargs):
        raise AssertionError("the start model was made before the tuning spec was checked")

    monkeypatch.setattr(grid_module, "prepare_start", never)
    with pytest.raises(ConfigError, match=message):
        run_grid(final_argmax_preset(**change), tmp_path / "grid", seeds=[0])
    assert not (tmp_path / "grid").exists()
