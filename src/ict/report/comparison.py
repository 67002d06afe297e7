"""The comparison report: methods x seeds from run directories -> report.md + report.html.

Works on any run directories in the documented format (native trainer, TRL, verl), so one report
format serves every engine. Final numbers: the final value of each eval/<benchmark>/pass@<k> key
(final_eval.json when `ict compare` wrote one) and the reward of the last steps; mean over seeds
with a hierarchical bootstrap interval over seeds and problems (ict.evidence.hierarchical), each
run's own interval over problems, and each method's difference to the baseline with the same
paired resampling - descriptions. Verdicts come from seed-level tests under the declared
endpoints (ict.report.verdicts, ict.evidence.verdict), printed before any result. Runs without
per-problem results fall back to t / Welch t intervals clipped to the metric's range; a number is
never printed without its interval and sample size.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ict.data import HELDOUT_SPLIT
from ict.errors import DataError
from ict.eval.metrics import pass_at_k_per_problem
from ict.evidence.endpoints import Endpoints, declare
from ict.evidence.hierarchical import RunUnits, bootstrap_difference, bootstrap_mean, run_units
from ict.evidence.intervals import (
    Interval,
    clipped,
    format_interval,
    paired_difference,
    t_interval,
    welch_difference,
)
from ict.evidence.verdict import Judgement
from ict.files import read_jsonl, relative_path, write_atomic
from ict.report.answer import write_answer_section
from ict.report.document import Document
from ict.report.exploration import write_section as write_exploration
from ict.report.health import write_health_section, write_loss_mode_section
from ict.report.plots import SMOOTHING_TEXT, plot_methods
from ict.report.positions import write_section
from ict.report.problems import derived_margins, problem_values, warm_start_blocks
from ict.report.runs import Run, flat_config, load_run
from ict.report.scope import scope_rows, write_scope_section
from ict.report.selection_overlap import POSITION_BINS, overlap_study, plot_overlap
from ict.report.tuning import write_tuning_section
from ict.report.verdicts import (
    VERDICT_HEADER,
    comparison_keys,
    difference_text,
    endpoints_paragraphs,
    evaluate,
    judgement_json,
    pass_key,
    primary_rows,
    values_of,
    verdict_cells,
)

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
    # the mechanism: how hard each step pushes, how far the weights move, what the loss mode touches
    ("grad_norm", "Gradient norm before clipping", "L2 norm", [("grad_norm", "")]),
    (
        "update_size",
        "Update size: ||theta_after - theta_before|| / ||theta_before|| per step",
        "relative L2 change",
        [("update/param_change_rel", "")],
    ),
    (
        "loss_mode_tokens",
        "Tokens the loss mode changed per step (Clip-Cov: gradient cut; KL-Cov: penalised)",
        "tokens",
        [("loss_mode/changed_tokens", "")],
    ),
    (
        "jaccard",
        "Jaccard of ICT vs 20-Entropy selections (same batch)",
        "Jaccard",
        [("overlap/ict_entropy_jaccard", "")],
    ),
    (
        "regime",
        "Share of each method's picks with p(y) > exp(-H2) (the paper's collapse regime)",
        "share of selected tokens",
        [("paper/collapse_share", "")],
    ),
]


def group_runs(runs: Sequence[Run]) -> dict[str, list[Run]]:
    """Runs by method, in the registry's order (ict.methods.METHODS: baselines, controls, then
    ICT and its variants) then first-seen order; runs sorted by seed."""
    groups: dict[str, list[Run]] = {}
    for run in runs:
        groups.setdefault(run.method, []).append(run)
    from ict.methods import METHODS

    order = [m for m in METHODS if m in groups] + [m for m in groups if m not in METHODS]
    return {m: sorted(groups[m], key=lambda r: (r.seed is None, r.seed or 0)) for m in order}


def last_steps_mean(run: Run, key: str, last: int = LAST_STEPS) -> float | None:
    _, values = run.series(key)
    return float(np.mean(values[-last:])) if values else None


def seed_key(run: Run) -> int | str:
    """The key that pairs a run with the baseline's run of the same seed."""
    return run.seed if run.seed is not None else run.path.name


