"""The compare report's Exploration section: pass@k against k, and the curves against step."""

import json

import numpy as np
import pytest
from scipy import stats
from scipy.special import comb

from ict.report.comparison import build_report

from .helpers import write_run

P, N = 12, 8  # held-out problems, samples per problem
STEPS = (0, 4, 8)  # evaluated steps (0: heldout_before.json)
IDS = [f"p{i}" for i in range(P)]


def counts(seed: int) -> list[int]:
    return np.random.default_rng(seed).integers(0, N + 1, P).tolist()


def step_result(correct, step, seed=1234):
    """An evaluation result of one task (ict.eval.runner's schema; only what the report reads)."""
    return {
        "settings": {"n": N, "seed": seed, "limit": P},
        "benchmarks": {"toy": {}},
        "per_problem": {"toy": {"ids": IDS, "n": [N] * P, "correct": list(correct)}},
        "step": step,
    }


def write_steps(run, method_index: int, seed: int) -> dict[int, list[int]]:
    """heldout_before.json (step 0) and eval_steps/step_*.json; returns {step: correct [P]}."""
    out = {}
    for step in STEPS:
        correct = counts(1000 * method_index + 10 * seed + step)
        out[step] = correct
        path = run / ("heldout_before.json" if step == 0 else f"eval_steps/step_{step:06d}.json")
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(step_result(correct, step)))
    return out


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """OUT/runs/<method>_seed<s> for grpo (entropy collapses) and ict, 3 seeds, 8 logged steps,
    OUT/start_eval.json as the before-RL point."""
    out = tmp_path_factory.mktemp("grid")
    runs, finals, steps = [], {}, {}
    for mi, method in enumerate(("grpo", "ict")):
        for seed in range(3):
            final = counts(100 * mi + seed)
            run = write_run(out / "runs", method, seed, steps=8, correct=final, n=N,
                            collapse=method == "grpo")  # fmt: skip
            finals[(method, seed)] = final
            steps[(method, seed)] = write_steps(run, mi, seed)
            runs.append(run)
    start = {"toy": {"ids": IDS, "n": [N] * P, "correct": counts(999)}}
    (out / "start_eval.json").write_text(json.dumps({"metrics": {}, "per_problem": start}))
    # a mismatched file (another sampling seed) must not join the curves
    (runs[0] / "heldout_after.json").write_text(json.dumps(step_result([N] * P, 12, seed=5)))
    report = out / "report"
    build_report(runs, report, title="exploration")
    raw = json.loads((report / "report.json").read_text())["exploration"]
    return {"runs": runs, "finals": finals, "steps": steps, "start": start, "report": report,
            "raw": raw}  # fmt: skip


def binomial_mean(correct, k):
    return float(np.mean([1 - comb(N - c, k) / comb(N, k) for c in correct]))


def test_final_pass_at_k_for_every_k_equals_the_binomial_formula(grid):
    block = grid["raw"]["pass_at_k"]["toy"]
    assert block["ks"] == [1, 2, 4, 8]
    for method in ("grpo", "ict"):
        for k in (1, 2, 4, 8):
            entry = block["methods"][method][str(k)]
            expected = np.mean([binomial_mean(grid["finals"][(method, s)], k) for s in range(3)])
            assert entry["mean"] == pytest.approx(expected)
            assert 0.0 <= entry["low"] <= entry["mean"] <= entry["high"] <= 1.0
            assert entry["method"] == "hierarchical bootstrap" and entry["n"] == 3
    ref = block["reference"]["4"]
    assert ref["mean"] == pytest.approx(binomial_mean(grid["start"]["toy"]["correct"], 4))
    diff = block["difference"]["ict"]["2"]
    expected = block["methods"]["ict"]["2"]["mean"] - block["methods"]["grpo"]["2"]["mean"]
    assert diff["mean"] == pytest.approx(expected) and -1 <= diff["low"] <= diff["high"] <= 1
    # pass@2 is not a final key (final_eval.json holds pass@1 and pass@8): an exploratory
    # seed-level verdict from the per-seed pass@2, paired by seed
    per_seed = {
        m: [binomial_mean(grid["finals"][(m, s)], 2) for s in range(3)] for m in ("grpo", "ict")
    }
    ref = stats.ttest_rel(per_seed["ict"], per_seed["grpo"]).pvalue
    assert diff["p"] == pytest.approx(ref) and not diff["primary"]
    assert diff["verdict"] == (
        ("higher" if expected > 0 else "lower") if ref < 0.05 else diff["verdict"]
    )
    assert diff["verdict"] in ("higher", "lower", "equivalent", "inconclusive")


def test_report_has_a_row_per_k_and_the_plots(grid):
    md = (grid["report"] / "report.md").read_text()
    section = md[md.index("## Exploration") : md.index("## Final results")]
    assert "| k | before RL | grpo | ict |" in section
    for k in (1, 2, 4, 8):
        assert f"\n| {k} | " in section
    for name in ("pass_at_k_toy.png", "pass_at_k_diff_toy.png", "exploration_steps.png"):
        assert (grid["report"] / "plots" / name).stat().st_size > 0
        assert f"plots/{name}" in section
    assert "| method | step | seeds | pass@1 | pass@8 | H (nats) | H2 (nats) |" in section
    assert section.count("\n| grpo | ") == len(STEPS) and section.count("\n| ict | ") == len(STEPS)


