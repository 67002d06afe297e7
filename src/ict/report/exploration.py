"""The compare report's Exploration section: pass@k against k, and pass@1 / pass@n / H / H2
against the training step (does a method buy pass@1 with exploration, i.e. with pass@n?).

Sources in each run directory (all optional; a part without its data is left out, and the report
says so):
- final_eval.json `per_problem` (the grid's final evaluation): pass@k of each problem for
  k = 1, 2, 4, ... and n (`ict.eval.metrics.curve_ks`), mean over seeds with the hierarchical
  bootstrap of ict.evidence.hierarchical (seeds, then the shared problems), the difference to the
  baseline paired by seed and problem (a description); the verdict at each k is the report's
  seed-level verdict for that key (ict.report.verdicts), or an exploratory one for a k the final
  results do not list;
- the grid's start point (OUT/start_eval.json, or OUT/warm_start.json's "eval", for runs in
  OUT/runs/<cell>): the before-RL reference line, with a bootstrap over problems;
- eval_steps/step_<step>.json (the trainer's periodic evaluation, ict.train.evaluation),
  heldout_before.json (step 0) and heldout_after.json (its step), when their settings agree:
  pass@1 and pass@n per evaluated step;
- metrics.jsonl: `valid/entropy` (H) and `valid/renyi2` (H2) in nats, averaged over a window of
  ENTROPY_WINDOW logged steps ending at the evaluated step (the first ones for step 0: step 1's
  statistics are those of the start policy's own samples), bootstrapped over seeds and those steps.

Collapse criterion: ict.evidence.health's, on each method's mean over seeds of the window means
(and how many of its seeds meet it on their own).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ict.eval.metrics import curve_ks, pass_at_k_per_problem
from ict.evidence.endpoints import Endpoints
from ict.evidence.health import HealthCriterion
from ict.evidence.hierarchical import RunUnits, bootstrap_difference, bootstrap_mean, run_units
from ict.evidence.intervals import Interval, format_interval
from ict.evidence.seed_tests import seed_test
from ict.evidence.verdict import Judgement, Verdict, judge
from ict.files import read_json
from ict.report.runs import Run
from ict.report.verdicts import difference_text, verdict_cells

ENTROPY_WINDOW = 5  # logged steps averaged for H / H2 at an evaluated step
HEALTH = HealthCriterion()  # the collapse criterion of the method-level sentence
ENTROPY_KEYS = {"entropy": "valid/entropy", "renyi2": "valid/renyi2"}
STEP_FILES = (
    "eval_steps"  # ict.train.evaluation.STEP_EVAL_DIR (not imported: the report needs no torch)
)


# ---- per-problem results -----------------------------------------------------------------------
def units_at_k(block: dict, k: int) -> RunUnits | None:
    """pass@k of each problem of a per-problem block {"ids", "n", "correct"} ([P] each) as
    RunUnits; None when the block is empty or some problem has fewer than k samples."""
    n, c = block.get("n") or [], block.get("correct") or []
    if not n or len(n) != len(c) or min(n) < k:
        return None
    return run_units(pass_at_k_per_problem(n, c, k), ids=block.get("ids"))


def start_reference(runs: Sequence[Run]) -> dict | None:
    """The grid's start-point evaluation (final_eval.json's schema) when every run is a cell of
    one grid (OUT/runs/<cell>): OUT/start_eval.json, else OUT/warm_start.json's "eval"."""
    grids = {r.path.parent.parent for r in runs if r.path.parent.name == "runs"}
    if len(grids) != 1 or any(r.path.parent.name != "runs" for r in runs):
        return None
    grid = grids.pop()
    for name, part in (("start_eval.json", None), ("warm_start.json", "eval")):
        data = read_json(grid / name)
        data = data.get(part) if part and isinstance(data, dict) else data
        if isinstance(data, dict) and isinstance(data.get("per_problem"), dict):
            return data
    return None