def final_values(runs: Sequence[Run], key: str) -> dict[int | str, float]:
    """{seed (or run name): final value} over runs that have the key."""
    out = {}
    for run in runs:
        value = last_steps_mean(run, key) if key == "reward/mean" else run.final(key)
        if value is not None and math.isfinite(value):
            out[seed_key(run)] = value
    return out


def unit_values(run: Run, key: str) -> RunUnits | None:
    """Per-unit values behind one run's number: pass@k of each held-out problem (from the
    per-problem counts in final_eval.json) or the training reward of each of the last steps.
    None when the run directory does not hold them (older final_eval.json, other engines)."""
    if key == "reward/mean":
        steps, values = run.series(key)
        if not values:
            return None
        return run_units(values[-LAST_STEPS:], ids=steps[-LAST_STEPS:])
    parsed = pass_key(key)
    if parsed is None:
        return None
    bench, k = parsed
    block = run.final_eval.get("per_problem", {}).get(bench)
    if not isinstance(block, dict) or not block.get("n"):
        return None
    n, c = block["n"], block["correct"]
    if len(n) != len(c) or min(n) < k:
        return None
    return run_units(pass_at_k_per_problem(n, c, k), ids=block.get("ids"))


def value_bounds(key: str, values: Sequence[float]) -> tuple[float, float]:
    """The possible range of a metric: [0, 1] for pass@k and outcome rewards (widened to the data
    if a run logged values outside it, e.g. a shaped reward)."""
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    return min(0.0, lo), max(1.0, hi)


def difference(values: dict, base: dict, confidence: float) -> Interval:
    """Paired t over shared seeds when there are >= 2 of them, else Welch t (fallback when the
    per-unit values are missing)."""
    shared = sorted(set(values) & set(base), key=str)
    if len(shared) >= 2 and len(shared) == min(len(values), len(base)):
        return paired_difference([values[s] for s in shared], [base[s] for s in shared], confidence)
    return welch_difference(list(values.values()), list(base.values()), confidence)


def method_interval(
    units: dict, values: dict, bounds: tuple[float, float], confidence: float,
    strata: dict | None = None,
) -> Interval:  # fmt: skip
    """Hierarchical bootstrap when every run has per-unit values (seeds drawn within the blocks
    of `strata` {seed: block} when given), else a t interval clipped to the metric's range (older
    run directories)."""
    if units and all(u is not None for u in units.values()):
        s = [strata[k] for k in units] if strata and all(k in strata for k in units) else None
        return bootstrap_mean(list(units.values()), confidence, strata=s)
    return clipped(t_interval(list(values.values()), confidence), *bounds)


def difference_interval(
    units: dict, base_units: dict, values: dict, base: dict, bounds, confidence: float,
    strata: dict | None = None,
) -> Interval:  # fmt: skip
    """Bootstrap difference when both methods' runs have per-unit values (stratified by the
    blocks of `strata` {seed: block} when given), else paired t / Welch t clipped to the possible
    range of a difference."""
    every = [*units.values(), *base_units.values()]
    if every and all(u is not None for u in every):
        return bootstrap_difference(
            units, base_units, confidence, strata=_covering(strata, units, base_units)
        )
    width = bounds[1] - bounds[0]
    return clipped(difference(values, base, confidence), -width, width)


def _covering(strata: dict | None, *unit_maps: dict) -> dict | None:
    """`strata` when it names the block of every seed in `unit_maps`, else None (no strata)."""
    if not strata or any(k not in strata for m in unit_maps for k in m):
        return None
    return strata


