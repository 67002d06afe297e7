"""PNG plots from metrics.jsonl: one run (`plot_run`) or methods x seeds (`plot_methods`).

Each plot is a named spec: a file name, a title and the metric keys it draws. A key missing from
every row is skipped; a plot with nothing to draw is not written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ict.files import safe_filename
from ict.methods import METHODS
from ict.report.runs import Run, load_run

# (file stem, title, y label, [(metrics.jsonl key, legend label)])
RUN_PLOTS: list[tuple[str, str, str, list[tuple[str, str]]]] = [
    ("reward", "Reward", "mean reward", [("reward/mean", "reward")]),
    (
        "accuracy",
        "Accuracy",
        "fraction",
        [("accuracy", "accuracy"), ("format_rate", "format rate")],
    ),
    (
        "entropy",
        "Shannon entropy H",
        "nats",
        [("valid/entropy", "valid"), ("selected/entropy", "selected")],
    ),
    (
        "renyi2",
        "Rényi-2 entropy H2",
        "nats",
        [("valid/renyi2", "valid"), ("selected/renyi2", "selected")],
    ),
    ("js", "JS score", "nats", [("valid/js", "valid"), ("selected/js", "selected")]),
    (
        "selected",
        "Selected fraction",
        "fraction of valid tokens",
        [
            ("selected_fraction", "selected"),
            ("overlap/ict_entropy_jaccard", "Jaccard ICT vs 20-Entropy"),
        ],
    ),
    ("length", "Response length", "tokens", [("response_length/mean", "mean length")]),
    ("clip", "Clip fraction", "fraction", [("clip_fraction", "clip fraction")]),
    (
        "regime",
        "The method's picks: collapse vs explosion regime (paper)",
        "share of the method's selected tokens",
        [
            ("paper/collapse_share", "p(y) > exp(-H2): reinforcing lowers H2"),
            ("paper/explosion_share", "p(y) < exp(-H2): reinforcing raises H2"),
        ],
    ),
    (
        "entropy_ratio",
        "High/low-entropy ratio of the method's picks (paper)",
        "ratio (split: the step's median valid H)",
        [("paper/high_low_entropy_ratio", "high / low")],
    ),
]


# One colour per method in every figure: the i-th method of the registry (ict.methods.METHODS) takes
# the i-th colour, so a method keeps its colour across reports, whichever methods a grid runs. No
# grey: grey is the figures' own (the equivalence band, the model before RL, reference lines).
PALETTE = (
    "#1f77b4", "#ff7f0e", "#8c564b", "#9467bd", "#2ca02c", "#e377c2", "#bcbd22", "#17becf",
    "#d62728", "#ff9896", "#98df8a", "#aec7e8", "#7b4173", "#ffbb78", "#dbdb8d", "#9edae5",
    "#393b79", "#c49c94", "#f7b6d2", "#637939", "#c5b0d5", "#843c39",
)  # fmt: skip
BAND_COLOR = "0.85"  # the equivalence margin's band (light grey)
REFERENCE_COLOR = "0.35"  # the model before RL, dashed


def method_color(label: str) -> str:
    """The colour of the method a label names ('ict', 'ict - grpo', 'ict (selected)'): its
    registry position in PALETTE; a name outside the registry gets a colour from its CRC32 (the
    same on every machine and run)."""
    import zlib

    name = label.split(" ")[0]
    if name in METHODS:
        return PALETTE[list(METHODS).index(name) % len(PALETTE)]
    return PALETTE[zlib.crc32(name.encode()) % len(PALETTE)]


EMA_ALPHA = 0.3  # weight of the newest logged step in the smoothed curves
SMOOTHING_TEXT = f"exponential moving average (EMA, weight {EMA_ALPHA} on the newest step)"
RAW_STYLE = dict(alpha=0.45, s=12, lw=0)  # faint raw points under the smoothed line


def ema(values, alpha: float = EMA_ALPHA) -> np.ndarray:
    """[S] -> [S] exponential moving average over logged points: s_0 = x_0,
    s_t = alpha * x_t + (1 - alpha) * s_{t-1}. No look-ahead, so the line lags a trend slightly."""
    x = np.asarray(values, dtype=np.float64)
    out = np.empty_like(x)
    for i, v in enumerate(x):
        out[i] = v if i == 0 else alpha * v + (1.0 - alpha) * out[i - 1]
    return out


MIN_SMOOTHED_POINTS = 10  # below this many logged steps the EMA's lag hides the trend: join points


def smoothed(values) -> np.ndarray:
    """[S] -> [S]: `ema(values)` for series of at least MIN_SMOOTHED_POINTS points, else the
    values themselves (a line through the points)."""
    x = np.asarray(values, dtype=np.float64)
    return ema(x) if x.size >= MIN_SMOOTHED_POINTS else x


def line_legend(n_points: int) -> str:
    """The legend title saying how the lines were drawn."""
    if n_points >= MIN_SMOOTHED_POINTS:
        return f"points: logged; lines: EMA α={EMA_ALPHA}"
    return f"points: logged; lines join them (< {MIN_SMOOTHED_POINTS} steps: no smoothing)"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_run(run_dir: str | Path, out_dir: str | Path | None = None) -> list[Path]:
    """Write RUN_DIR/plots/<name>.png (reward, accuracy, entropy valid vs selected, renyi2, js,
    selected fraction, response length, clip fraction, eval pass@k) and return their paths.
    Each metric: faint logged points and their EMA (`ema`) as a line."""
    run = load_run(run_dir)
    out = Path(out_dir) if out_dir is not None else run.path / "plots"
    out.mkdir(parents=True, exist_ok=True)
    specs = list(RUN_PLOTS)
    eval_keys = sorted(k for k in run.keys() if k.startswith("eval/"))
    if eval_keys:
        specs.append(("eval", "Held-out pass@k", "pass@k", [(k, k[5:]) for k in eval_keys]))
    plt = _pyplot()
    written = []
    for stem, title, ylabel, keys in specs:
        lines = [(label, *run.series(key)) for key, label in keys]
        lines = [line for line in lines if line[1]]
        if not lines:
            continue
        fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for i, (label, steps, values) in enumerate(lines):
            color = colors[i % len(colors)]
            ax.scatter(steps, values, color=color, **RAW_STYLE)
            ax.plot(steps, smoothed(values), color=color, label=wrap_label(label))
        ax.set(title=wrap_label(f"{title} - {run.method}", 60), xlabel="step", ylabel=ylabel)
        ax.grid(alpha=0.3)
        n_points = max(len(steps) for _, steps, _ in lines)
        ax.legend(fontsize=8, title=line_legend(n_points), title_fontsize=7)
        written.append(save_figure(fig, out / f"{stem}.png"))
    curve = score_curve_plot(run, out, plt)
    if curve is not None:
        written.append(curve)
    return written


def score_curve_plot(run: Run, out: Path, plt) -> Path | None:
    """The paper's sorted-score curve of the last logged step (metrics.jsonl `score_curve`: the
    valid tokens' scores sorted high to low at 101 rank quantiles), with the 10% mark."""
    rows = [r for r in run.metrics if isinstance(r.get("score_curve"), list) and r["score_curve"]]
    if not rows:
        return None
    row = rows[-1]
    curve = np.asarray(row["score_curve"], dtype=np.float64)
    ranks = np.linspace(0, 100, curve.size)
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
    ax.plot(ranks, curve, label=f"step {row['step']}")
    ax.axvline(10, color="gray", ls="--", lw=1, label="top 10% (ICT's cut)")
    ax.set(
        title=wrap_label(f"Sorted token scores - {run.method}", 60),
        xlabel="rank among the step's valid tokens (%)",
        ylabel="score (nats)",
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, out / "score_curve.png")