# ---- pass@k against k (the final evaluation) -----------------------------------------------------
@dataclass
class KCurves:
    """One benchmark's pass@k against k: `ks` [K]; per method {k: Interval} (mean over seeds) and
    its difference to the baseline (descriptions); `values`: per method {k: {seed: pass@k}}
    (the seed-level tests' input); `reference`: {k: Interval} of the start model (or None)."""

    benchmark: str
    ks: list[int]
    methods: dict[str, dict[int, Interval]]
    differences: dict[str, dict[int, Interval]]
    reference: dict[int, Interval] | None
    values: dict[str, dict[int, dict]] = field(default_factory=dict)
    strata: dict | None = None  # {seed: warm start} when several: the bootstrap's and tests' blocks

    def key(self, k: int) -> str:
        """The report key of pass@k on this benchmark."""
        return f"eval/{self.benchmark}/pass@{k}"


def final_benchmarks(runs: Sequence[Run]) -> list[str]:
    """Benchmarks with per-problem counts in the final_eval.json of every run that has one."""
    blocks = [r.final_eval.get("per_problem") for r in runs if r.final_eval.get("per_problem")]
    if not blocks:
        return []
    return sorted(set.intersection(*(set(b) for b in blocks)))


def k_curves(
    groups: dict[str, list[Run]],
    benchmark: str,
    baseline: str,
    confidence: float,
    reference: dict | None = None,
    strata: dict | None = None,
) -> KCurves | None:
    """pass@k for k in curve_ks(n) (n: the fewest samples of any problem) per method, with
    hierarchical bootstrap intervals and paired differences to `baseline` (seeds drawn within the
    blocks of `strata` {seed: block} when it names every seed); None without data."""
    blocks = {
        m: {r.seed if r.seed is not None else r.path.name: _block(r, benchmark) for r in runs}
        for m, runs in groups.items()
    }
    blocks = {m: {s: b for s, b in bs.items() if b} for m, bs in blocks.items()}
    blocks = {m: bs for m, bs in blocks.items() if bs}
    ref_block = (reference or {}).get("per_problem", {}).get(benchmark)
    sizes = [min(b["n"]) for bs in blocks.values() for b in bs.values()]
    if not sizes:
        return None
    ks = curve_ks(min(sizes))
    if strata and any(s not in strata for bs in blocks.values() for s in bs):
        strata = None
    methods, differences, values = {}, {}, {}
    for method, bs in blocks.items():
        order = [strata[s] for s in bs] if strata else None
        methods[method] = {k: bootstrap_mean(_units(bs, k), confidence, strata=order) for k in ks}
        values[method] = {
            k: {s: u.mean for s, u in zip(bs, _units(bs, k), strict=True)} for k in ks
        }
        if method != baseline and baseline in blocks:
            differences[method] = {
                k: bootstrap_difference(
                    dict(zip(bs, _units(bs, k), strict=True)),
                    dict(zip(blocks[baseline], _units(blocks[baseline], k), strict=True)),
                    confidence,
                    strata=strata,
                )
                for k in ks
            }
    ref = None
    if ref_block and ref_block.get("n") and min(ref_block["n"]) >= ks[-1]:
        ref = {k: bootstrap_mean([units_at_k(ref_block, k)], confidence) for k in ks}
    return KCurves(benchmark, ks, methods, differences, ref, values, strata or None)


def _block(run: Run, benchmark: str) -> dict | None:
    block = run.final_eval.get("per_problem", {}).get(benchmark)
    return block if isinstance(block, dict) and block.get("n") else None


def _units(blocks: dict, k: int) -> list[RunUnits]:
    return [units_at_k(b, k) for b in blocks.values()]


# ---- curves against the training step ------------------------------------------------------------
def step_results(run: Run) -> dict[int, dict]:
    """{step: evaluation result} of one run: eval_steps/step_*.json, heldout_before.json as step
    0 and heldout_after.json at its step, keeping only those with the settings of the first found
    (same problems, samples and sampling seed) and per-problem counts of one task, which becomes
    the result's "per_problem" ({"ids", "n", "correct"})."""
    found: list[tuple[int, dict]] = []
    for path in sorted((run.path / STEP_FILES).glob("step_*.json")):
        match = re.fullmatch(r"step_(\d+)\.json", path.name)
        data = read_json(path)
        if match and isinstance(data, dict):
            found.append((int(match.group(1)), data))
    for name, default_step in (("heldout_before.json", 0), ("heldout_after.json", None)):
        data = read_json(run.path / name)
        if isinstance(data, dict):
            step = default_step if default_step is not None else data.get("step")
            if isinstance(step, int):
                found.append((step, data))
    out: dict[int, dict] = {}
    settings = None
    for step, data in found:
        blocks = data.get("per_problem")
        if not isinstance(blocks, dict) or len(blocks) != 1 or step in out:
            continue
        key = _settings_key(data)
        settings = key if settings is None else settings
        if key == settings:  # the run's one task: its per-problem counts
            out[step] = {**data, "per_problem": next(iter(blocks.values()))}
    return dict(sorted(out.items()))