def test_step_curves_are_the_means_of_the_run_files(grid):
    steps = grid["raw"]["steps"]
    for method in ("grpo", "ict"):
        curve = steps[method]
        assert curve["steps"] == list(STEPS) and curve["n"] == N  # heldout_after (seed 5) left out
        for i, step in enumerate(STEPS):
            files = [grid["steps"][(method, s)][step] for s in range(3)]
            assert curve["pass@1"][i]["mean"] == pytest.approx(
                np.mean([np.mean(c) / N for c in files])
            )
            assert curve["pass@n"][i]["mean"] == pytest.approx(np.mean([np.mean(np.asarray(c) > 0) for c in files]))  # fmt: skip
            assert 0 <= curve["pass@1"][i]["low"] <= curve["pass@1"][i]["high"] <= 1
        # H / H2 at step s: mean over seeds of the last 5 logged values at steps <= s
        for name, key in (("entropy", "valid/entropy"), ("renyi2", "valid/renyi2")):
            for i, step in enumerate(STEPS):
                per_seed = []
                for run in grid["runs"]:
                    if not run.name.startswith(method):
                        continue
                    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
                    per_seed.append(np.mean([r[key] for r in rows if r["step"] <= step][-5:]))
                assert curve[name][i]["mean"] == pytest.approx(np.mean(per_seed))


def test_change_and_collapse_criterion(grid):
    change = grid["raw"]["change"]
    for method in ("grpo", "ict"):
        c = change[method]
        assert (c["first_step"], c["last_step"]) == (0, STEPS[-1])
        last = np.mean([np.mean(grid["steps"][(method, s)][STEPS[-1]]) / N for s in range(3)])
        first = np.mean([np.mean(grid["steps"][(method, s)][0]) / N for s in range(3)])
        assert c["pass@1"]["mean"] == pytest.approx(last - first)
        assert c["pass@1"]["low"] <= c["pass@1"]["mean"] <= c["pass@1"]["high"]
    # helpers: grpo's H = exp(-s) (collapses), ict's H = 1 - 0.1 s over 8 steps (not a fifth);
    # the health window (10) shrinks to half the 8 logged steps
    grpo = np.exp(-np.arange(8.0))
    assert change["grpo"]["entropy_window"] == 4
    assert change["grpo"]["entropy_ratio"] == pytest.approx(grpo[-4:].mean() / grpo[:4].mean())
    assert change["grpo"]["collapsed"] and change["grpo"]["seeds_below"] == 3
    ict = 1 - 0.1 * np.arange(8.0)
    assert change["ict"]["entropy_ratio"] == pytest.approx(ict[-4:].mean() / ict[:4].mean())
    assert not change["ict"]["collapsed"] and change["ict"]["seeds_below"] == 0
    # the pass@1 change: an exploratory seed-level paired t of last minus first
    for method in ("grpo", "ict"):
        last = [np.mean(grid["steps"][(method, s)][STEPS[-1]]) / N for s in range(3)]
        first = [np.mean(grid["steps"][(method, s)][0]) / N for s in range(3)]
        v = change[method]["pass@1_verdict"]
        assert v["p"] == pytest.approx(stats.ttest_rel(last, first).pvalue) and not v["primary"]
    md = (grid["report"] / "report.md").read_text()
    lines = [
        x for x in md.splitlines() if x.startswith(("**grpo** (3 seeds)", "**ict** (3 seeds)"))
    ]
    assert len(lines) == 2
    assert "first-4: collapse, criterion < 0.2x; 3 of 3 seeds below" in lines[0]
    assert "first-4: no collapse, criterion < 0.2x; 0 of 3 seeds below" in lines[1]
    assert all(f"pass@1 from step 0 to {STEPS[-1]} " in x and "pass@8 " in x for x in lines)
    for x, method in zip(lines, ("grpo", "ict"), strict=True):  # the verdict is the seed test's
        v = change[method]["pass@1_verdict"]
        assert f"{v['verdict']} (exploratory)" in x and "no significant difference" not in x


def test_runs_without_periodic_evaluation_say_so(tmp_path):
    runs = [write_run(tmp_path, m, 0, correct=[1, 2, 0, 4]) for m in ("grpo", "ict")]
    build_report(runs, tmp_path / "r")
    md = (tmp_path / "r" / "report.md").read_text()
    assert "No periodic held-out evaluation with per-problem results" in md
    assert "before RL" not in md  # not cells of a grid: no start point
    raw = json.loads((tmp_path / "r" / "report.json").read_text())["exploration"]
    assert raw["pass_at_k"]["toy"]["ks"] == [1, 2, 4] and raw["steps"] == {}