def stored_interval(run: Run, key: str) -> tuple[float, float] | None:
    """The 95% interval over problems that `ict compare` stored in final_eval.json, if any."""
    ci = run.final_eval.get("bootstrap_95", {}).get(key)
    if (
        isinstance(ci, (list, tuple))
        and len(ci) == 2
        and all(isinstance(x, (int, float)) for x in ci)
    ):
        return float(ci[0]), float(ci[1])
    return None


def per_seed_text(units: dict, values: dict, stored: dict, confidence: float) -> str:
    """'s0 0.610 [0.520, 0.700]; s1 ...': each run with its own interval over its units (or the
    interval stored in its final_eval.json when the per-unit values are missing)."""
    parts = []
    for seed, value in values.items():
        u = units.get(seed)
        if u is not None:
            text = format_interval(bootstrap_mean([u], confidence))
        elif stored.get(seed) is not None and abs(confidence - 0.95) < 1e-9:
            text = f"{value:.3f} [{stored[seed][0]:.3f}, {stored[seed][1]:.3f}]"
        else:
            text = f"{value:.3f} (no per-problem data)"
        parts.append(f"s{seed} {text}" if isinstance(seed, int) else f"{seed} {text}")
    return "; ".join(parts)


@dataclass
class MethodResult:
    """One method's numbers at one report key: `values` {seed: value}; `mean` (interval over
    seeds and units, a description); `per_seed` (text: each seed's own interval) and
    `per_seed_raw` {seed: [mean, low, high]}; `difference` to the baseline (bootstrap or t
    interval, a description; None for the baseline itself)."""

    values: dict
    mean: Interval
    per_seed: str
    per_seed_raw: dict
    difference: Interval | None = None


def metric_results(
    groups: dict[str, list[Run]], key: str, baseline: str, confidence: float,
    strata: dict | None = None,
) -> dict[str, MethodResult]:  # fmt: skip
    """MethodResult of every method with values at `key`, from the run directories; `strata`
    {seed: block} (the warm starts, when several) stratifies the bootstrap's seed draws."""
    values_by = {m: final_values(runs, key) for m, runs in groups.items()}
    units_by = {
        m: {seed_key(r): unit_values(r, key) for r in runs if seed_key(r) in values_by[m]}
        for m, runs in groups.items()
    }
    bounds = value_bounds(key, [v for vs in values_by.values() for v in vs.values()])
    base, base_units = values_by.get(baseline, {}), units_by.get(baseline, {})
    out = {}
    for method in groups:
        values, units = values_by[method], units_by[method]
        if not values:
            continue
        stored = {seed_key(r): stored_interval(r, key) for r in groups[method]}
        diff = None
        if method != baseline and base:
            diff = difference_interval(units, base_units, values, base, bounds, confidence, strata)
        out[method] = MethodResult(
            values,
            method_interval(units, values, bounds, confidence, strata),
            per_seed_text(units, values, stored, confidence),
            {
                str(s): _triple(bootstrap_mean([u], confidence))
                for s, u in units.items()
                if u is not None
            },
            diff,
        )
    return out


