import json
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from ict.errors import DataError
from ict.report.comparison import build_report

from .helpers import make_sample, write_run

GRPO = [0.40, 0.50, 0.45]
ICT = [0.50, 0.61, 0.57]  # paired differences 0.10, 0.11, 0.12: clearly above 0
ENTROPY = [0.30, 0.62, 0.45]  # differences -0.10, +0.12, 0.00: interval contains 0


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("grid")
    rng = np.random.default_rng(0)
    runs = []
    for method, finals in (("grpo", GRPO), ("ict", ICT), ("entropy", ENTROPY)):
        for seed, final in enumerate(finals):
            samples = [make_sample(s, list("2+3 = 5. answer 5"), rng) for s in (1, 1, 5, 5)]
            runs.append(
                write_run(
                    tmp_path / "runs",
                    method,
                    seed,
                    final_pass=final,
                    samples=samples,
                    collapse=(method == "entropy" and seed == 1),
                )
            )
    out = tmp_path / "report"
    build_report(runs, out, title="test grid")
    return out


def test_without_per_problem_data_the_fallback_is_clipped_t(report_dir):
    # these runs have no final_eval.json: Student t / paired t, clipped to the possible range
    raw = json.loads((report_dir / "report.json").read_text())
    ict = raw["metrics"]["eval/toy/pass@4"]["ict"]
    assert ict["method"] == "t, clipped to [0, 1]"
    low, high = stats.t.interval(0.95, 2, loc=np.mean(ICT), scale=stats.sem(ICT))
    assert (ict["mean"], ict["low"], ict["high"], ict["n"]) == (
        pytest.approx(np.mean(ICT)),
        pytest.approx(low),
        pytest.approx(high),
        3,
    )
    ref = stats.ttest_rel(ICT, GRPO)
    d = ict["difference"]
    assert d["method"] == "paired t, clipped to [-1, 1]" and d["verdict"] == "higher"
    ci = ref.confidence_interval(0.95)
    assert (d["low"], d["high"]) == (pytest.approx(ci.low), pytest.approx(ci.high))
    # the verdict's test: the seed-level paired t (no endpoints declared: exploratory)
    assert d["test"] == "paired t" and d["p"] == pytest.approx(ref.pvalue)
    assert d["primary"] is False and d["p_holm"] is None and d["mde"] > 0
    entropy = raw["metrics"]["eval/toy/pass@4"]["entropy"]["difference"]
    assert entropy["verdict"] == "inconclusive"
    assert entropy["p"] == pytest.approx(stats.ttest_rel(ENTROPY, GRPO).pvalue)
    # training reward: mean of the last 5 steps per seed (helpers: 0.1 * s + 0.01 * seed, s = 0..5),
    # with a bootstrap over seeds and those steps: inside the range of the logged rewards
    reward = raw["metrics"]["reward/mean"]["grpo"]
    assert reward["mean"] == pytest.approx(
        np.mean([np.mean([0.1 * s + 0.01 * seed for s in range(1, 6)]) for seed in range(3)])
    )
    assert reward["method"] == "hierarchical bootstrap"
    assert 0.1 <= reward["low"] < reward["mean"] < reward["high"] <= 0.52


def test_report_markdown_is_honest(report_dir):
    md = (report_dir / "report.md").read_text()
    assert "inconclusive (exploratory)" in md and "hierarchical bootstrap" in md
    assert "no significant difference" not in md
    assert "| grpo | 3 |" in md and "(baseline)" in md
    # every difference printed with an interval and its method: "+0.110 [+0.085, +0.135] (paired t...)"
    # (pass@1 and pass@4 of ict and entropy; their training rewards are identical to grpo's)
    diffs = re.findall(r"\| ([+-]\d\.\d{3}[^|]*) \|", md)
    assert len(diffs) == 4 and all(
        re.match(r"[+-]\d\.\d{3} \[[+-]\d\.\d{3}, [+-]\d\.\d{3}\] \(paired (t|hier)", d)
        for d in diffs
    )
    assert md.count("| identical on every seed |") == 2 and "+0.000 [+0.000, +0.000]" not in md
    # the entropy run of seed 1 collapses over windows, with the criterion beside the flag
    assert "1: COLLAPSE" in md and "1 of 9 runs flagged" in md
    assert "last-3 vs first-3 mean H (collapse < 0.2x, explosion > 3x)" in md
    # declared before any number, then the answer as a figure, then the tables, then the runs
    assert (
        md.index("## Declared endpoints")
        < md.index("## Answer")
        < md.index("![")
        < md.index("## Final results")
        < md.index("## Runs")
    )
    assert md.index("answer_forest.png") < md.index("## Final results")
    assert "Mean Jaccard" in md and "| ICT token |" in md.replace("rank | ", "")
    for link in re.findall(r"!\[[^]]*\]\(([^)]+)\)", md):
        assert (report_dir / link).exists()
    assert "Settings that differ between runs" in md and "method" in md