def _settings_key(result: dict) -> str:
    """The settings that decide the samples (all but the model's label), as comparable text."""
    settings = {k: v for k, v in (result.get("settings") or {}).items() if k != "model"}
    return json.dumps(settings, sort_keys=True, default=str)


def window_units(run: Run, key: str, step: int, width: int = ENTROPY_WINDOW) -> RunUnits | None:
    """The logged values of `key` at the `width` logged steps up to `step` (the first `width`
    when none is <= step, e.g. step 0) as RunUnits with the steps as ids; None if never logged."""
    steps, values = run.series(key)
    if not values:
        return None
    upto = [i for i, s in enumerate(steps) if s <= step]
    index = upto[-width:] if upto else list(range(min(width, len(values))))
    return run_units([values[i] for i in index], ids=[steps[i] for i in index])


@dataclass
class StepCurves:
    """One method's exploration numbers at the steps every one of its runs evaluated: `steps` [S];
    `values[name]` [S] Intervals (mean over seeds) for "pass@1", "pass@n", "entropy", "renyi2";
    `n`: samples per problem (the k of pass@n); `units[name][seed]` [S] RunUnits or None."""

    steps: list[int]
    n: int | None
    values: dict[str, list[Interval]]
    units: dict[str, dict]


def step_curves(runs: Sequence[Run], confidence: float) -> StepCurves | None:
    """StepCurves of one method's runs; None when no run has an evaluated step or a logged H."""
    results = {_seed(r): step_results(r) for r in runs}
    shared = set.intersection(*(set(v) for v in results.values())) if results else set()
    sizes = [min(res[s]["per_problem"]["n"]) for res in results.values() for s in shared]
    if not sizes:
        return None
    n, steps = min(sizes), sorted(shared)
    units: dict[str, dict] = {name: {} for name in ("pass@1", "pass@n", *ENTROPY_KEYS)}
    for run in runs:
        seed, res = _seed(run), results[_seed(run)]
        for name, k in (("pass@1", 1), ("pass@n", n)):
            units[name][seed] = [units_at_k(res[s]["per_problem"], k) for s in steps]
        for name, key in ENTROPY_KEYS.items():
            units[name][seed] = [window_units(run, key, s) for s in steps]
    values = {name: _per_step(by_seed, len(steps), confidence) for name, by_seed in units.items()}
    return StepCurves(steps, n, values, units)


def _seed(run: Run):
    return run.seed if run.seed is not None else run.path.name


def _per_step(by_seed: dict, count: int, confidence: float) -> list[Interval]:
    """[count] Intervals: at each step, the bootstrap mean over the seeds that have units there."""
    out = []
    for i in range(count):
        present = [u[i] for u in by_seed.values() if u[i] is not None]
        out.append(bootstrap_mean(present, confidence))
    return out


@dataclass
class Change:
    """One method's first-to-last change: pass@1 and pass@n differences (paired over seeds and
    problems: descriptions) between `first` and `last` evaluated step with their seed-level
    verdicts (exploratory), and the entropy over the first and last health windows."""

    first: int | None
    last: int | None
    pass1: Interval | None
    passn: Interval | None
    entropy_start: Interval
    entropy_end: Interval
    seeds_below: int
    seeds: int
    window: int = HEALTH.window
    pass1_verdict: Verdict | None = None
    passn_verdict: Verdict | None = None

    @property
    def ratio(self) -> float:
        """Mean end entropy over mean start entropy (NaN when undefined)."""
        if not (self.entropy_start.mean > 0 and math.isfinite(self.entropy_end.mean)):
            return math.nan
        return self.entropy_end.mean / self.entropy_start.mean

    @property
    def collapsed(self) -> bool:
        return math.isfinite(self.ratio) and self.ratio < HEALTH.collapse_fraction