def results_table(
    results: dict[str, MethodResult],
    key: str,
    baseline: str,
    confidence: float,
    judgement: Judgement,
) -> tuple[list[str], list[list[str]], dict]:
    """Header, rows and report.json numbers of one key: mean [CI], per-seed [CI over units],
    difference to the baseline [CI] (descriptions), then the seed-level test and verdict."""
    pct = int(round(confidence * 100))
    units_name = f"the last {LAST_STEPS} steps" if key == "reward/mean" else "problems"
    header = [
        "method",
        "seeds",
        f"mean [{pct}% CI]",
        f"per seed [{pct}% CI over {units_name}]",
        f"difference to {baseline} [{pct}% CI]",
        *VERDICT_HEADER,
    ]
    rows, raw = [], {}
    for method, r in results.items():
        entry = {
            "values": r.values,
            "mean": r.mean.mean,
            "low": r.mean.low,
            "high": r.mean.high,
            "n": r.mean.n,
            "method": r.mean.method,
            "per_seed": r.per_seed_raw,
        }
        v = judgement.get(method, baseline, key)
        if method == baseline:
            diff_text, cells = "(baseline)", verdict_cells(None)
        elif baseline not in results:
            diff_text, cells = "n/a (no baseline runs)", verdict_cells(None)
        else:
            diff_text, cells = difference_text(r.difference, v), verdict_cells(v)
            d = r.difference
            entry["difference"] = {
                **({"mean": d.mean, "low": d.low, "high": d.high, "n": d.n, "method": d.method} if d else {}),
                **(v.as_dict() if v else {}),
            }  # fmt: skip
        rows.append(
            [method, str(r.mean.n), f"{format_interval(r.mean)} ({r.mean.method})", r.per_seed, diff_text, *cells]
        )  # fmt: skip
        raw[method] = entry
    return header, rows, raw


def _triple(iv: Interval) -> list[float]:
    return [iv.mean, iv.low, iv.high]


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


INTERVAL_METHOD = (
    "hierarchical percentile bootstrap over seeds and problems (paired with the baseline), a "
    "description; clipped t when per-problem results are missing. Verdicts: seed-level paired t "
    "and, with per-problem results, the over-problems t, under the declared endpoints "
    "(report.json 'verdicts')"
)


def interval_method_text(baseline: str, pct: int) -> list[str]:
    """The report's statement of how every interval is computed and what it is for."""
    return [
        f"**Intervals** ({pct}%, two-sided) describe; they do not decide. **Hierarchical "
        "bootstrap**: each resample draws the seeds with replacement and, within them, the "
        "held-out problems with replacement (the same problems for every seed and method, as every "
        "cell is evaluated on the same problems); the interval is the percentile interval of the "
        "resampled mean of per-problem pass@k (unbiased estimator). Differences to "
        f"**{baseline}** use the same resamples for both methods (**paired** seeds and problems). "
        "It stays inside the possible range ([0, 1], differences [-1, 1]), but with few seeds it "
        "is too narrow: its coverage, measured on simulated null data (docs/compare.md), is far "
        "below the nominal level at 2-5 seeds. With one seed it covers evaluation noise over "
        "problems only.",
        "**Per seed**: each run's own percentile bootstrap interval over its problems. The training "
        f"reward (mean of the last {LAST_STEPS} logged steps) is treated the same way with those "
        "steps as the units. Runs without per-problem results (older final_eval.json, other "
        "engines) fall back to a Student-t / Welch interval clipped to the possible range, and "
        "the table says so. **Verdicts** come from the seed-level tests and, where the runs hold "
        "per-problem results, the tests over problems, under the declared endpoints below, never "
        "from an interval.",
    ]


def evaluation_settings_table(runs: Sequence[Run]) -> tuple[list[str], list[list[str]]] | None:
    """(header, rows) of final_eval.json's settings: one `setting | value` row each when every
    run shares them, else one row per run; None when no run stored settings."""
    stored = [(r, r.final_eval.get("settings")) for r in runs]
    stored = [(r, st) for r, st in stored if isinstance(st, dict) and st]
    if not stored:
        return None
    distinct = {json.dumps(st, sort_keys=True, default=str) for _, st in stored}
    if len(distinct) == 1:
        return ["setting", "value"], [
            [k.replace("_", " "), _setting_text(v)] for k, v in stored[0][1].items()
        ]
    keys = sorted({k for _, st in stored for k in st})
    rows = [[r.path.name, *(_setting_text(st.get(k, "")) for k in keys)] for r, st in stored]
    return ["run", *(k.replace("_", " ") for k in keys)], rows