def test_report_html_is_self_contained(report_dir):
    page = (report_dir / "report.html").read_text()
    sources = re.findall(r'src="([^"]+)"', page)
    assert len(sources) >= 8 and all(s.startswith("data:image/png;base64,") for s in sources)
    assert "href=" not in page and "<script" not in page


def test_one_seed_gives_no_interval(tmp_path):
    runs = [write_run(tmp_path, "grpo", 0), write_run(tmp_path, "ict", 0, final_pass=0.9)]
    build_report(runs, tmp_path / "r")
    md = (tmp_path / "r" / "report.md").read_text()
    assert "no interval" in md and "| higher" not in md and "inconclusive (exploratory)" in md
    assert "n/a (1 seed)" in md


def test_no_runs_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="--runs"):
        build_report([], tmp_path)


# per-problem results (final_eval.json as `ict compare` writes it): 2 methods x 2 seeds, 20 problems
CORRECT = {
    ("grpo", 0): [4] * 10 + [0] * 10,  # pass@1 0.50
    ("grpo", 1): [4] * 12 + [0] * 8,  # 0.60
    ("ict", 0): [4] * 19 + [0] * 1,  # 0.95
    ("ict", 1): [4] * 20,  # 1.00: all correct
}
GOLDEN = Path(__file__).parent / "golden" / "final_results.md"


@pytest.fixture(scope="module")
def per_problem_report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pp")
    runs = [
        write_run(tmp / "runs", m, s, correct=c, final_pass=0.0) for (m, s), c in CORRECT.items()
    ]
    build_report(runs, tmp / "report", title="golden")
    return tmp / "report"


def test_per_problem_intervals_stay_in_range_and_show_per_seed(per_problem_report):
    raw = json.loads((per_problem_report / "report.json").read_text())
    ict, grpo = raw["metrics"]["eval/toy/pass@1"]["ict"], raw["metrics"]["eval/toy/pass@1"]["grpo"]
    assert ict["method"] == grpo["method"] == "hierarchical bootstrap"
    assert ict["mean"] == pytest.approx(0.975) and grpo["mean"] == pytest.approx(0.55)
    # a Student t over the two seed means would give 0.975 +- 0.318, past 1
    assert 0.9 <= ict["low"] < ict["high"] <= 1.0
    assert ict["per_seed"]["1"] == [1.0, 1.0, 1.0]  # all correct: a point, still in range
    low, high = ict["per_seed"]["0"][1:]
    assert 0.85 <= low < 0.95 < high <= 1.0
    d = ict["difference"]
    assert d["method"] == "paired hierarchical bootstrap" and -1 <= d["low"] < d["high"] <= 1
    # 2 seeds: the bootstrap interval excludes 0, the seed-level test (differences 0.45, 0.40:
    # t = 17, 1 df) passes at 0.05; the sign flip's floor is 2^(1-2) = 0.5
    assert d["mean"] == pytest.approx(0.425) and d["verdict"] == "higher"
    assert d["p"] == pytest.approx(stats.ttest_rel([0.95, 1.0], [0.5, 0.6]).pvalue)
    assert d["p_sign_flip"] == 0.5


