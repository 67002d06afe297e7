import json
import re

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


def test_report_numbers_match_scipy(report_dir):
    raw = json.loads((report_dir / "report.json").read_text())
    ict = raw["metrics"]["eval/toy/pass@4"]["ict"]
    low, high = stats.t.interval(0.95, 2, loc=np.mean(ICT), scale=stats.sem(ICT))
    assert (ict["mean"], ict["low"], ict["high"], ict["n"]) == (
        pytest.approx(np.mean(ICT)),
        pytest.approx(low),
        pytest.approx(high),
        3,
    )
    ref = stats.ttest_rel(ICT, GRPO).confidence_interval(0.95)
    d = ict["difference"]
    assert d["method"] == "paired t" and d["verdict"] == "higher"
    assert (d["low"], d["high"]) == (pytest.approx(ref.low), pytest.approx(ref.high))
    assert (
        raw["metrics"]["eval/toy/pass@4"]["entropy"]["difference"]["verdict"]
        == "no significant difference"
    )
    # training reward: mean of the last 5 steps per seed (helpers: 0.1 * s + 0.01 * seed, s = 0..5)
    reward = raw["metrics"]["reward/mean"]["grpo"]
    assert reward["mean"] == pytest.approx(
        np.mean([np.mean([0.1 * s + 0.01 * seed for s in range(1, 6)]) for seed in range(3)])
    )


def test_report_markdown_is_honest(report_dir):
    md = (report_dir / "report.md").read_text()
    assert "no significant difference" in md and "Student-t" in md
    assert "| grpo | 3 |" in md and "(baseline)" in md
    # every difference printed with an interval: "+0.110 [+0.085, +0.135] (paired t)"
    diffs = re.findall(r"\| ([+-]\d\.\d{3}[^|]*) \|", md)
    assert diffs and all(
        re.match(r"[+-]\d\.\d{3} \[[+-]\d\.\d{3}, [+-]\d\.\d{3}\] \(paired t\)", d) for d in diffs
    )
    assert "COLLAPSE" in md and "1 of 9 runs" in md
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
    assert "no interval" in md and "higher" not in md


def test_no_runs_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="--runs"):
        build_report([], tmp_path)