def _setting_text(value) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def build_report(
    run_dirs: Sequence[str | Path],
    out_dir: str | Path,
    *,
    title: str = "ict compare",
    baseline: str = "grpo",
    confidence: float = 0.95,
    notes: Sequence[str] = (),
    endpoints: Endpoints | None = None,
    tuning: dict | None = None,
    lr_choice: str | None = None,
) -> Path:
    """Write OUT_DIR/report.md, report.html (self-contained), report.json and plots/*.png.

    The sections, in order, figures first: the scope (initialisations, learning rates and what
    chose them: ict.report.scope), the declared endpoints (before any number), the answer
    (the declared question and a forest plot of the verdicts: ict.report.answer), exploration
    (pass@k against k, pass@1 / pass@n / H / H2 against step: ict.report.exploration), final
    results with their verdicts, the tuning record, the runs and how intervals are made, entropy
    health, loss-mode token rates, curves, the ICT vs 20-Entropy overlap, where picks fall,
    settings.
    `endpoints`: the declared primary comparisons, alpha and margin (None: none declared, every
    comparison exploratory); `tuning`: the grid's tuning record (OUT/tuning/tuning.json), shown
    after the endpoints; `lr_choice`: how the learning rate was chosen, in words, when no tuning
    record says it (default: fixed before the runs). Returns the path of report.md. Raises
    DataError when no run directory can be read."""
    if not run_dirs:
        raise DataError("no run directories given; pass --runs DIR [DIR ...] or run a grid first")
    endpoints = endpoints if endpoints is not None else declare()
    runs = [load_run(d) for d in run_dirs]
    groups = group_runs(runs)
    out = Path(out_dir)
    plots = out / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    doc = Document(title)
    keys = [*final_eval_keys(runs), "reward/mean"]
    blocks = warm_start_blocks(runs, seed_key)
    results = {key: metric_results(groups, key, baseline, confidence, blocks) for key in keys}
    results = {key: r for key, r in results.items() if r}
    values = values_of(results)  # {key: {method: {seed: value}}}: what every verdict tests
    units = {
        key: u
        for key in values
        if (u := problem_values(groups, key, unit_values, seed_key)) is not None
    }
    judgement = evaluate(
        values, baseline, endpoints,
        units=units,
        blocks=blocks,
        margins=derived_margins(
            comparison_keys(values, baseline, endpoints), endpoints, baseline,
            groups.get(baseline, []),
        ),
    )  # fmt: skip
    raw: dict = {
        "confidence": confidence,
        "interval": INTERVAL_METHOD,
        "baseline": baseline,
        "endpoints": endpoints.as_dict(),
        "metrics": {},
    }
    # the scope first: what every verdict is about (initialisations, learning rates, their choice)
    raw["scope"] = write_scope_section(doc, scope_rows(runs, tuning=tuning, lr_choice=lr_choice))
    # figures first: the declaration, the answer (forest plot), pass@k against k and the curves
    # against step; then the tables behind them
    write_endpoints_section(doc, judgement)  # first: declared before any number
    write_answer_section(doc, judgement, values, confidence, baseline, plots)
    raw["exploration"] = write_exploration(
        doc, runs, groups, baseline, confidence, plots, judgement, blocks
    )
    _results_section(doc, runs, results, baseline, confidence, judgement, raw)
    raw["verdicts"] = judgement_json(judgement)
    raw["blocks"] = blocks  # a re-render blocks the seeds alike
    if write_tuning_section(doc, tuning, plots) is not None:
        raw["tuning"] = tuning
    doc.heading("Runs")
    _runs_section(doc, runs, groups, notes, baseline, confidence, blocks)
    raw["health"] = write_health_section(doc, runs, groups)
    loss_modes = write_loss_mode_section(doc, groups)
    if loss_modes is not None:
        raw["loss_modes"] = loss_modes
    logged = sorted(
        {k for r in runs for row in r.metrics for k in row if pass_key(k)}, key=pass_key
    )
    _curves_section(doc, groups, logged, plots)  # the periodic evaluation's keys
    overlap = _overlap_section(doc, runs, plots)
    if overlap is not None:
        raw["overlap"] = overlap
    evidence = write_section(doc, runs)  # where each selector's picks fall (report.positions)
    if evidence is not None:
        raw["positions"] = evidence
    _settings_section(doc, runs, out)

    md_path = out / "report.md"
    write_atomic(md_path, doc.markdown(out))
    write_atomic(out / "report.html", doc.html())
    write_atomic(out / "report.json", json.dumps(_json_safe(raw), indent=2))
    return md_path