def band(runs: Sequence[Run], key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(steps, mean, min, max) of one metric across runs at the steps every run logged it.

    Shapes: all four are [S] with S the number of shared steps (0 when none)."""
    per_run = [dict(zip(*run.series(key), strict=True)) for run in runs]
    per_run = [d for d in per_run if d]
    if not per_run:
        empty = np.zeros(0)
        return empty, empty, empty, empty
    steps = sorted(set.intersection(*(set(d) for d in per_run)))
    values = np.array([[d[s] for s in steps] for d in per_run], dtype=np.float64).reshape(
        len(per_run), len(steps)
    )
    return np.asarray(steps, dtype=np.float64), values.mean(0), values.min(0), values.max(0)


def plot_methods(
    runs_by_method: dict[str, Sequence[Run]],
    keys: Sequence[tuple[str, str]],
    path: str | Path,
    *,
    title: str,
    ylabel: str,
) -> Path | None:
    """One figure: for each method and key, the mean across seeds (faint points), its EMA (line)
    and the min-max band across seeds.

    `keys`: (metric key, suffix for the legend, e.g. "valid"/"selected"; "" for none). The second key
    is dashed. Returns None (and writes nothing) when no method logged any of the keys."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8.5, 4), dpi=100)
    drawn, n_points = False, 0
    for method, runs in runs_by_method.items():
        color = method_color(method)
        for j, (key, suffix) in enumerate(keys):
            steps, mean, low, high = band(runs, key)
            if len(steps) == 0:
                continue
            drawn = True
            label = wrap_label(f"{method} ({suffix})" if suffix else method)
            ax.scatter(steps, mean, color=color, **RAW_STYLE)
            ax.plot(steps, smoothed(mean), color=color, ls="-" if j == 0 else "--", label=label)
            n_points = max(n_points, len(steps))
            if len(runs) > 1:
                ax.fill_between(steps, low, high, color=color, alpha=0.07, lw=0)
    if not drawn:
        plt.close(fig)
        return None
    ax.set(title=wrap_label(title, 80), xlabel="step", ylabel=ylabel)
    ax.grid(alpha=0.3)
    ax.legend(
        fontsize=7,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        title=line_legend(n_points).replace("points: logged; ", "points: mean over seeds\n")
        + "\nband: min-max over seeds",
        title_fontsize=7,
    )
    return save_figure(fig, path)


def save_figure(fig, path: str | Path) -> Path:
    """Lay out `fig`, grow it until every artist lies inside its canvas (`fit_canvas`), write it
    to `path` (creating its folder) as PNG, close it; returns the path written, whose file name
    is made portable (ict.files.safe_filename: `eval_toy:cot` -> `eval_toy_cot`)."""
    import warnings

    import matplotlib.pyplot as plt

    with warnings.catch_warnings():  # a layout tight_layout cannot fit is fit_canvas's to grow
        warnings.filterwarnings("ignore", message="Tight layout not applied")
        fig.tight_layout()
    fit_canvas(fig)
    path = Path(path)
    path = path.with_name(safe_filename(path.name))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


LABEL_WIDTH = 40  # characters of a legend label a line (a task spec wraps at its ? & , /)


def wrap_label(text: str, width: int = LABEL_WIDTH) -> str:
    """`text` in full on lines of at most `width` characters: broken after spaces and the
    separators of task specs (`?`, `&`, `,`, `/`), a part longer than a line cut at `width`."""
    import re

    if len(text) <= width:
        return text
    lines, line = [], ""
    for part in re.split(r"(?<=[ ?&,/])", text):
        while len(part) > width:
            if line:
                lines.append(line)
                line = ""
            lines.append(part[:width])
            part = part[width:]
        if line and len(line) + len(part) > width:
            lines.append(line)
            line = ""
        line += part
    if line:
        lines.append(line)
    return "\n".join(x.rstrip() for x in lines)


def fit_canvas(fig, pad_inches: float = 0.05) -> None:
    """Grow `fig` so that every artist (legends placed beside the axes, titles, labels, texts
    beside a panel) lies inside its canvas, keeping each axes' size in inches and its place
    relative to the others; a figure already inside is left as it is. Call after the layout
    (tight_layout / subplots_adjust) and before saving."""
    if not hasattr(fig.canvas, "get_renderer"):  # a Figure made without pyplot: draw with Agg
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        FigureCanvasAgg(fig)
    for _ in range(3):  # a resize moves no artist relative to the axes: one pass usually fits
        renderer = fig.canvas.get_renderer()
        box = fig.get_tightbbox(renderer)  # inches
        width, height = fig.get_size_inches()
        left = max(0.0, pad_inches - box.x0)
        right = max(0.0, box.x1 - width + pad_inches)
        bottom = max(0.0, pad_inches - box.y0)
        top = max(0.0, box.y1 - height + pad_inches)
        if max(left, right, bottom, top) <= 1e-3:
            return
        new_w, new_h = width + left + right, height + bottom + top
        for ax in fig.axes:
            pos = ax.get_position()
            ax.set_position(
                [
                    (pos.x0 * width + left) / new_w,
                    (pos.y0 * height + bottom) / new_h,
                    pos.width * width / new_w,
                    pos.height * height / new_h,
                ]
            )
        for text in fig.texts:  # suptitle and figure texts: same place in inches
            x, y = text.get_position()
            text.set_position(((x * width + left) / new_w, (y * height + bottom) / new_h))
        fig.set_size_inches(new_w, new_h)


# ---- pass@k against k, and the exploration numbers against training step ----------------------
KCurve = tuple[Sequence[int], Sequence[float], Sequence[float], Sequence[float]]  # ks, mean, lo, hi


def k_curves_from_summary(summary: dict) -> dict[str, KCurve]:
    """{benchmark: (ks [K], pass@k [K], low [K], high [K])} from an `ict eval` summary (its
    settings' k and each benchmark's pass@k with pass@k_ci95)."""
    ks = list(summary["settings"]["k"])
    out = {}
    for label, m in summary["benchmarks"].items():
        out[label] = (
            ks,
            [m[f"pass@{k}"] for k in ks],
            [m[f"pass@{k}_ci95"][0] for k in ks],
            [m[f"pass@{k}_ci95"][1] for k in ks],
        )
    return out


def _k_axis(ax, ks: Sequence[int]) -> None:
    """A log2 x axis with a tick at every k."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(ks))
    ax.set_xticklabels([str(k) for k in ks])
    ax.minorticks_off()


def plot_k_curves(
    curves: dict[str, KCurve],
    path: str | Path,
    *,
    title: str,
    ylabel: str = "pass@k",
    reference: tuple[str, KCurve] | None = None,
    zero_line: bool = False,
) -> Path | None:
    """pass@k (or a difference) against k on a log2 axis: one line with markers and its interval
    band per curve; `reference` (label, curve) dashed gray (the model before RL); `zero_line`: a
    line at 0 (for differences). Each curve: (ks [K], mean [K], low [K], high [K]), in [0, 1] for
    pass@k. Returns the path, or None when there is nothing to draw."""
    if not curves and reference is None:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4), dpi=100)
    all_ks: set[int] = set()
    for label, (ks, mean, low, high) in curves.items():
        color = method_color(label)
        ax.plot(ks, mean, marker="o", ms=3, color=color, label=wrap_label(label))
        ax.fill_between(ks, low, high, color=color, alpha=0.12, lw=0)
        all_ks |= set(ks)
    if reference is not None:
        label, (ks, mean, low, high) = reference
        ax.plot(ks, mean, ls="--", marker="s", ms=3, color=REFERENCE_COLOR, label=wrap_label(label))
        ax.fill_between(ks, low, high, color="0.5", alpha=0.10, lw=0)
        all_ks |= set(ks)
    if zero_line:
        ax.axhline(0.0, color="black", lw=0.8)
    _k_axis(ax, sorted(all_ks))
    ax.set(title=wrap_label(title, 70), xlabel="k (log scale)", ylabel=ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="band: 95% interval",
              title_fontsize=7)  # fmt: skip
    return save_figure(fig, path)


StepCurve = tuple[Sequence[float], Sequence[float], Sequence[float], Sequence[float]]  # steps, ...


def plot_step_panels(
    panels: Sequence[tuple[str, str, dict[str, StepCurve]]], path: str | Path, *, title: str
) -> Path | None:
    """A grid of panels, two a row: each (panel title, y label, {method: (steps [S], mean [S],
    low [S], high [S])}) drawn against the training step, one line with markers and its interval
    band per method. Returns the path, or None when no panel has a curve."""
    panels = [p for p in panels if p[2]]
    if not panels:
        return None
    plt = _pyplot()
    rows = (len(panels) + 1) // 2
    fig, axes = plt.subplots(rows, 2, figsize=(11, 3.4 * rows), dpi=100, squeeze=False)
    for ax, (ptitle, ylabel, curves) in zip(axes.flat, panels, strict=False):
        for method, (steps, mean, low, high) in curves.items():
            color = method_color(method)
            ax.plot(steps, mean, marker="o", ms=3, color=color, label=wrap_label(method))
            ax.fill_between(steps, low, high, color=color, alpha=0.12, lw=0)
        ax.set(title=ptitle, xlabel="training step", ylabel=ylabel)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7, title="band: 95% interval", title_fontsize=7)
    fig.suptitle(title, fontsize=10)
    return save_figure(fig, path)


# ---- the answer: each comparison's difference with its interval -------------------------------
@dataclass(frozen=True)
class ForestRow:
    """One comparison in a forest plot: `label` ('ict - grpo'), its `method` (the colour),
    the difference `mean` with its interval [`low`, `high`] (None: not computable, e.g. one
    seed), whether it is `primary`, and the `verdict` text printed beside it."""

    label: str
    method: str
    mean: float
    low: float | None
    high: float | None
    primary: bool
    verdict: str


def forest_rows(ax, rows, *, margin, bar_width, label_font, verdict_font, marker) -> None:
    """The rows of a forest on `ax`, the first at the top (`plot_forest`'s panels and
    `answer_figure` draw theirs here): the equivalence margin +-`margin` shaded, a line at 0, each
    comparison's interval as a bar `bar_width` points wide in its method's colour and its point
    (`marker(row)` -> (marker, size, bold)), its verdict to the right and its label on the y
    axis, bold where `marker` says."""
    ys = np.arange(len(rows))[::-1]
    if margin:
        ax.axvspan(-margin, margin, color=BAND_COLOR, alpha=0.6, lw=0)
    ax.axvline(0.0, color="black", lw=0.8)
    bold = []
    for y, row in zip(ys, rows, strict=True):
        color = method_color(row.method)
        if row.low is not None and row.high is not None:
            ax.plot([row.low, row.high], [y, y], color=color, lw=bar_width, solid_capstyle="butt")
        symbol, size, strong = marker(row)
        bold.append(strong)
        ax.plot([row.mean], [y], marker=symbol, ms=size, color=color, ls="none")
        ax.annotate(
            row.verdict, (1.02, y), xycoords=("axes fraction", "data"), fontsize=verdict_font,
            va="center", fontweight="bold" if strong else "normal",
        )  # fmt: skip
    ax.set_yticks(ys)
    ax.set_yticklabels([r.label for r in rows], fontsize=label_font)
    for tick, strong in zip(ax.get_yticklabels(), bold, strict=True):
        tick.set_fontweight("bold" if strong else "normal")


def plot_forest(
    panels: Sequence[tuple[str, Sequence[ForestRow]]],
    path: str | Path,
    *,
    title: str,
    band_text: str,
    margin: float | None = None,
) -> Path | None:
    """A forest plot: one panel per (panel title, rows), in the order given (pass@k panels in order
    of k), each comparison a point with its interval as a bar in its method's colour, primary
    comparisons as filled stars with a bold label, the verdict to the right, a line at 0 and the
    equivalence margin +-`margin` shaded. `band_text` says what the bars are. Differences are in
    the metric's units. Returns the path, or None when no panel has a row."""
    panels = [(t, list(rows)) for t, rows in panels if rows]
    if not panels:
        return None
    plt = _pyplot()
    cols = min(len(panels), 4)
    n_rows = (len(panels) + cols - 1) // cols
    height = max(len(r) for _, r in panels) * 0.42 + 1.3
    fig, axes = plt.subplots(
        n_rows, cols, figsize=(3.4 * cols + 1.6, height * n_rows), dpi=110, squeeze=False,
        sharex=True,
    )  # fmt: skip
    for ax, (ptitle, rows) in zip(axes.flat, panels, strict=False):
        forest_rows(ax, rows, margin=margin, bar_width=2.2, label_font=8, verdict_font=7,
                    marker=lambda row: ("*", 13, True) if row.primary else ("o", 6, False))  # fmt: skip
        ax.set_ylim(-0.7, len(rows) - 0.3)
        ax.set_title(ptitle, fontsize=9)
        ax.set_xlabel("difference", fontsize=8)
        ax.xaxis.set_tick_params(labelbottom=True)
        ax.grid(axis="x", alpha=0.3)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    legend = f"bar: {band_text}; star: a declared primary comparison"
    if margin:
        legend += f"; grey: equivalence margin ±{margin:.2g}"
    fig.suptitle(f"{title}\n{legend}", fontsize=9)
    fig.subplots_adjust(right=0.8)
    return save_figure(fig, path)


# the README's answer figure: readable at README width
ANSWER_WIDTH_PX = 900  # the width the figure is shown at (GitHub's README column)
ANSWER_FONT_PT = 11  # every text; at 100 dpi and 9 in wide: 15 px at 900 px


def answer_figure(
    rows: Sequence[ForestRow], *, title: str, band_text: str, margin: float | None = None
):
    """The matplotlib figure of `plot_answer` (not saved): one axes, one row per comparison,
    ANSWER_WIDTH_PX wide at its dpi, every text ANSWER_FONT_PT points."""
    rows = list(rows)
    plt = _pyplot()
    dpi = 100
    fig, ax = plt.subplots(figsize=(ANSWER_WIDTH_PX / dpi, 1.6 + 0.55 * len(rows)), dpi=dpi)
    font = ANSWER_FONT_PT
    forest_rows(ax, rows, margin=margin, bar_width=3, label_font=font, verdict_font=font,
                marker=lambda row: ("o", 8, False))  # fmt: skip
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.tick_params(axis="x", labelsize=font)
    margin_text = f"; grey: equivalence margin ±{margin:.2g}" if margin else ""
    ax.set_xlabel(f"difference (bar: {band_text}{margin_text})", fontsize=font)
    ax.set_title(title, fontsize=font, loc="left")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.subplots_adjust(right=0.72)
    return fig


def plot_answer(
    rows: Sequence[ForestRow],
    path: str | Path,
    *,
    title: str,
    band_text: str,
    margin: float | None = None,
) -> Path | None:
    """The declared comparisons in one panel, one row each (`rows`: the primary comparisons, each
    labelled with its metric), drawn ANSWER_WIDTH_PX wide so that it is read at its own size: the
    difference with its interval as a bar in the method's colour, a line at 0, the equivalence
    margin +-`margin` shaded, the verdict to the right. Every text is ANSWER_FONT_PT points
    (ANSWER_FONT_PT * 100 / 72 px). Returns the path, or None when there is no row."""
    if not rows:
        return None
    fig = answer_figure(rows, title=title, band_text=band_text, margin=margin)
    fit_canvas(fig)  # a long verdict beside a row widens the figure rather than leave it
    import matplotlib.pyplot as plt

    path = Path(path)
    path = path.with_name(safe_filename(path.name))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=fig.dpi)
    plt.close(fig)
    return path
