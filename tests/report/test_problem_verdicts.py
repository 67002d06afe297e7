"""The report's verdicts over problems: per-problem values from the run directories, warm-start
blocks from the grids, a margin derived from the baseline's measured change, and a re-render that
keeps all three."""

import json

import numpy as np
import pytest

from ict.evidence.endpoints import declare
from ict.report.comparison import build_report
from ict.report.rerender import rerender

from .helpers import write_run

N = 4  # samples per problem
PROBLEMS = 20


@pytest.fixture(scope="module")
def two_warm_starts(tmp_path_factory):
    """Two grids (warm starts A and B), grpo and ict x 3 seeds each, 20 problems x 4 samples;
    each grid's start model at pass@1 0.30."""
    tmp = tmp_path_factory.mktemp("blocks")
    rng = np.random.default_rng(0)
    runs, finals = [], {}
    for block, grid in enumerate(("A", "B")):
        root = tmp / grid
        (root / "runs").mkdir(parents=True)
        (root / "warm_start.json").write_text(json.dumps({"path": f"/cache/toy/{grid}"}))
        start = {"benchmarks": {"toy": {"pass@1": 0.30, "pass@4": 0.70}}}
        (root / "start_eval.json").write_text(json.dumps(start))
        for seed in range(3 * block, 3 * block + 3):
            for method, rate in (("grpo", 0.5), ("ict", 0.55)):
                correct = rng.binomial(N, rate + 0.1 * block, PROBLEMS).tolist()
                runs.append(write_run(root / "runs", method, seed, correct=correct, n=N))
                finals[(method, seed)] = np.mean(correct) / N
    endpoints = declare(["ict-grpo@pass@1"], relative_margin=0.5, source="test")
    build_report(runs, tmp / "report", title="blocks", endpoints=endpoints)
    return tmp / "report", finals


def _primary(raw):
    (c,) = [c for c in raw["verdicts"]["comparisons"] if c["primary"]]
    return c


def test_blocks_problems_and_derived_margin(two_warm_starts):
    report, finals = two_warm_starts
    raw = json.loads((report / "report.json").read_text())
    c = _primary(raw)
    assert c["test"] == "paired t, 2 blocks, Welch df"
    d = [finals[("ict", s)] - finals[("grpo", s)] for s in range(6)]
    v = [np.var(d[:3], ddof=1) / 4 / 3, np.var(d[3:], ddof=1) / 4 / 3]  # w_b^2 s_b^2 / n_b
    assert c["se"] == pytest.approx(np.sqrt(sum(v)))
    assert c["df"] == pytest.approx(sum(v) ** 2 / (v[0] ** 2 / 2 + v[1] ** 2 / 2))
    assert set(raw["blocks"].values()) == {"toy/A", "toy/B"}  # no machine path
    assert c["problem_test"]["problems"] == PROBLEMS and c["problem_test"]["seeds"] == 6
    change = np.mean([finals[("grpo", s)] - 0.30 for s in range(6)])
    assert c["margin"] == pytest.approx(0.5 * abs(change))
    assert c["margin_source"].startswith("0.5 x |grpo's change from the start|")
    assert c["decided_by"] and c["tost_holm_adjusted"] is True
    md = (report / "report.md").read_text()
    assert "over-problems p" in md and "Holm p (problems)" in md and "decided by" in md
    assert "0.5 x the baseline's measured change" in md
    assert "Welch-Satterthwaite degrees of freedom" in md  # the verdict rule names the test
    assert "**Warm starts**: the seeds come from 2 warm starts" in md
    assert "(paired hierarchical bootstrap, stratified by 2 blocks)" in md
    diff = raw["metrics"]["eval/toy/pass@1"]["ict"]["difference"]
    assert diff["method"] == "paired hierarchical bootstrap, stratified by 2 blocks"


def test_rerender_keeps_the_problem_tests_blocks_and_margins(two_warm_starts, tmp_path):
    import shutil

    report, _ = two_warm_starts
    copy = tmp_path / "report"
    shutil.copytree(report, copy)
    before = json.loads((report / "report.json").read_text())
    rerender(copy, declare(["ict-grpo@pass@1"], relative_margin=0.5, source="test"))
    after = json.loads((copy / "report.json").read_text())
    assert _primary(after) == _primary(before)


def test_rerender_with_warm_starts_as_the_unit(two_warm_starts, tmp_path):
    """A declaration with the warm start as the unit: the primary test is the t over the two
    warm starts' mean differences (1 df), as scipy computes it."""
    import shutil

    from scipy import stats

    report, finals = two_warm_starts
    copy = tmp_path / "report"
    shutil.copytree(report, copy)
    endpoints = declare(["ict-grpo@pass@1"], relative_margin=0.5, source="t", unit="warm start")
    rerender(copy, endpoints)
    c = _primary(json.loads((copy / "report.json").read_text()))
    d = [finals[("ict", s)] - finals[("grpo", s)] for s in range(6)]
    ref = stats.ttest_1samp([np.mean(d[:3]), np.mean(d[3:])], 0.0)
    assert c["test"] == "t over 2 warm starts" and c["df"] == 1.0
    assert c["p"] == pytest.approx(ref.pvalue)
    md = (copy / "report.md").read_text()
    assert "warm starts as the unit" in md