def _runs_section(doc, runs, groups, notes, baseline, confidence, blocks=None) -> None:
    """The runs by method and seed, the caller's notes, and how the intervals are made."""
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
    for paragraph in interval_method_text(baseline, int(round(confidence * 100))):
        doc.para(paragraph)
    if blocks:
        doc.para(warm_start_text(blocks))


def warm_start_text(blocks: dict) -> str:
    """How a blocked design's bootstrap intervals treat its warm starts ({seed: warm start})."""
    n = len(set(blocks.values()))
    return (
        f"**Warm starts**: the seeds come from {n} warm starts. The bootstrap draws the seeds "
        "within each warm start (stratified: every resample keeps each warm start's seeds and "
        f"their number), so its intervals are about these {n} warm starts: the difference "
        "between warm starts is not resampled, and they do not say how the methods compare "
        "from other initialisations (the verdict rule above says which unit its test uses)."
    )


def write_endpoints_section(doc, judgement: Judgement) -> None:
    """The "Declared endpoints" section: what decides a verdict, before any result."""
    doc.heading("Declared endpoints")
    for paragraph in endpoints_paragraphs(judgement.endpoints, judgement):
        doc.para(paragraph)


def write_results(
    doc,
    results: dict[str, dict[str, MethodResult]],
    baseline: str,
    confidence: float,
    judgement: Judgement,
) -> dict:
    """The primary comparisons' table, then one table per key (held-out pass@k, the training
    reward) with its verdicts; returns report.json's "metrics"."""
    values = values_of(results)
    if judgement.endpoints.primary:
        doc.heading("Primary comparisons", 3)
        doc.table(*primary_rows(judgement, values, confidence))
    metrics = {}
    for key, by_method in results.items():
        header, rows, numbers = results_table(by_method, key, baseline, confidence, judgement)
        label = (
            f"held-out {key[5:]}"
            if key.startswith("eval/")
            else f"training reward (mean of the last {LAST_STEPS} steps)"
        )
        doc.heading(label, 3)
        doc.table(header, rows)
        metrics[key] = numbers
    return metrics


def _results_section(doc, runs, results, baseline, confidence, judgement, raw) -> None:
    """Held-out pass@k tables (and the training reward); fills raw["metrics"]."""
    doc.heading("Final results")
    eval_settings = evaluation_settings_table(runs)
    if eval_settings is not None:
        doc.para("Evaluation settings (the same held-out problems and samples for every run):")
        doc.table(*eval_settings)
    splits = sorted(
        {str(r.final_eval.get("settings", {}).get("split", HELDOUT_SPLIT)) for r in runs}
    )
    if any(split != HELDOUT_SPLIT for split in splits):
        doc.para(
            f"**Not the held-out split**: these final results were evaluated on the "
            f"{' / '.join(f'`{s}`' for s in splits)} split, whose problems may have chosen "
            f"settings (a tuning stage's, a pilot's); a statement about held-out problems needs "
            f"the `{HELDOUT_SPLIT}` split (`ict eval --split {HELDOUT_SPLIT}` of each run)."
        )
    if not any(key.startswith("eval/") for key in results):
        doc.para(
            "No held-out evaluation (eval/<benchmark>/pass@k) in these runs; only training metrics below."
        )
    raw["metrics"] = write_results(doc, results, baseline, confidence, judgement)