def change(
    runs: Sequence[Run], curves: StepCurves | None, confidence: float, endpoints: Endpoints
) -> Change:
    """The method's Change from its StepCurves (first vs last evaluated step) and its runs' H;
    the pass@1 / pass@n changes get exploratory seed-level verdicts at the report's alpha."""
    pass1 = passn = None
    first = last = None
    verdicts: dict[str, Verdict | None] = {"pass@1": None, "pass@n": None}
    if curves is not None and len(curves.steps) >= 2:
        first, last = curves.steps[0], curves.steps[-1]
        pass1, passn = (
            _first_last(curves.units[name], confidence) for name in ("pass@1", "pass@n")
        )
        verdicts = {
            name: _first_last_verdict(curves.units[name], name, endpoints)
            for name in ("pass@1", "pass@n")
        }
    window = min(
        HEALTH.window,
        min((len(r.series(ENTROPY_KEYS["entropy"])[1]) for r in runs), default=0) // 2,
    )
    start = [u for u in (_entropy_window(r, window, first=True) for r in runs) if u is not None]
    end = [u for u in (_entropy_window(r, window, first=False) for r in runs) if u is not None]
    below = sum(
        e.mean < HEALTH.collapse_fraction * s.mean for s, e in zip(start, end, strict=False)
    )
    return Change(
        first,
        last,
        pass1,
        passn,
        bootstrap_mean(start, confidence),
        bootstrap_mean(end, confidence),
        int(below),
        len(start),
        window,
        verdicts["pass@1"],
        verdicts["pass@n"],
    )


def _first_last(by_seed: dict, confidence: float) -> Interval | None:
    """last - first, paired over the seeds that have both (and over the shared problems)."""
    last = {s: u[-1] for s, u in by_seed.items() if u[0] is not None and u[-1] is not None}
    first = {s: u[0] for s, u in by_seed.items() if s in last}
    return bootstrap_difference(last, first, confidence) if last else None


def _first_last_verdict(by_seed: dict, name: str, endpoints: Endpoints) -> Verdict | None:
    """The exploratory seed-level verdict on last - first (one number per seed and step)."""
    last = {s: u[-1].mean for s, u in by_seed.items() if u[0] is not None and u[-1] is not None}
    if not last:
        return None
    first = {s: by_seed[s][0].mean for s in last}
    key = ("last step", "first step", name)
    exploratory = Endpoints(alpha=endpoints.alpha, margin=endpoints.margin)
    return judge({key: seed_test(last, first)}, exploratory).verdicts[key]


def _entropy_window(run: Run, window: int, *, first: bool) -> RunUnits | None:
    """valid/entropy over the first (or last) `window` logged steps."""
    steps, values = run.series(ENTROPY_KEYS["entropy"])
    if not values or window < 1:
        return None
    part = slice(0, window) if first else slice(-window, None)
    return run_units(values[part], ids=steps[part])


# ---- text ------------------------------------------------------------------------------------------
def change_sentence(method: str, c: Change, n: int | None) -> str:
    """'**grpo** (3 seeds): pass@1 from step 0 to 300 +0.120 [+0.080, +0.160] (p 0.012:
    higher, exploratory); pass@64 ...; mean entropy 0.812 -> 0.102 nats (last-10 mean H 0.13x
    first-10: collapse < 0.2x; 3 of 3 seeds below).'"""
    parts = [f"**{method}** ({c.seeds} seed{'s' * (c.seeds != 1)})"]
    if c.pass1 is not None:
        parts.append(
            f"pass@1 from step {c.first} to {c.last} {_diff_text(c.pass1, c.pass1_verdict)}; "
            f"pass@{n} {_diff_text(c.passn, c.passn_verdict)}"
        )
    else:
        parts.append("no two evaluated steps with per-problem results")
    if math.isfinite(c.ratio):
        word = "collapse" if c.collapsed else "no collapse"
        parts.append(
            f"mean entropy {c.entropy_start.mean:.3f} -> {c.entropy_end.mean:.3f} nats "
            f"(last-{c.window} mean H {c.ratio:.2f}x first-{c.window}: {word}, criterion "
            f"< {HEALTH.collapse_fraction:g}x; {c.seeds_below} of {c.seeds} seeds below)"
        )
    return parts[0] + ": " + "; ".join(parts[1:]) + "."


