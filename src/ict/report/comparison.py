"""The comparison report: methods x seeds from run directories -> report.md + report.html.

Works on any run directories in the documented format (native trainer, TRL, verl), so one report
format serves every engine. Final numbers: the final value of each eval/<benchmark>/pass@<k> key
(final_eval.json when `ict compare` wrote one) and the reward of the last steps; mean and a
Student-t interval across seeds, and each method's difference to the baseline (paired t over seeds
shared with the baseline, else Welch t). A difference whose interval contains 0 is reported as
"no significant difference"; a number is never printed without its interval and sample size.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ict.errors import DataError
from ict.report.document import Document
from ict.report.intervals import (
    Interval,
    format_interval,
    paired_difference,
    t_interval,
    verdict,
    welch_difference,
)
from ict.report.overlap import POSITION_BINS, overlap_study, plot_overlap
from ict.report.plots import plot_methods
from ict.report.runs import Run, flat_config, load_run, read_jsonl

METHOD_ORDER = ["grpo", "entropy", "stapo", "random", "ict"]
LAST_STEPS = 5  # training reward summarised over the last steps of each run

CURVES = [
    ("reward", "Training reward", "mean reward", [("reward/mean", "")]),
    (
        "entropy",
        "Shannon entropy H (solid: valid tokens, dashed: selected)",
        "nats",
        [("valid/entropy", "valid"), ("selected/entropy", "selected")],
    ),
    (
        "renyi2",
        "Rényi-2 entropy H2 (solid: valid, dashed: selected)",
        "nats",
        [("valid/renyi2", "valid"), ("selected/renyi2", "selected")],
    ),
    (
        "js",
        "JS score (solid: valid, dashed: selected)",
        "nats",
        [("valid/js", "valid"), ("selected/js", "selected")],
    ),
    ("length", "Response length", "tokens", [("response_length/mean", "")]),
    ("clip", "Clip fraction", "fraction of tokens", [("clip_fraction", "")]),
    (
        "jaccard",
        "Jaccard of ICT vs 20-Entropy selections (same batch)",
        "Jaccard",
        [("overlap/ict_entropy_jaccard", "")],
    ),
]


def group_runs(runs: Sequence[Run]) -> dict[str, list[Run]]:
    """Runs by method, in METHOD_ORDER then first-seen order; runs sorted by seed."""
    groups: dict[str, list[Run]] = {}
    for run in runs:
        groups.setdefault(run.method, []).append(run)
    order = [m for m in METHOD_ORDER if m in groups] + [m for m in groups if m not in METHOD_ORDER]
    return {m: sorted(groups[m], key=lambda r: (r.seed is None, r.seed or 0)) for m in order}


def last_steps_mean(run: Run, key: str, last: int = LAST_STEPS) -> float | None:
    _, values = run.series(key)
    return float(np.mean(values[-last:])) if values else None


def final_values(runs: Sequence[Run], key: str) -> dict[int | str, float]:
    """{seed (or run name): final value} over runs that have the key."""
    out = {}
    for run in runs:
        value = last_steps_mean(run, key) if key == "reward/mean" else run.final(key)
        if value is not None and math.isfinite(value):
            out[run.seed if run.seed is not None else run.path.name] = value
    return out


def difference(values: dict, base: dict, confidence: float) -> Interval:
    """Paired t over shared seeds when there are >= 2 of them, else Welch t."""
    shared = sorted(set(values) & set(base), key=str)
    if len(shared) >= 2 and len(shared) == min(len(values), len(base)):
        return paired_difference([values[s] for s in shared], [base[s] for s in shared], confidence)
    return welch_difference(list(values.values()), list(base.values()), confidence)


def results_table(
    groups: dict[str, list[Run]], key: str, baseline: str, confidence: float
) -> tuple[list[str], list[list[str]], dict]:
    """Header, rows and raw numbers for one metric: mean [CI], n, difference to the baseline."""
    pct = int(round(confidence * 100))
    header = [
        "method",
        "seeds",
        f"mean [{pct}% CI]",
        f"difference to {baseline} [{pct}% CI]",
        "verdict",
    ]
    rows, raw = [], {}
    base = final_values(groups.get(baseline, []), key)
    for method, runs in groups.items():
        values = final_values(runs, key)
        if not values:
            continue
        iv = t_interval(list(values.values()), confidence)
        entry = {"values": values, "mean": iv.mean, "low": iv.low, "high": iv.high, "n": iv.n}
        if method == baseline or not base:
            diff_text, word = "(baseline)" if method == baseline else "n/a (no baseline runs)", ""
        else:
            diff = difference(values, base, confidence)
            diff_text, word = f"{format_interval(diff, signed=True)} ({diff.method})", verdict(diff)
            entry["difference"] = {
                "mean": diff.mean,
                "low": diff.low,
                "high": diff.high,
                "n": diff.n,
                "method": diff.method,
                "verdict": word,
            }
        rows.append([method, str(iv.n), format_interval(iv), diff_text, word])
        raw[method] = entry
    return header, rows, raw


def _json_safe(obj):
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def settings_tables(runs: Sequence[Run]) -> tuple[dict, list[str], list[list[str]]]:
    """(settings shared by every run, header and rows of the settings that differ per run)."""
    flats = [flat_config(r.config) for r in runs]
    keys = sorted({k for f in flats for k in f})
    common, varying = {}, []
    for key in keys:
        values = [json.dumps(f.get(key), sort_keys=True, default=str) for f in flats]
        if len(set(values)) == 1:
            common[key] = flats[0].get(key)
        else:
            varying.append(key)
    varying = [k for k in varying if k not in ("output_dir",)]
    header = ["run", *varying]
    rows = [
        [r.path.name, *(str(f.get(k, "")) for k in varying)]
        for r, f in zip(runs, flats, strict=True)
    ]
    return common, header, rows


def build_report(
    run_dirs: Sequence[str | Path],
    out_dir: str | Path,
    *,
    title: str = "ict compare",
    baseline: str = "grpo",
    confidence: float = 0.95,
    notes: Sequence[str] = (),
) -> Path:
    """Write OUT_DIR/report.md, report.html (self-contained), report.json and plots/*.png.

    Returns the path of report.md. Raises DataError when no run directory can be read."""
    if not run_dirs:
        raise DataError("no run directories given; pass --runs DIR [DIR ...] or run a grid first")
    runs = [load_run(d) for d in run_dirs]
    groups = group_runs(runs)
    out = Path(out_dir)
    plots = out / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    doc = Document(title)
    pct = int(round(confidence * 100))

    seeds = {m: [r.seed for r in rs] for m, rs in groups.items()}
    doc.para(
        f"{len(runs)} runs: "
        + "; ".join(
            f"**{m}** x {len(rs)} seed{'s' * (len(rs) != 1)} ({', '.join(str(s) for s in seeds[m])})"
            for m, rs in groups.items()
        )
        + "."
    )
    for note in notes:
        doc.para(note)
    doc.para(
        f"Intervals: mean across seeds with a two-sided {pct}% Student-t interval (n = number of seeds; "
        f"no interval with one seed). Differences to **{baseline}**: paired t over seeds shared with the "
        "baseline (same data order and evaluation), else Welch t. A difference whose interval contains 0 "
        "is reported as *no significant difference*. Seeds are few: intervals are wide, read them before the means."
    )

    raw: dict = {
        "confidence": confidence,
        "interval": "student-t across seeds",
        "baseline": baseline,
        "metrics": {},
    }
    doc.heading("Final results")
    eval_keys = sorted(
        {k for r in runs for k in r.keys() if k.startswith("eval/") and "/pass@" in k}
    )
    settings_notes = sorted(
        {
            json.dumps(r.final_eval.get("settings"), sort_keys=True)
            for r in runs
            if r.final_eval.get("settings")
        }
    )
    for note in settings_notes:
        doc.para(f"Evaluation settings: `{note}`.")
    if not eval_keys:
        doc.para(
            "No held-out evaluation (eval/<benchmark>/pass@k) in these runs; only training metrics below."
        )
    for key in [*eval_keys, "reward/mean"]:
        header, rows, numbers = results_table(groups, key, baseline, confidence)
        if not rows:
            continue
        label = (
            f"held-out {key[5:]}"
            if key.startswith("eval/")
            else f"training reward (mean of the last {LAST_STEPS} steps)"
        )
        doc.heading(label, 3)
        doc.table(header, rows)
        raw["metrics"][key] = numbers

    doc.heading("Entropy health")
    flag_rows = []
    for method, rs in groups.items():
        for r in rs:
            c, e = r.flag("health/entropy_collapse"), r.flag("health/entropy_explosion")
            if c or e:
                flag_rows.append(
                    [method, str(r.seed), "COLLAPSE" if c else "-", "EXPLOSION" if e else "-"]
                )
    if flag_rows:
        doc.para(
            f"**Warning**: {len(flag_rows)} of {len(runs)} runs raised an entropy-health flag."
        )
        doc.table(["method", "seed", "collapse", "explosion"], flag_rows)
    else:
        doc.para(f"No entropy collapse or explosion flag in any of the {len(runs)} runs.")
    raw["health_flags"] = flag_rows

    doc.heading("Curves")
    doc.para(
        "Lines: mean across seeds; shaded band: min to max across seeds (not a confidence interval)."
    )
    curves = list(CURVES)
    for key in eval_keys:
        curves.insert(
            1,
            (
                f"eval_{key[5:].replace('/', '_').replace('@', 'at')}",
                f"Held-out {key[5:]}",
                "pass@k",
                [(key, "")],
            ),
        )
    for stem, ctitle, ylabel, keys in curves:
        path = plot_methods(groups, keys, plots / f"{stem}.png", title=ctitle, ylabel=ylabel)
        if path is not None:
            doc.image(path, ctitle)

    doc.heading("Which tokens are selected: ICT vs 20-Entropy")
    records = []
    for r in runs:
        if r.samples_path.exists():
            records += read_jsonl(r.samples_path)
    study = overlap_study(records)
    if study.steps:
        verdict_text = (
            "ICT picks largely different tokens than 20-Entropy"
            if study.mean_jaccard < 0.5
            else "ICT and 20-Entropy pick largely the same tokens"
        )
        doc.para(
            f"From samples.jsonl: {study.responses} responses ({study.tokens} tokens) at {len(study.steps)} logged steps, all methods pooled "
            f"(every run records the ICT and 20-Entropy selections as diagnostics). Mean Jaccard of the two selections per step: "
            f"**{study.mean_jaccard:.3f}**; two independent random selections of the same sizes would give {study.mean_chance:.3f}. {verdict_text}."
        )
        ta, tb = study.top["ict"], study.top["entropy"]
        rows = []
        for i in range(max(len(ta), len(tb))):
            a = ta[i] if i < len(ta) else ("", "", "")
            b = tb[i] if i < len(tb) else ("", "", "")
            rows.append(
                [
                    str(i + 1),
                    f"`{_visible(a[0])}`" if a[0] else "",
                    f"{a[1]} / {a[2]}" if a[0] else "",
                    f"`{_visible(b[0])}`" if b[0] else "",
                    f"{b[1]} / {b[2]}" if b[0] else "",
                ]
            )
        doc.table(["rank", "ICT token", "picked / seen", "20-Entropy token", "picked / seen"], rows)
        edges = [
            f"{i / POSITION_BINS:.1f}-{(i + 1) / POSITION_BINS:.1f}" for i in range(POSITION_BINS)
        ]
        doc.para("Share of each selector's picks by relative position t / L in the response:")
        doc.table(
            ["selector", *edges],
            [[name, *(f"{x:.2f}" for x in frac)] for name, frac in study.position.items()],
        )
        path = plot_overlap(study, plots / "overlap.png")
        if path is not None:
            doc.image(path, "Selection overlap per step (left) and position of picks (right)")
        raw["overlap"] = {
            "mean_jaccard": study.mean_jaccard,
            "mean_chance": study.mean_chance,
            "responses": study.responses,
            "tokens": study.tokens,
        }
    else:
        doc.para(
            "No samples.jsonl with both ICT and 20-Entropy selections in these runs; no overlap study."
        )

    doc.heading("Settings")
    common, header, rows = settings_tables(runs)
    if len(header) > 1:
        doc.para("Settings that differ between runs:")
        doc.table(header, rows)
    if common:
        doc.para("Settings shared by every run:")
        doc.pre("\n".join(f"{k}: {json.dumps(v, default=str)}" for k, v in common.items()))
    doc.para("Run directories: " + ", ".join(f"`{r.path}`" for r in runs))

    md_path = out / "report.md"
    md_path.write_text(doc.markdown(out), encoding="utf-8")
    (out / "report.html").write_text(doc.html(), encoding="utf-8")
    (out / "report.json").write_text(json.dumps(_json_safe(raw), indent=2), encoding="utf-8")
    return md_path


def _visible(token: str) -> str:
    return token.replace("\n", "\\n").replace("\t", "\\t").replace(" ", "␣") or "(empty)"
