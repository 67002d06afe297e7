"""Every figure the package writes keeps its legends, titles, labels and texts inside its canvas
at the size it is written, and a legend names a long task in full (wrapped): issue 50, where
`ict eval`'s pass@k plot cut the task name to a few letters outside the canvas.

Each figure kind is rendered with long names, and each figure is checked as `savefig` writes it:
every legend, title, axis (tick labels and label), text and annotation lies within the canvas."""

from __future__ import annotations

import json

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402

from .helpers import make_sample, write_run  # noqa: E402

TASK = (
    "rg:basic_arithmetic?template=chain_sum_2shot&min_terms=2&max_terms=2&min_digits=1"
    '&max_digits=2&operators=["%2B"]&allow_parentheses=false&allow_negation=false'
)
MODEL = "runs/20261204-101500-ict-basic_arithmetic-seed0/checkpoints/step_000020"


def outside(fig) -> list[str]:
    """The artists of `fig` that reach outside its canvas (1 px tolerance), as drawn now."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    width, height = fig.bbox.width, fig.bbox.height
    found = []
    for ax in fig.axes:
        if not ax.get_visible() or not ax.axison and not ax.get_legend():
            continue
        named = [
            ("x axis", ax.xaxis.get_tightbbox(renderer)),
            ("y axis", ax.yaxis.get_tightbbox(renderer)),
        ]
        named += [(f"title {t.get_text()!r}", t.get_window_extent(renderer))
                  for t in (ax.title, ax._left_title, ax._right_title) if t.get_text()]  # fmt: skip
        if ax.get_legend() is not None:
            named.append(("legend", ax.get_legend().get_window_extent(renderer)))
        named += [(f"text {t.get_text()!r}", t.get_window_extent(renderer)) for t in ax.texts]
        for name, box in named:
            if box is None or not ax.axison and "axis" in name:
                continue
            if box.x0 < -1 or box.y0 < -1 or box.x1 > width + 1 or box.y1 > height + 1:
                found.append(f"{name}: {box.bounds} outside {width:.0f}x{height:.0f}")
    for text in fig.texts:
        box = text.get_window_extent(renderer)
        if box.x0 < -1 or box.y0 < -1 or box.x1 > width + 1 or box.y1 > height + 1:
            found.append(f"figure text {text.get_text()!r}: {box.bounds}")
    return found


@pytest.fixture
def written(monkeypatch):
    """{file name: (artists outside the canvas, legend texts)} of every figure saved."""
    seen: dict[str, tuple[list[str], list[str]]] = {}
    original = Figure.savefig

    def check(fig, path, *args, **kwargs):
        legends = [t.get_text() for ax in fig.axes if ax.get_legend() is not None
                   for t in ax.get_legend().get_texts()]  # fmt: skip
        seen[str(path).rsplit("/", 1)[-1]] = (outside(fig), legends)
        return original(fig, path, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", check)
    return seen


def assert_inside(written: dict, expected: int) -> None:
    assert len(written) >= expected, sorted(written)
    bad = {name: problems for name, (problems, _) in written.items() if problems}
    assert not bad, bad


def test_ict_eval_pass_at_k_plot_names_the_task_in_full_inside_the_canvas(tmp_path, written):
    from ict.cli.eval import _write_k_plot

    ks = [1, 2, 4, 8]
    result = {
        "model": MODEL,
        "settings": {"k": ks, "n": 8},
        "benchmarks": {
            TASK: {**{f"pass@{k}": 0.3 + 0.05 * k for k in ks},
                   **{f"pass@{k}_ci95": [0.2 + 0.05 * k, 0.4 + 0.05 * k] for k in ks}},
        },
    }  # fmt: skip
    assert _write_k_plot(result, str(tmp_path)) is not None
    assert_inside(written, 1)
    (legend,) = [legends for _, legends in written.values()]
    assert [text.replace("\n", "") for text in legend] == [TASK]  # in full, wrapped
    assert all(len(line) <= 40 for line in legend[0].splitlines())


def test_ict_train_run_plots_are_inside_the_canvas(tmp_path, written):
    from ict.report.plots import plot_run

    run = write_run(tmp_path, "ict+stapo_with_a_long_composed_method_name", 0, steps=8,
                    extra={f"eval/{TASK}/pass@1": 0.4, "format_rate": 0.9,
                           "paper/collapse_share": 0.3, "paper/explosion_share": 0.2,
                           "score_curve": list(np.linspace(0.6, 0.0, 101))})  # fmt: skip
    paths = plot_run(run)
    names = {p.name for p in paths}
    assert {"score_curve.png", "eval.png"} <= names
    assert_inside(written, len(paths))


def test_ict_compare_figures_are_inside_the_canvas(tmp_path, written):
    """The report's method curves, selection overlap, forest and answer figures, the pass@k
    and step panels of the exploration study, and the tuning figure."""
    from ict.report.comparison import build_report
    from ict.report.plots import (
        ForestRow,
        plot_answer,
        plot_forest,
        plot_k_curves,
        plot_step_panels,
    )
    from ict.report.selection_overlap import overlap_study, plot_overlap

    rng = np.random.default_rng(0)
    runs = [
        write_run(tmp_path / "runs", method, seed, correct=[seed % 2, 1, 0, 1],
                  samples=[make_sample(s, list("the answer is 42 ok"), rng) for s in range(4)])
        for method in ("grpo", "ict", "random_sequence") for seed in range(2)
    ]  # fmt: skip
    build_report(runs, tmp_path / "report", title=f"ict compare - {TASK}")
    study = overlap_study([make_sample(s // 2, list("a b c d e f"), rng) for s in range(6)])
    plot_overlap(study, tmp_path / "o.png")
    curve = ([1, 2, 4, 8], [0.3, 0.4, 0.5, 0.6], [0.2, 0.3, 0.4, 0.5], [0.4, 0.5, 0.6, 0.7])
    plot_k_curves({f"ict on {TASK}": curve}, tmp_path / "k.png", title=f"pass@k on {TASK}",
                  reference=(f"start model {MODEL}", curve))  # fmt: skip
    plot_step_panels([("entropy", "nats", {"ict": curve}), ("pass@1", "rate", {"grpo": curve})],
                     tmp_path / "steps.png", title=f"exploration on {TASK}")  # fmt: skip
    rows = [ForestRow("ict - grpo, pass@4", "ict", 0.05, -0.02, 0.12, True,
                      "not shown different (Holm p 0.41); equivalent within ±0.05: no"),
            ForestRow("ict - random_sequence, pass@1", "ict", -0.06, -0.1, -0.02, False,
                      "lower (Holm p 0.002)")]  # fmt: skip
    plot_forest([("pass@1", rows), ("pass@4", rows)], tmp_path / "f.png", title=TASK,
                band_text="95% t interval over seeds", margin=0.03)  # fmt: skip
    plot_answer(rows, tmp_path / "a.png", title=f"Declared comparisons on {TASK}",
                band_text="95% t interval over seeds", margin=0.03)  # fmt: skip
    assert_inside(written, 9)


def test_the_tuning_figure_is_inside_the_canvas(tmp_path, written):
    from ict.report.tuning import plot_tuning
    from tests.compare.test_tuning_report import record_of
    from tests.compare.test_tuning_rule import SPEC, peak, table

    scores = {"ict": table(peak(4e-5)), "random_sequence": table(lambda v: 0.3 - 0.03 * v / 1e-5)}
    record = record_of(SPEC, scores, {"ict": {"low": 0, "high": 0},
                                      "random_sequence": {"low": 3, "high": 0}})  # fmt: skip
    plot_tuning(json.loads(json.dumps(record)), tmp_path / "tuning.png")
    assert_inside(written, 1)


def test_fit_canvas_grows_a_figure_whose_legend_is_outside_and_leaves_others():
    from ict.report.plots import _pyplot, fit_canvas

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3), dpi=100)
    ax.plot([1, 2], [1, 2], label="x" * 60)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    assert outside(fig)  # the legend beside the axes: cut off
    size = ax.get_position().width * fig.get_size_inches()[0]
    fit_canvas(fig)
    assert outside(fig) == [] and fig.get_size_inches()[0] > 6
    assert ax.get_position().width * fig.get_size_inches()[0] == pytest.approx(size)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 3), dpi=100)
    ax.plot([1, 2], [1, 2], label="short")
    ax.legend()
    fig.tight_layout()
    fit_canvas(fig)
    assert list(fig.get_size_inches()) == [6, 3]
    plt.close(fig)


def test_wrap_label_keeps_every_character():
    from ict.report.plots import wrap_label

    wrapped = wrap_label(TASK)
    assert wrapped.replace("\n", "") == TASK and max(map(len, wrapped.splitlines())) <= 40
    assert wrap_label("ict") == "ict"
    assert wrap_label("a" * 90).splitlines() == ["a" * 40, "a" * 40, "a" * 10]