def _diff_text(iv: Interval | None, v: Verdict | None) -> str:
    """'+0.120 [+0.080, +0.160]; p 0.012; 0.031; MDE 0.090; higher (exploratory)': the interval
    (a description), the seed-level p (paired t; sign flip), Holm's p for a primary comparison,
    the MDE and the verdict; 'identical on every seed; equivalent (exploratory)'."""
    if iv is None:
        return "n/a"
    text = difference_text(iv, v).replace(f" ({iv.method})", "")
    if v is None:
        return f"{text}; no seed-level test"
    if v.test.identical:
        return f"{text}; {v.label}"
    p, holm, mde, word = verdict_cells(v)
    holm = f" (Holm {holm})" if v.primary else ""
    return f"{text}; p {p}{holm}; MDE {mde}; {word}"


def _cell(iv: Interval | None) -> str:
    return format_interval(iv) if iv is not None and iv.n else "n/a"


def _triple(iv: Interval | None) -> dict | None:
    if iv is None or not iv.n:
        return None
    return {"mean": iv.mean, "low": iv.low, "high": iv.high, "n": iv.n, "method": iv.method}


def _stem(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "benchmark"


# ---- the report section ------------------------------------------------------------------------------
EXPLORATION_TEXT = (
    "Does a method raise pass@1 at the cost of pass@k for large k (narrower exploration)? "
    "Intervals ({pct}%, descriptions): hierarchical bootstrap over seeds and the shared held-out "
    "problems (pass@k: the unbiased estimator per problem), differences paired by seed and "
    "problem. Verdicts: the seed-level tests of the final results at the same key (primary where "
    "declared), exploratory elsewhere. Entropies are in nats."
)


def write_section(
    doc, runs, groups, baseline: str, confidence: float, plots: Path, judgement: Judgement,
    blocks: dict | None = None,
) -> dict:  # fmt: skip
    """Add the "Exploration" section to `doc` (ict.report.document.Document); plots into `plots`.
    `judgement`: the report's verdicts (ict.report.verdicts.evaluate); `blocks` {seed: warm
    start} when the runs come from several (stratified bootstraps, blocked tests). Returns its numbers for
    report.json: {"pass_at_k": {bench: ...}, "steps": {method: ...}, "change": {method: ...}}."""
    pct = int(round(confidence * 100))
    doc.heading("Exploration")
    doc.para(EXPLORATION_TEXT.format(pct=pct))
    raw: dict = {"pass_at_k": {}, "steps": {}, "change": {}}
    reference = start_reference(runs)
    for bench in final_benchmarks(runs):
        curves = k_curves(groups, bench, baseline, confidence, reference, blocks)
        if curves is not None:
            verdicts = k_verdicts(curves, baseline, judgement)
            raw["pass_at_k"][bench] = _k_section(doc, curves, verdicts, baseline, pct, plots)
    if not raw["pass_at_k"]:
        doc.para("No final evaluation with per-problem results (final_eval.json): no pass@k curve.")
    _steps_section(doc, groups, confidence, plots, raw, judgement.endpoints)
    return raw


def k_verdicts(
    curves: KCurves, baseline: str, judgement: Judgement
) -> dict[str, dict[int, Verdict]]:
    """{method: {k: Verdict}} of each difference to the baseline: the report's verdict at the same
    key, else an exploratory one from the per-seed pass@k (a k the final results do not list)."""
    out: dict[str, dict[int, Verdict]] = {}
    extra = Endpoints(alpha=judgement.endpoints.alpha, margin=judgement.endpoints.margin)
    for method in curves.differences:
        out[method] = {}
        for k in curves.ks:
            key = (method, baseline, curves.key(k))
            v = judgement.get(*key)
            if v is None:
                test = seed_test(
                    curves.values[method][k], curves.values[baseline][k], curves.strata,
                    judgement.endpoints.unit,
                )  # fmt: skip
                v = judge({key: test}, extra).verdicts[key]
            out[method][k] = v
    return out


def difference_table(differences: dict, verdicts: dict, ks) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the differences to the baseline at each k, each with its verdict."""
    rows = [
        [str(k), *(_diff_text(d[k], verdicts[m][k]) for m, d in differences.items())] for k in ks
    ]
    return ["k", *differences], rows


def _k_section(doc, curves: KCurves, verdicts: dict, baseline: str, pct: int, plots: Path) -> dict:
    """The pass@k-against-k tables and plots of one benchmark; returns their numbers."""
    doc.heading(f"pass@k against k: {curves.benchmark}", 3)
    ref = curves.reference
    header = ["k", *(["before RL"] if ref else []), *curves.methods]
    rows = [
        [str(k), *([_cell(ref[k])] if ref else []), *(_cell(v[k]) for v in curves.methods.values())]
        for k in curves.ks
    ]
    doc.para(
        f"Final held-out pass@k, mean over seeds [{pct}% CI]"
        + (" and the start model before RL [bootstrap over problems]" if ref else "")
        + ":"
    )
    doc.table(header, rows)
    band = {m: _k_curve(curves.ks, v) for m, v in curves.methods.items()}
    path = plots_k(band, curves, plots, baseline)
    for image, caption in path:
        doc.image(image, caption)
    if curves.differences:
        doc.para(DIFFERENCE_PARA.format(baseline=baseline, pct=pct))
        doc.table(*difference_table(curves.differences, verdicts, curves.ks))
    return {
        "ks": curves.ks,
        "methods": {
            m: {str(k): _triple(iv) for k, iv in v.items()} for m, v in curves.methods.items()
        },
        "reference": {str(k): _triple(iv) for k, iv in ref.items()} if ref else None,
        "values": {
            m: {str(k): {str(s): x for s, x in by_seed.items()} for k, by_seed in v.items()}
            for m, v in curves.values.items()
        },
        "difference": {
            m: {str(k): (_triple(iv) or {}) | verdicts[m][k].as_dict() for k, iv in v.items()}
            for m, v in curves.differences.items()
        },
    }


DIFFERENCE_PARA = (
    "Difference to **{baseline}** at each k [{pct}% CI, paired; a description] with the "
    "seed-level p (paired t; sign flip), the MDE at 80% power and the verdict:"
)


def _k_curve(ks, by_k: dict[int, Interval]):
    """(ks, mean, low, high) lists of {k: Interval} for ict.report.plots.plot_k_curves."""
    return (list(ks), *([getattr(by_k[k], f) for k in ks] for f in ("mean", "low", "high")))


def plots_k(band: dict, curves: KCurves, plots: Path, baseline: str) -> list[tuple[Path, str]]:
    """plots/pass_at_k_<bench>.png and, with a baseline, plots/pass_at_k_diff_<bench>.png."""
    from ict.report.plots import plot_k_curves

    stem, out = _stem(curves.benchmark), []
    ref = ("before RL", _k_curve(curves.ks, curves.reference)) if curves.reference else None
    title = f"Final held-out pass@k against k - {curves.benchmark}"
    path = plot_k_curves(band, plots / f"pass_at_k_{stem}.png", title=title, reference=ref)
    if path is not None:
        note = "; dashed: before RL" if ref else ""
        out.append((path, f"{title} (mean over seeds, band: interval{note})"))
    diffs = {m: _k_curve(curves.ks, d) for m, d in curves.differences.items()}
    if diffs:
        title = f"pass@k minus {baseline}'s against k - {curves.benchmark}"
        path = plot_k_curves(
            diffs, plots / f"pass_at_k_diff_{stem}.png", title=title,
            ylabel=f"pass@k - {baseline}", zero_line=True,
        )  # fmt: skip
        if path is not None:
            out.append((path, f"{title} (paired difference, band: interval)"))
    return out


def _steps_section(
    doc, groups, confidence: float, plots: Path, raw: dict, endpoints: Endpoints
) -> None:
    """pass@1 / pass@n / H / H2 against the training step: a figure, a table, one sentence per
    method (first-to-last change and the collapse criterion); fills raw["steps"], raw["change"]."""
    doc.heading("pass@1, pass@n and entropy against the training step", 3)
    curves = {m: step_curves(runs, confidence) for m, runs in groups.items()}
    curves = {m: c for m, c in curves.items() if c is not None}
    sizes = sorted({c.n for c in curves.values()})
    n_text = str(sizes[0]) if len(sizes) == 1 else "n"
    if not curves:
        doc.para(
            "No periodic held-out evaluation with per-problem results in these runs "
            "(RUN/eval_steps/step_*.json, written with `eval_every`; heldout_before/after.json)."
        )
    else:
        _steps_plot_and_table(doc, curves, n_text, plots)
        raw["steps"] = {
            m: {"steps": c.steps, "n": c.n}
            | {name: [_triple(iv) for iv in ivs] for name, ivs in c.values.items()}
            for m, c in curves.items()
        }
    doc.para(CHANGE_PARA.format(window=CHANGE_WINDOW))
    for method, runs in groups.items():
        c = change(runs, curves.get(method), confidence, endpoints)
        doc.para(change_sentence(method, c, curves[method].n if method in curves else None))
        raw["change"][method] = {
            "first_step": c.first, "last_step": c.last,
            "pass@1": _triple(c.pass1), "pass@n": _triple(c.passn),
            "pass@1_verdict": c.pass1_verdict.as_dict() if c.pass1_verdict else None,
            "pass@n_verdict": c.passn_verdict.as_dict() if c.passn_verdict else None,
            "entropy_start": _triple(c.entropy_start), "entropy_end": _triple(c.entropy_end),
            "entropy_window": c.window,
            "entropy_ratio": c.ratio if math.isfinite(c.ratio) else None,
            "collapsed": c.collapsed, "seeds_below": c.seeds_below, "seeds": c.seeds,
        }  # fmt: skip


CHANGE_PARA = (
    "Change from the first to the last evaluated step (interval paired by seed and problem, a "
    "description; p: the seed-level paired t of last minus first, exploratory) and the collapse "
    "criterion of ict.evidence.health: the mean over seeds of the last-W steps' mean entropy "
    f"below {HEALTH.collapse_fraction:g}x its first-W mean ({{window}})."
)
CHANGE_WINDOW = f"W = {HEALTH.window}, at most half the logged steps"


def _steps_plot_and_table(doc, curves: dict[str, StepCurves], n_text: str, plots: Path) -> None:
    from ict.report.plots import plot_step_panels

    names = [
        ("pass@1", "held-out pass@1", "pass@1"),
        ("pass@n", f"held-out pass@{n_text}", f"pass@{n_text}"),
        ("entropy", f"Shannon entropy H (valid tokens, {ENTROPY_WINDOW}-step window)", "nats"),
        ("renyi2", f"Rényi-2 entropy H2 (valid tokens, {ENTROPY_WINDOW}-step window)", "nats"),
    ]
    panels = []
    for name, title, ylabel in names:
        lines = {}
        for method, c in curves.items():
            keep = [i for i, iv in enumerate(c.values[name]) if iv.n]
            if keep:
                ivs = [c.values[name][i] for i in keep]
                lines[method] = (
                    [c.steps[i] for i in keep], *([getattr(iv, f) for iv in ivs] for f in ("mean", "low", "high"))
                )  # fmt: skip
        panels.append((title, ylabel, lines))
    path = plot_step_panels(
        panels, plots / "exploration_steps.png", title="Exploration against training step"
    )
    if path is not None:
        doc.image(
            path,
            "pass@1, pass@n, H and H2 at the evaluated steps (mean over seeds, band: interval)",
        )
    rows = [
        [method, str(step), str(c.values["pass@1"][i].n),
         *(_cell(c.values[name][i]) for name, _, _ in names)]
        for method, c in curves.items()
        for i, step in enumerate(c.steps)
    ]  # fmt: skip
    doc.table(
        ["method", "step", "seeds", "pass@1", f"pass@{n_text}", "H (nats)", "H2 (nats)"], rows
    )
