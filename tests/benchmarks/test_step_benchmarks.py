"""The step benchmarks' --quick modes run end to end and report what docs/benchmarks.md needs.

No timing thresholds: only structure, positive times, and ratios computed from the same run.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).parents[2] / "benchmarks"


def run(name, tmp_path, *args):
    out = tmp_path / f"{name}.json"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    res = subprocess.run(
        [sys.executable, str(BENCH / f"{name}.py"), "--quick", *args, "--json", str(out)],
        env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(out.read_text()), res.stdout


def test_step_vs_trl_quick(tmp_path):
    result, stdout = run("step_vs_trl", tmp_path)
    assert [r["method"] for r in result["results"]] == ["grpo", "ict"]
    for r in result["results"]:
        for side in ("native", "trl"):
            assert all(r[side][k] > 0 for k in ("rollout", "update", "step")), r[side]
            assert r[side]["scoring"] >= 0
        # the same forced length on both sides: same number of response tokens per step
        assert r["native"]["tokens"] == r["trl"]["tokens"] == 2 * 4 * 8
        for k in ("rollout", "update", "step"):
            assert r["ratio"][k] == pytest.approx(r["native"][k] / r["trl"][k])
        assert len(r["native_steps"]) == len(r["trl_steps"]) == 2  # 1 warm-up + 1 counted
    assert "| step |" in stdout and "ict / TRL" in stdout


def test_trl_one_forward_quick(tmp_path):
    result, stdout = run("trl_one_forward", tmp_path, "--steps", "1")
    means = result["means"]
    assert list(means) == ["trl_grpo", "ict_one_forward", "ict_two_pass"]
    for variant, m in means.items():
        assert m["step"] > 0 and m["rollout"] > 0, variant
        assert m["rest"] == pytest.approx(m["step"] - m["rollout"])
        assert len(result["steps"][variant]) == 2  # 1 warm-up + 1 counted
    assert "| ict_one_forward |" in stdout and "step / TRL" in stdout


def test_stats_in_step_quick(tmp_path):
    result, stdout = run("stats_in_step", tmp_path)
    rows = result["results"]
    assert {(r["threads"], r["variant"]) for r in rows} == {
        (t, v) for t in (1, 2) for v in ("fixed", "unfixed")
    }
    for r in rows:
        assert r["floor_s"] > 0 and r["stats_s"] > 0 and r["positions"] > 0
        assert r["ratio"] == pytest.approx(r["stats_s"] / r["floor_s"])
        assert r["extra_mib"] >= 0
    assert "score / floor" in stdout


def test_rollout_quick(tmp_path):
    result, stdout = run("rollout", tmp_path)
    assert set(result["best"]) == {"bare", "bare_static", "ict", "ict_shared"}
    assert len(set(result["tokens"].values())) == 1  # every variant samples B x G x L tokens
    assert all(w > 0 for w, _ in result["best"].values())
    assert "| ict_shared |" in stdout


def test_scaling_quick(tmp_path):
    result, stdout = run("scaling", tmp_path)
    rows = result["rows"]
    assert {(r["method"], r["G"], r["L"]) for r in rows} == {
        (m, g, 8) for m in ("grpo", "ict") for g in (2, 4)
    }
    for r in rows:
        assert r["tokens"] == r["G"] * r["L"]
        assert r["step_s"] > 0 and r["stats_peak_mib"] >= 0
        assert r["s_per_1k_tokens"] == pytest.approx(1000 * r["step_s"] / r["tokens"])
    assert "stats peak (MiB)" in stdout