def test_report_golden_settings_table_and_method_names(per_problem_report):
    """The Final results section (settings table, interval methods, per-seed intervals) as
    golden text; regenerate with ICT_UPDATE_GOLDEN=1 after an intended change."""
    import os

    md = (per_problem_report / "report.md").read_text()
    start = md.index("## Final results")
    section = md[start : md.index("\n## ", start) + 1]  # up to the next section
    if os.environ.get("ICT_UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(section)
    assert section == GOLDEN.read_text()
    page = (per_problem_report / "report.html").read_text()
    assert "<th>setting</th><th>value</th>" in page and "<td>samples per problem</td>" in page
    assert "hierarchical bootstrap" in md and "**Per seed**" in md and "EMA" in md


def test_one_seed_with_per_problem_data_has_an_interval_over_problems(tmp_path):
    runs = [
        write_run(tmp_path, "grpo", 0, correct=[0] * 10),  # all wrong
        write_run(tmp_path, "ict", 0, correct=[4] * 10),  # all right
    ]
    build_report(runs, tmp_path / "r")
    raw = json.loads((tmp_path / "r" / "report.json").read_text())["metrics"]["eval/toy/pass@1"]
    assert raw["grpo"]["method"] == "bootstrap over problems"
    assert (raw["grpo"]["low"], raw["grpo"]["high"]) == (0.0, 0.0)
    assert (raw["ict"]["low"], raw["ict"]["high"]) == (1.0, 1.0)
    # one seed: the interval over problems excludes 0, but there is no seed-level test
    assert raw["ict"]["difference"]["low"] > 0
    assert raw["ict"]["difference"]["verdict"] == "inconclusive"
    assert "no seed-level test" in raw["ict"]["difference"]["note"]
    md = (tmp_path / "r" / "report.md").read_text()
    assert "s0 1.000 [1.000, 1.000]" in md and "no interval" not in md


def test_declared_endpoints_come_first_and_every_comparison_carries_its_test(tmp_path):
    """Primary comparisons Holm-adjusted, a declared one without runs counted with p = 1,
    a non-baseline primary pair (ict - random_sequence) tested from its per-seed values."""
    from ict.evidence.endpoints import declare
    from ict.evidence.multiplicity import holm

    correct = {
        ("grpo", 0): [4] * 10 + [0] * 10, ("grpo", 1): [4] * 12 + [0] * 8,
        ("grpo", 2): [4] * 11 + [0] * 9,
        ("ict", 0): [4] * 14 + [0] * 6, ("ict", 1): [4] * 13 + [0] * 7,
        ("ict", 2): [4] * 16 + [0] * 4,
        ("random_sequence", 0): [4] * 12 + [0] * 8, ("random_sequence", 1): [4] * 10 + [0] * 10,
        ("random_sequence", 2): [4] * 13 + [0] * 7,
        ("stapo", 0): [4] * 10 + [0] * 10, ("stapo", 1): [4] * 12 + [0] * 8,
        ("stapo", 2): [4] * 11 + [0] * 9,
    }  # fmt: skip
    runs = [write_run(tmp_path / "runs", m, s, correct=c) for (m, s), c in correct.items()]
    endpoints = declare(
        ["ict-grpo@pass@4", "ict-random_sequence@pass@1", "ict-kl_cov@pass@1"],
        margin=0.05,
        source="the test",
    )
    build_report(runs, tmp_path / "r", endpoints=endpoints)
    md = (tmp_path / "r" / "report.md").read_text()
    raw = json.loads((tmp_path / "r" / "report.json").read_text())
    # declared before any result; recorded in report.json
    assert md.index("ict - grpo at pass@4") < md.index("## Final results")
    assert "not run" in md and "`ict-kl_cov@pass@1`" in md
    assert raw["endpoints"]["primary"] == [e.spec for e in endpoints.primary]
    assert raw["verdicts"]["family_size"] == 3 and raw["verdicts"]["missing"] == [
        "ict-kl_cov@pass@1"
    ]
    comparisons = {(c["a"], c["b"], c["key"]): c for c in raw["verdicts"]["comparisons"]}
    for c in comparisons.values():
        assert c["verdict"] in ("higher", "lower", "equivalent", "inconclusive")
        assert {"p", "p_holm", "primary", "mde", "p_sign_flip"} <= set(c)
        assert (c["p_holm"] is not None) == c["primary"]
    pass1, pass4 = "eval/toy/pass@1", "eval/toy/pass@4"
    a = comparisons[("ict", "random_sequence", pass1)]
    b = comparisons[("ict", "grpo", pass4)]
    ict = [0.70, 0.65, 0.80]
    ref_a = stats.ttest_rel(ict, [0.60, 0.50, 0.65]).pvalue
    ref_b = stats.ttest_rel(ict, [0.50, 0.60, 0.55]).pvalue
    assert (a["p"], b["p"]) == (pytest.approx(ref_a), pytest.approx(ref_b))
    assert [a["p_holm"], b["p_holm"]] == pytest.approx(holm([ref_a, ref_b, float("nan")])[:2])
    assert a["primary"] and b["primary"] and not comparisons[("ict", "grpo", pass1)]["primary"]
    # STAPO that changed nothing: identical, never "+0.000 [+0.000, +0.000]"
    stapo = comparisons[("stapo", "grpo", pass1)]
    assert stapo["verdict"] == "equivalent" and stapo["identical"]
    assert "no token changed" in stapo["note"] and "+0.000 [+0.000, +0.000]" not in md
    # the exploration section's differences at each k carry the same verdicts
    k4 = raw["exploration"]["pass_at_k"]["toy"]["difference"]["ict"]["4"]
    assert k4["primary"] and k4["p_holm"] == pytest.approx(b["p_holm"])


def test_per_step_blip_is_not_a_health_verdict(tmp_path):
    # one step far below the start (an older trainer logged a per-step flag there), then back
    h = [1.0] * 8 + [0.05] + [1.0] * 11
    blip = write_run(tmp_path, "grpo", 0, steps=20, entropy=h)
    falling = write_run(tmp_path, "ict", 0, steps=20, entropy=[1.0] * 10 + [0.1] * 10)
    rows = [json.loads(x) for x in (blip / "metrics.jsonl").read_text().splitlines()]
    rows[8]["health/entropy_collapse"] = True
    (blip / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    build_report([blip, falling], tmp_path / "r")
    md = (tmp_path / "r" / "report.md").read_text()
    raw = json.loads((tmp_path / "r" / "report.json").read_text())["health"]
    assert raw["flagged"] == 1 and raw["runs_with_step_flags"] == 1
    by = {r["method"]: r for r in raw["runs"]}
    assert not by["grpo"]["entropy_collapse"] and by["ict"]["entropy_collapse"]
    assert (
        by["ict"]["criterion"] == "last-10 mean H 0.10x first-10 (collapse < 0.2x, explosion > 3x)"
    )
    assert "0: COLLAPSE" in md and "not a verdict" in md


def test_loss_mode_rates_and_the_one_token_floor(tmp_path):
    logged = {
        "loss_mode/changed_tokens": 1, "loss_mode/changed_rate": 0.012,
        "loss_mode/nominal_rate": 0.002,
    }  # fmt: skip
    runs = [
        write_run(tmp_path, "clip_cov", 0, extra=logged),
        write_run(tmp_path, "kl_cov", 0),  # an older run: no loss_mode keys
        write_run(tmp_path, "grpo", 0),
    ]
    build_report(runs, tmp_path / "r")
    md = (tmp_path / "r" / "report.md").read_text()
    raw = json.loads((tmp_path / "r" / "report.json").read_text())["loss_modes"]
    assert raw["methods"]["clip_cov"]["ratio"] == pytest.approx(6.0)
    assert raw["methods"]["clip_cov"]["floor_dominates"] and raw["not_logged"] == ["kl_cov"]
    assert "the floor of one token dominates" in md and "**kl_cov**" in md


def test_the_mechanism_curves_are_drawn_when_logged(tmp_path):
    """Gradient norm, update size and loss-mode token counts, logged per step on every engine,
    each get a curve per method (why an arm fails, when it does)."""
    mechanism = {"grad_norm": 0.4, "update/param_change_rel": 3e-4, "loss_mode/changed_tokens": 2}
    runs = [write_run(tmp_path, m, s, extra=mechanism) for m in ("grpo", "kl_cov") for s in (0, 1)]
    build_report(runs, tmp_path / "r")
    md = (tmp_path / "r" / "report.md").read_text()
    for stem in ("grad_norm", "update_size", "loss_mode_tokens"):
        assert (tmp_path / "r" / "plots" / f"{stem}.png").exists() and f"plots/{stem}.png" in md
    bare = [write_run(tmp_path / "bare", m, 0) for m in ("grpo", "ict")]
    build_report(bare, tmp_path / "r2")
    assert not (tmp_path / "r2" / "plots" / "grad_norm.png").exists()  # nothing logged, no plot


def test_a_final_result_off_the_held_out_split_is_said_in_the_report(tmp_path):
    """Final results evaluated on the validation split (a grid that gave its final evaluation
    the cells' curve split did) are named as such under the evaluation settings; on the held-out
    split (or an older result without a split), nothing is added."""
    runs = [
        write_run(tmp_path / "runs", m, s, correct=[1, 2, 3, 0], n=4)
        for m in ("grpo", "ict")
        for s in (0, 1)
    ]
    build_report(runs, tmp_path / "held")
    assert "Not the held-out split" not in (tmp_path / "held" / "report.md").read_text()
    for split in ("eval", "validation"):
        for run in runs:
            path = run / "final_eval.json"
            result = json.loads(path.read_text())
            result["settings"]["split"] = split
            path.write_text(json.dumps(result))
        build_report(runs, tmp_path / split)
        md = (tmp_path / split / "report.md").read_text()
        assert ("**Not the held-out split**" in md) is (split == "validation")
    assert "evaluated on the `validation` split" in md and "ict eval --split eval" in md
