"""benchmarks/study_throughput.py --quick runs a small study through today's path and the fast
path in one run and reports cells per hour; no timing thresholds, only structure, ratios from the
same run, and the two paths' results compared."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).parents[2] / "benchmarks"


def test_study_throughput_quick(tmp_path):
    out = tmp_path / "study.json"
    env = dict(os.environ, OMP_NUM_THREADS="1", ICT_CACHE=str(tmp_path / "cache"))
    res = subprocess.run(
        [sys.executable, str(BENCH / "study_throughput.py"), "--quick", "--json", str(out),
         "--out", str(tmp_path / "grids")],
        env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["methods"] == ["grpo", "ict"] and len(result["cells"]) == 2
    summary = result["summary"]
    for path in ("today", "fast"):
        s = summary[path]
        assert s["s_per_cell"] > 0 and s["cells_per_hour"] == pytest.approx(3600 / s["s_per_cell"])
        walls = [c[path]["wall_s"] for c in result["cells"]]
        assert s["s_per_cell"] == pytest.approx(sum(walls) / len(walls))
        assert set(s["cpu_phases"]) == set(s["phases"]) == {
            "rollout", "statistics", "update", "periodic_eval", "final_eval", "other"
        }  # fmt: skip
        assert all(c[path]["steps"] == 3 for c in result["cells"])
    ratio = summary["fast"]["cells_per_hour"] / summary["today"]["cells_per_hour"]
    assert result["ratio"] == pytest.approx(ratio)
    # the fast path samples what HF generate samples: the same results files
    assert result["identical"] is True and all(c["identical"] for c in result["cells"])
    run = Path(result["cells"][0]["fast"]["run_dir"])
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert any(r.get("update/rows_run", 0) > 0 for r in rows)  # the updates ran
    assert (run / "eval_steps" / "step_000002.json").is_file() and (
        run / "final_eval.json"
    ).is_file()
    assert (
        "cells per hour, fast / today" in res.stdout
        and "same results on both paths: yes" in res.stdout
    )
    # the exploration study's cell through today's evaluation and the batched one
    explore = result["explore"]
    assert explore["steps"] == 3 and explore["same_training"] is True
    s = explore["summary"]
    for path in ("chunked", "batched"):
        assert s[path]["evaluations"] == 2 and s[path]["eval_cpu_s"] > 0
        assert s[path]["evaluations_per_cpu_hour"] == pytest.approx(
            3600 * s[path]["evaluations"] / s[path]["eval_cpu_s"]
        )
        settings = json.loads(
            (Path(explore["cells"][0][path]["run_dir"]) / "final_eval.json").read_text()
        )["settings"]
        assert settings["sampler"] == path and settings["temperature"] == 1.5
    ratio = s["batched"]["evaluations_per_cpu_hour"] / s["chunked"]["evaluations_per_cpu_hour"]
    assert explore["eval_ratio"] == pytest.approx(ratio)
    assert f"evaluations per CPU hour, batched / today: {ratio:.2f}x" in res.stdout


def test_fast_options_quick(tmp_path):
    out = tmp_path / "options.json"
    res = subprocess.run(
        [sys.executable, str(BENCH / "fast_options.py"), "--quick", "--json", str(out)],
        env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    rows = {r["option"]: r for r in json.loads(out.read_text())["results"]}
    assert set(rows) == {
        "decode B=32", "decode B=256", "eval batch", "seeds batched", "forward, no gradient",
        "forward + backward", "prompt encoding",
    }  # fmt: skip
    assert rows["decode B=32"]["same_samples"] and rows["decode B=256"]["same_samples"]
    for r in rows.values():
        if "baseline_cpu_s" in r:
            assert r["speedup_cpu"] == pytest.approx(r["baseline_cpu_s"] / r["option_cpu_s"])
    assert "| decode B=32 |" in res.stdout
