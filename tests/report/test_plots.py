import json

import numpy as np
import pytest

from ict.errors import DataError
from ict.report.plots import band, plot_methods, plot_run
from ict.report.runs import load_run, read_jsonl

from .helpers import write_run


def _is_png(path):
    return path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_run_writes_expected_pngs(tmp_path):
    run = write_run(tmp_path, "ict", 0)
    paths = plot_run(run)
    names = {p.stem for p in paths}
    assert {
        "reward",
        "accuracy",
        "entropy",
        "renyi2",
        "js",
        "selected",
        "length",
        "clip",
        "eval",
    } == names
    assert all(p.parent == run / "plots" and _is_png(p) for p in paths)


def test_plot_run_skips_missing_keys(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    (run / "metrics.jsonl").write_text(json.dumps({"step": 0, "reward/mean": 0.2}) + "\n")
    assert [p.stem for p in plot_run(run)] == ["reward"]


def test_missing_metrics_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="metrics.jsonl"):
        plot_run(tmp_path)


def test_truncated_last_line_is_skipped_but_middle_garbage_raises(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"step": 0}\n{"step": 1}\n{"step": 2, "rew')
    assert [r["step"] for r in read_jsonl(path)] == [0, 1]
    path.write_text('{"step": 0}\n{"ste\n{"step": 2}\n')
    with pytest.raises(DataError, match=":2"):
        read_jsonl(path)


def test_run_method_seed_final_and_flags(tmp_path):
    run = load_run(write_run(tmp_path, "entropy", 2, final_pass=0.7, collapse=True))
    assert (run.method, run.seed) == ("entropy", 2)
    assert run.final("eval/toy/pass@4") == 0.7
    assert run.flag("health/entropy_collapse") and not run.flag("health/entropy_explosion")


def test_band_is_mean_min_max_over_shared_steps(tmp_path):
    runs = [load_run(write_run(tmp_path, "grpo", s)) for s in range(3)]
    steps, mean, low, high = band(runs, "reward/mean")
    expect = np.array([[0.1 * s + 0.01 * seed for s in range(6)] for seed in range(3)])
    np.testing.assert_allclose(steps, np.arange(6))
    np.testing.assert_allclose(mean, expect.mean(0))
    np.testing.assert_allclose(low, expect.min(0))
    np.testing.assert_allclose(high, expect.max(0))


def test_plot_methods(tmp_path):
    runs = {m: [load_run(write_run(tmp_path, m, s)) for s in range(2)] for m in ("grpo", "ict")}
    path = plot_methods(
        runs,
        [("valid/entropy", "valid"), ("selected/entropy", "selected")],
        tmp_path / "h.png",
        title="H",
        ylabel="nats",
    )
    assert path is not None and _is_png(path)
    assert plot_methods(runs, [("nope", "")], tmp_path / "x.png", title="x", ylabel="y") is None
    assert not (tmp_path / "x.png").exists()


def test_ema_by_hand():
    from ict.report.plots import EMA_ALPHA, ema

    assert EMA_ALPHA == 0.3
    np.testing.assert_allclose(ema([1.0, 0.0, 0.0, 1.0]), [1.0, 0.7, 0.49, 0.643])
    assert ema([]).shape == (0,)


def test_method_curves_are_ema_lines_over_faint_raw_points(tmp_path, monkeypatch):
    import ict.report.plots as plots

    figures = []
    monkeypatch.setattr(plots, "save_figure", lambda fig, path: figures.append(fig) or path)
    long = plots.MIN_SMOOTHED_POINTS
    runs = {
        m: [load_run(write_run(tmp_path / m, m, s, steps=long)) for s in (0, 1)]
        for m in ("grpo", "ict")
    }
    plot_methods(runs, [("reward/mean", "")], tmp_path / "r.png", title="t", ylabel="y")
    ax = figures[0].axes[0]
    steps, mean, _, _ = band(runs["grpo"], "reward/mean")
    line = ax.lines[0]  # grpo's smoothed line
    np.testing.assert_allclose(line.get_ydata(), plots.ema(mean))
    raw = [c for c in ax.collections if c.get_offsets().shape[0] == len(steps)]
    assert raw and np.allclose(raw[0].get_offsets()[:, 1], mean) and raw[0].get_alpha() < 1
    assert "EMA" in ax.get_legend().get_title().get_text()
    # a short run is not smoothed: the EMA's lag would draw the line far from its points
    short = {"grpo": [load_run(write_run(tmp_path / "short", "grpo", 0, steps=6))]}
    plot_methods(short, [("reward/mean", "")], tmp_path / "s.png", title="t", ylabel="y")
    ax = figures[1].axes[0]
    _, mean, _, _ = band(short["grpo"], "reward/mean")
    np.testing.assert_allclose(ax.lines[0].get_ydata(), mean)
    assert "no smoothing" in ax.get_legend().get_title().get_text()


def test_plot_run_draws_the_paper_diagnostics_and_score_curve(tmp_path):
    """The regime shares, the high/low-entropy ratio and the sorted-score curve with its 10% mark."""
    import json

    run = tmp_path / "ict_seed0"
    run.mkdir()
    rows = [
        {
            "step": s,
            "reward/mean": 0.1 * s,
            "paper/collapse_share": 0.8 - 0.1 * s,
            "paper/explosion_share": 0.2 + 0.1 * s,
            "paper/high_low_entropy_ratio": 1.0,
        }
        for s in range(1, 4)
    ]
    rows[0]["score_curve"] = [0.5 - 0.005 * i for i in range(101)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    stems = {p.stem for p in plot_run(run)}
    assert {"reward", "regime", "entropy_ratio", "score_curve"} <= stems
    del rows[0]["score_curve"]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert "score_curve" not in {p.stem for p in plot_run(run, tmp_path / "again")}


def test_one_colour_per_method_from_the_registry():
    from ict.methods import METHODS
    from ict.report.plots import PALETTE, method_color

    names = list(METHODS)
    colours = [method_color(m) for m in names]
    assert len(set(colours)) == len(names) <= len(PALETTE)  # distinct while the palette lasts
    # a label's method decides: a difference, a suffix, the same colour in every figure
    assert method_color("ict - grpo") == method_color("ict (selected)") == method_color("ict")
    assert method_color("ict") != method_color("grpo")
    # a name outside the registry: a palette colour fixed by the name alone
    assert method_color("my_method") == method_color("my_method") in PALETTE


def test_forest_plot_panels_in_order_of_k(tmp_path):
    from ict.evidence.endpoints import declare, parse_endpoint
    from ict.report.answer import write_answer_section
    from ict.report.document import Document
    from ict.report.verdicts import evaluate

    seeds = range(4)
    values = {
        f"eval/t/pass@{k}": {
            "grpo": {s: 0.5 + 0.01 * s for s in seeds},
            "ict": {s: 0.4 + 0.02 * s + 0.001 * k for s in seeds},
        }
        for k in (16, 1, 4)
    }
    endpoints = declare(primary=[parse_endpoint("ict-grpo@pass@4")])
    judgement = evaluate(values, "grpo", endpoints)
    doc = Document("t")
    path = write_answer_section(doc, judgement, values, 0.95, "grpo", tmp_path)
    assert path is not None and _is_png(path)
    headings = [b[2] for b in doc.blocks if b[0] == "h"]
    assert headings == ["Answer"]
    assert doc.blocks[1][1].startswith("**ict - grpo, eval/t/pass@4: lower**")  # the answer
    from ict.report.answer import forest_panels

    panels = forest_panels(judgement, values, 0.95)
    assert [title for title, _ in panels] == [f"pass@{k}" for k in (1, 4, 16)]  # k as a number
    assert all([r.label for r in rows] == ["ict - grpo"] for _, rows in panels)
    assert [r.primary for _, rows in panels for r in rows] == [False, True, False]


def test_no_method_is_grey_like_the_figures_own_marks():
    """A method's colour is never a grey (the equivalence band, the model before RL, the zero
    line are grey or black), so no method reads as background."""
    from matplotlib.colors import to_rgb

    from ict.methods import METHODS
    from ict.report.plots import BAND_COLOR, REFERENCE_COLOR, method_color

    for name in [*METHODS, "my_method"]:
        r, g, b = to_rgb(method_color(name))
        assert max(r, g, b) - min(r, g, b) > 0.15, f"{name}: {method_color(name)} is a grey"
    assert to_rgb(BAND_COLOR) == to_rgb("0.85") and to_rgb(REFERENCE_COLOR)[0] == 0.35


def _declared_judgement(k_values=(1, 4, 16)):
    from ict.evidence.endpoints import declare, parse_endpoint
    from ict.report.verdicts import evaluate

    seeds = range(4)
    values = {
        f"eval/toy:cot/pass@{k}": {
            "grpo": {s: 0.5 + 0.01 * s for s in seeds},
            "ict": {s: 0.4 + 0.02 * s + 0.001 * k for s in seeds},
            "random_sequence": {s: 0.45 + 0.015 * s for s in seeds},
        }
        for k in k_values
    }
    primary = [parse_endpoint("ict-grpo@pass@4"), parse_endpoint("ict-random_sequence@pass@1")]
    return evaluate(values, "grpo", declare(primary=primary)), values


def test_declared_rows_are_the_primary_comparisons_only():
    from ict.report.answer import declared_rows, forest_panels

    judgement, values = _declared_judgement()
    rows = declared_rows(judgement, values, 0.95)
    assert [r.label for r in rows] == ["ict - grpo, pass@4", "ict - random_sequence, pass@1"]
    assert all(r.primary for r in rows)
    # the forest keeps every comparison, each row at the same height in every panel
    panels = forest_panels(judgement, values, 0.95)
    assert sum(len(rows) for _, rows in panels) > len(rows)
    orders = [[r.label for r in rows if r.label.endswith("- grpo")] for _, rows in panels]
    assert all(order == orders[0] for order in orders)


def test_the_answer_figure_reads_at_readme_width(tmp_path):
    """One panel, one row per declared comparison, every text at least 11 px tall when the PNG
    is shown 900 px wide (GitHub's README column)."""
    from matplotlib.image import imread
    from matplotlib.text import Text

    from ict.report.answer import declared_rows
    from ict.report.plots import ANSWER_WIDTH_PX, answer_figure, plot_answer

    judgement, values = _declared_judgement()
    rows = declared_rows(judgement, values, 0.95)
    fig = answer_figure(rows, title="Declared comparisons", band_text="95% interval", margin=0.03)
    assert len(fig.axes) == 1
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == [r.label for r in rows]
    width_px = fig.get_size_inches()[0] * fig.dpi
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    assert len(texts) > len(rows) * 2  # labels, verdicts, ticks, title, axis label
    for text in texts:
        shown = text.get_fontsize() * fig.dpi / 72 * ANSWER_WIDTH_PX / width_px
        assert shown >= 11, f"{text.get_text()!r}: {shown:.1f} px at {ANSWER_WIDTH_PX} px"
    path = plot_answer(rows, tmp_path / "answer_declared.png", title="t", band_text="b")
    assert imread(path).shape[1] == ANSWER_WIDTH_PX
    assert plot_answer([], tmp_path / "none.png", title="t", band_text="b") is None
