"""PNG plots from metrics.jsonl: one run (`plot_run`) or methods x seeds (`plot_methods`).

Each plot is a named spec: a file name, a title and the metric keys it draws. A key missing from
every row is skipped; a plot with nothing to draw is not written.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

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
            ax.plot(steps, smoothed(values), color=color, label=label)
        ax.set(title=f"{title} - {run.method}", xlabel="step", ylabel=ylabel)
        ax.grid(alpha=0.3)
        n_points = max(len(steps) for _, steps, _ in lines)
        ax.legend(fontsize=8, title=line_legend(n_points), title_fontsize=7)
        fig.tight_layout()
        path = out / f"{stem}.png"
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
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
        title=f"Sorted token scores - {run.method}",
        xlabel="rank among the step's valid tokens (%)",
        ylabel="score (nats)",
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = out / "score_curve.png"
    fig.savefig(path)
    plt.close(fig)
    return path


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
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    drawn, n_points = False, 0
    for i, (method, runs) in enumerate(runs_by_method.items()):
        color = colors[i % len(colors)]
        for j, (key, suffix) in enumerate(keys):
            steps, mean, low, high = band(runs, key)
            if len(steps) == 0:
                continue
            drawn = True
            label = f"{method} ({suffix})" if suffix else method
            ax.scatter(steps, mean, color=color, **RAW_STYLE)
            ax.plot(steps, smoothed(mean), color=color, ls="-" if j == 0 else "--", label=label)
            n_points = max(n_points, len(steps))
            if len(runs) > 1:
                ax.fill_between(steps, low, high, color=color, alpha=0.07, lw=0)
    if not drawn:
        plt.close(fig)
        return None
    ax.set(title=title, xlabel="step", ylabel=ylabel)
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
    """Lay out `fig`, write it to `path` (creating its folder) as PNG, close it; returns the path."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
