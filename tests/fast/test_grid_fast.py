"""`ict compare`'s grid on the fast path: the same results files as with HF `generate`, and an
interrupted grid resumes across the two paths to the same results."""

import dataclasses
import json

import pytest

import ict.generation as generation
from ict.compare.grid import cell_dir, run_grid
from ict.compare.warm_start import warm_start
from tests.compare.test_grid import tiny_preset

VOLATILE = ("time/", "throughput/")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh warm-start cache holding the tiny preset's warm start, so that both grids load it
    (a grid that trains the warm start itself labels its model "unnamed" in the eval files)."""
    monkeypatch.setenv("ICT_CACHE", str(tmp_path / "cache"))
    preset = learning_preset()
    warm_start(preset.task, preset.warm)


def learning_preset():
    """The grid tests' tiny preset on sums of 0..2 with a warm start about half right (so groups
    have mixed rewards and the updates run), one seed."""
    preset = tiny_preset()
    preset.seeds = 1
    preset.train["task_config"] = {"max_a": 2, "max_b": 2}
    preset.warm = dataclasses.replace(
        preset.warm, max_steps=50, check_every=25, learning_rate=1e-2, target_accuracy=0.3
    )
    return preset


def results(run_dir):
    """A cell's results without its timings: metrics.jsonl numbers, eval files, final_eval."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    metrics = [{k: v for k, v in r.items() if not k.startswith(VOLATILE)} for r in rows]
    evals = {}
    for path in sorted(run_dir.glob("eval_steps/*.json")) + [run_dir / "final_eval.json"]:
        data = json.loads(path.read_text())
        for key in ("seconds", "date"):  # when it ran, not what it found
            data.pop(key, None)
        evals[path.name] = data
    return metrics, evals


def counting_hf_calls(monkeypatch):
    calls = []
    original = generation._generate_shared_prompts

    def counted(*a, **k):
        calls.append(1)
        return original(*a, **k)

    monkeypatch.setattr(generation, "_generate_shared_prompts", counted)
    return calls


def test_fast_grid_writes_the_results_of_todays_path(tmp_path, cache, monkeypatch):
    preset = learning_preset()
    preset.train.update(eval_every=1, eval_size=3, eval_num_samples=4)
    calls = counting_hf_calls(monkeypatch)
    run_grid(preset, tmp_path / "today", log=lambda _: None, fast=False)
    assert calls, "today's path samples with HF generate"
    calls.clear()
    run_grid(preset, tmp_path / "fast", log=lambda _: None)  # fast is the default for warm starts
    assert not calls, "the fast path never calls HF generate"
    for method in preset.methods:
        today = results(cell_dir(tmp_path / "today", method, 0))
        fast = results(cell_dir(tmp_path / "fast", method, 0))
        assert today == fast
        assert set(fast[1]) == {"step_000001.json", "step_000002.json", "final_eval.json"}
    # not a vacuous equality: rewards were mixed, so the updates ran and changed what was sampled
    assert any(r.get("update/rows_run", 0) > 0 for r in today[0]), today[0]


def test_grid_interrupted_on_one_path_resumes_on_the_other(tmp_path, cache):
    preset = learning_preset()
    preset.methods = ["grpo"]
    run_grid(preset, tmp_path / "whole", log=lambda _: None, fast=False)
    run_grid(preset, tmp_path / "split", log=lambda _: None, fast=False, stop_after=1)
    run_grid(preset, tmp_path / "split", log=lambda _: None, fast=True)  # resumed, fast
    assert results(cell_dir(tmp_path / "whole", "grpo", 0)) == results(
        cell_dir(tmp_path / "split", "grpo", 0)
    )
