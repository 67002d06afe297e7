"""`--benchmarks paper`: the seven benchmarks, the paper's table (P@1, P@4, average), seeds."""

import json
import math

import pytest

from ict.cli import main
from ict.cli.eval import split_benchmarks
from ict.compare.presets import FIXTURES_DIR
from ict.data import PAPER_BENCHMARKS
from ict.errors import ConfigError
from ict.eval.paper import check_paper_settings, paper_markdown, paper_table

FIXTURES = FIXTURES_DIR  # the fixture files shipped with ict (package data)


def summary(values: dict[str, tuple[float, float]]) -> dict:
    return {"benchmarks": {b: {"pass@1": p1, "pass@4": p4} for b, (p1, p4) in values.items()}}


def test_paper_expands_to_seven_in_order():
    assert split_benchmarks("paper") == list(PAPER_BENCHMARKS)
    assert split_benchmarks("gsm8k,paper,amc23") == ["gsm8k"] + [
        b for b in PAPER_BENCHMARKS if b != "gsm8k"
    ] + ["amc23"]


def test_paper_table_means_average_and_interval():
    seeds = [
        summary(
            {
                b: (0.1 * (i + 1) + s / 100, 0.2 * (i + 1) / 2)
                for i, b in enumerate(PAPER_BENCHMARKS)
            }
        )
        for s in range(3)
    ]
    table = paper_table(seeds)
    assert table["seeds"] == 3
    gsm = table["rows"]["gsm8k"]["pass@1"]  # index 1: 0.2 + s/100
    assert gsm["per_seed"] == pytest.approx([0.2, 0.21, 0.22])
    assert gsm["mean"] == pytest.approx(0.21)
    low, high = gsm["ci95"]
    # t interval with 2 degrees of freedom: half-width t(0.975, 2) * sd / sqrt(3) = 4.303 * 0.01 / 1.732
    assert high - gsm["mean"] == pytest.approx(4.3027 * 0.01 / math.sqrt(3), rel=1e-3)
    assert low < gsm["mean"] < high
    avg1 = table["average"]["pass@1"]
    expected = [sum(0.1 * (i + 1) + s / 100 for i in range(7)) / 7 for s in range(3)]
    assert avg1["per_seed"] == pytest.approx(expected)
    text = paper_markdown(table)
    assert "| GSM8K | 21.00 [" in text and "**Avg.**" in text and "3 seeds" in text


def test_one_seed_has_no_interval_and_missing_benchmark_is_an_error():
    one = summary({b: (0.5, 0.75) for b in PAPER_BENCHMARKS})
    table = paper_table([one])
    assert table["rows"]["gpqa"]["pass@4"]["ci95"] is None
    assert "| GPQA | 50.00 | 75.00 |" in paper_markdown(table)
    broken = summary({b: (0.5, 0.75) for b in PAPER_BENCHMARKS if b != "aime25"})
    with pytest.raises(ConfigError, match="aime25"):
        paper_table([one, broken])


def test_paper_needs_k_1_and_4():
    check_paper_settings(16, [1, 4, 8])
    with pytest.raises(ConfigError, match="--k"):
        check_paper_settings(16, [1, 8])
    with pytest.raises(ConfigError, match="--n"):
        check_paper_settings(2, [1, 2])


def test_ict_eval_benchmarks_paper_end_to_end_on_fixtures(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "out"
    argv = [
        "eval",
        "--model",
        str(tiny_model_dir),
        "--benchmarks",
        "paper",
        "--data-dir",
        str(FIXTURES),
    ]
    argv += ["--n", "4", "--k", "1,4", "--limit", "2", "--max-new-tokens", "4"]
    argv += ["--batch-size", "8", "--out", str(out), "--seeds", "2", "--seed", "5"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "MMLU-STEM" in printed and "AIME 2025" in printed and "**Avg.**" in printed
    table = json.loads((out / "paper_table.json").read_text())
    assert table["seeds"] == 2 and table["seeds_used"] == [5, 6]
    assert list(table["rows"]) == list(PAPER_BENCHMARKS)
    for seed in (5, 6):
        per_seed = json.loads((out / f"seed{seed}" / "summary.json").read_text())
        assert set(per_seed["benchmarks"]) == set(PAPER_BENCHMARKS)
        assert per_seed["settings"]["seed"] == seed
        for bench in PAPER_BENCHMARKS:
            got = table["rows"][bench]["pass@4"]["per_seed"][seed - 5]
            assert got == per_seed["benchmarks"][bench]["pass@4"]
    assert (out / "paper_table.md").read_text().startswith(str(tiny_model_dir))