def final_eval_keys(runs: Sequence[Run]) -> list[str]:
    """The eval/<benchmark>/pass@<k> keys of the final results: those of final_eval.json when
    any run has one (the periodic evaluation's keys in metrics.jsonl then belong to the
    Exploration section and the curves), else those logged in metrics.jsonl."""
    final = {k for r in runs for k in r.final_eval.get("metrics", {}) if pass_key(k)}
    if final:
        return sorted(final, key=pass_key)  # by benchmark, then k as a number (1, 2, 4, ... 64)
    return sorted({k for r in runs for k in r.keys() if pass_key(k)}, key=pass_key)


def _curves_section(doc, groups, eval_keys, plots) -> None:
    """One plot per training curve (and per held-out pass@k key) with every method."""
    doc.heading("Curves")
    doc.para(
        f"Faint points: mean across seeds at each logged step; line: its {SMOOTHING_TEXT}; "
        "shaded band: min to max across seeds (not a confidence interval)."
    )
    curves = list(CURVES)
    curves[1:1] = [  # after the reward, in order of k
        (f"eval_{key[5:].replace('/', '_').replace('@', 'at')}", f"Held-out {key[5:]}", "pass@k",
         [(key, "")])
        for key in eval_keys
    ]  # fmt: skip
    for stem, ctitle, ylabel, keys in curves:
        path = plot_methods(groups, keys, plots / f"{stem}.png", title=ctitle, ylabel=ylabel)
        if path is not None:
            doc.image(path, ctitle)


def _overlap_section(doc, runs, plots) -> dict | None:
    """Which tokens ICT and 20-Entropy pick (report.selection_overlap); its numbers or None."""
    doc.heading("Which tokens are selected: ICT vs 20-Entropy")
    records = []
    for r in runs:
        if r.samples_path.exists():
            records += read_jsonl(r.samples_path)
    study = overlap_study(records)
    if not study.steps:
        doc.para(
            "No samples.jsonl with both ICT and 20-Entropy selections in these runs; no overlap study."
        )
        return None
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
    doc.table(
        ["rank", "ICT token", "picked / seen", "20-Entropy token", "picked / seen"],
        _top_token_rows(study.top["ict"], study.top["entropy"]),
    )
    edges = [f"{i / POSITION_BINS:.1f}-{(i + 1) / POSITION_BINS:.1f}" for i in range(POSITION_BINS)]
    doc.para("Share of each selector's picks by relative position t / L in the response:")
    doc.table(
        ["selector", *edges],
        [[name, *(f"{x:.2f}" for x in frac)] for name, frac in study.position.items()],
    )
    path = plot_overlap(study, plots / "overlap.png")
    if path is not None:
        doc.image(path, "Selection overlap per step (left) and position of picks (right)")
    return {
        "mean_jaccard": study.mean_jaccard,
        "mean_chance": study.mean_chance,
        "responses": study.responses,
        "tokens": study.tokens,
    }


def _top_token_rows(ta, tb) -> list[list[str]]:
    """Side-by-side rows of the two selectors' most picked tokens (token, picked, seen)."""
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
    return rows


def _settings_section(doc, runs, out: Path) -> None:
    """The settings that differ between runs, those they share, and the run directories."""
    doc.heading("Settings")
    common, header, rows = settings_tables(runs)
    if len(header) > 1:
        doc.para("Settings that differ between runs:")
        doc.table(header, rows)
    if common:
        doc.para("Settings shared by every run:")
        doc.table(["setting", "value"], [[k, _setting_text(v)] for k, v in common.items()])
    grid = out.parent  # the report folder's parent: the grid directory of `ict compare`
    doc.para(
        "Run directories (relative to the grid directory, the report folder's parent): "
        + ", ".join(f"`{relative_path(r.path, grid)}`" for r in runs)
    )


def _visible(token: str) -> str:
    return token.replace("\n", "\\n").replace("\t", "\\t").replace(" ", "␣") or "(empty)"
