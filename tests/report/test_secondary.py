"""A study's declared secondary endpoints (ict.report.secondary) on synthetic grids: the
non-inferiority verdict against a margin derived from the baseline's measured change, its
one-sided p checked by hand (blocked paired t) and by scipy, and the entropy ratios."""

import json

import numpy as np
import pytest
from scipy import stats

from ict.report.runs import load_run
from ict.report.secondary import difference_tests, entropy_ratios, non_inferiority
from report.helpers import write_run

N, PROBLEMS, SEEDS = 8, 60, 4  # samples per problem, problems, seeds per warm start
START = 0.30  # each grid's start model at pass@1


def _grids(tmp, rates, *, start=True, entropy=None):
    """Two grids (warm starts A, B) x SEEDS seeds; `rates` {method: pass@1 of its final runs};
    returns {method: [Run]} and {(method, seed): per-seed pass@1}."""
    rng = np.random.default_rng(0)
    groups, finals = {}, {}
    for block, grid in enumerate(("A", "B")):
        root = tmp / grid
        (root / "runs").mkdir(parents=True)
        (root / "warm_start.json").write_text(json.dumps({"path": f"/cache/toy/{grid}"}))
        if start:
            (root / "start_eval.json").write_text(
                json.dumps({"benchmarks": {"toy": {"pass@1": START}}})
            )
        for seed in range(SEEDS * block, SEEDS * block + SEEDS):
            for method, rate in rates.items():
                correct = rng.binomial(N, rate + 0.05 * block, PROBLEMS).tolist()
                h = (entropy or {}).get(method)
                path = write_run(root / "runs", method, seed, correct=correct, n=N, entropy=h)
                groups.setdefault(method, []).append(load_run(path))
                finals[(method, seed)] = np.mean(correct) / N
    return groups, finals


def _blocked_one_sided(d, blocks, margin):
    """By hand: SE^2 = sum_b w_b^2 s_b^2 / n_b, Welch-Satterthwaite df, p = P(T >= (mean +
    margin) / se)."""
    d, blocks = np.asarray(d), np.asarray(blocks)
    parts = [
        ((np.sum(blocks == b) / d.size) ** 2 * d[blocks == b].var(ddof=1) / np.sum(blocks == b),
         np.sum(blocks == b) - 1)
        for b in set(blocks)
    ]  # fmt: skip
    se = np.sqrt(sum(v for v, _ in parts))
    df = se**4 / sum(v * v / k for v, k in parts)
    return stats.t.sf((d.mean() + margin) / se, df), stats.t.cdf((d.mean() + margin) / se, df)


def test_a_much_worse_arm_is_inferior_with_the_hand_computed_p(tmp_path):
    groups, finals = _grids(tmp_path, {"grpo": 0.60, "ict": 0.40})
    ni = non_inferiority(groups, "ict", "grpo", "eval/toy/pass@1", fraction=0.5)
    seeds = range(2 * SEEDS)
    change = np.mean([finals[("grpo", s)] - START for s in seeds])
    assert ni.change == pytest.approx(change) and ni.margin == pytest.approx(0.5 * abs(change))
    d = [finals[("ict", s)] - finals[("grpo", s)] for s in seeds]
    p_ni, p_inf = _blocked_one_sided(d, [s // SEEDS for s in seeds], ni.margin)
    assert ni.seeds.design == "paired t, 2 blocks, Welch df"
    assert ni.p_non_inferior[0] == pytest.approx(p_ni) and ni.p_inferior[0] == pytest.approx(p_inf)
    assert ni.problems.problems == PROBLEMS and ni.problems.seeds == 2 * SEEDS
    assert ni.verdict == "inferior" and ni.p_inferior[1] < 0.05
    assert ni.as_dict()["over_problems"]["test"] == "two-way variance-components t"


def test_an_equal_arm_is_non_inferior_and_an_arm_near_the_margin_is_not_shown(tmp_path):
    groups, _ = _grids(tmp_path / "equal", {"grpo": 0.60, "ict": 0.60})
    ni = non_inferiority(groups, "ict", "grpo", "eval/toy/pass@1", fraction=0.5)
    assert ni.verdict == "non-inferior" and max(ni.p_non_inferior) < 0.05
    groups, _ = _grids(tmp_path / "near", {"grpo": 0.60, "ict": 0.4375})  # at -margin (0.1625)
    near = non_inferiority(groups, "ict", "grpo", "eval/toy/pass@1", fraction=0.5)
    assert near.verdict == "not shown"


def test_no_start_model_means_no_margin(tmp_path):
    groups, _ = _grids(tmp_path, {"grpo": 0.60, "ict": 0.60}, start=False)
    ni = non_inferiority(groups, "ict", "grpo", "eval/toy/pass@1", fraction=0.5)
    assert ni.verdict == "not shown" and "not measured" in ni.reason and ni.seeds is None


def test_entropy_ratios_are_last_over_first_window_means(tmp_path):
    falling = [1.0, 0.9, 0.8, 0.5, 0.4, 0.3]  # 6 steps: W = 3, ratio 0.4 / 0.9
    flat = [0.5, 0.5, 0.5, 0.5, 0.5, 0.5]
    groups, _ = _grids(tmp_path, {"grpo": 0.6, "ict": 0.6}, entropy={"grpo": falling, "ict": flat})
    ratios = entropy_ratios(groups, "grpo")
    assert ratios.mean["grpo"] == pytest.approx(0.4 / 0.9)
    assert ratios.mean["ict"] == pytest.approx(1.0)
    test = ratios.against_baseline["ict"]
    assert test.mean == pytest.approx(1.0 - 0.4 / 0.9) and test.p == 0.0  # constant difference
    assert set(ratios.as_dict()["per_seed"]["ict"]) == {str(s) for s in range(2 * SEEDS)}


def test_difference_tests_are_the_primary_verdicts_two_tests(tmp_path):
    from ict.evidence.problem_tests import over_problems_test
    from ict.evidence.seed_tests import paired_t_test

    groups, finals = _grids(tmp_path, {"grpo": 0.60, "ict": 0.55})
    seeds, problems = difference_tests(groups, "ict", "grpo", "eval/toy/pass@1")
    order = range(2 * SEEDS)
    blocks = [s // SEEDS for s in order]
    by_hand = paired_t_test(
        [finals[("ict", s)] for s in order], [finals[("grpo", s)] for s in order], blocks=blocks
    )
    assert seeds.p == pytest.approx(by_hand.p) and seeds.df == pytest.approx(by_hand.df)
    assert seeds.design == "paired t, 2 blocks, Welch df" and seeds.df < 2 * SEEDS - 2
    assert problems.problems == PROBLEMS and problems.se > seeds.se
    assert problems.p == pytest.approx(
        over_problems_test(
            {s: _per_problem(groups["ict"][i]) for i, s in enumerate(order)},
            {s: _per_problem(groups["grpo"][i]) for i, s in enumerate(order)},
            dict(zip(order, blocks, strict=True)),
        ).p
    )


def _per_problem(run):
    block = run.final_eval["per_problem"]["toy"]
    return np.asarray(block["correct"], float) / np.asarray(block["n"], float)
