"""A study's report sections: one registered function each (SECTIONS), run by the study's `report`
stage (ict.compare.study) in the order its preset lists them (`study.report`).

A section is `write(study, dest) -> Path | None`: it reads a `StudyView` (what the study stage
hands over: the finished cells, the declared settings, the pilot and its rule's words, the
metrics) and writes its files under `dest`, returning its main file (None when it has nothing to
write yet). The sections:

- `pilot`: DEST/pilot/pilot.md, .html, .json and plots/frontier.png: each pilot cell's validation
  curve, the declared choice, what the rule makes of each cell;
- `secondary`: DEST/secondary.md and .json: declared secondary endpoints (ict.report.secondary:
  a non-inferiority at a measured margin, two-sided differences, entropy ratios, and each
  registered grid metric of the study per arm);
- `comparison`: DEST/report.md, .html, .json: ict.report.comparison over the finished seeds
  under the preset's declared endpoints, with the study's notes;
- `frontier`: DEST/plots/frontier.png: validation pass@k against pass@1 over checkpoints, mean
  over the finished seeds, one line per arm;
- `companion`: DEST/companion/: an exploratory companion grid's comparison report and its
  per-arm descriptions (entropy ratio, steps to a format rate, held-out rates before and after).

A new study adds at most one section: a function registered with `register_section`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ict.errors import ConfigError
from ict.evidence.intervals import clipped, format_interval, t_interval
from ict.files import read_json, write_atomic, write_json_atomic
from ict.report.verdicts import p_text


@dataclass(frozen=True)
class PilotView:
    """The pilot as its section reads it: `record` (OUT/pilot_choice.json: the choice and every
    cell's curve), the declared `values` and `pools` (their order), `role(method, curve)`: what the
    declared rule makes of a cell (curve: the record's point dicts), the validation settings and
    the cells' `steps` and `every` (evaluation interval)."""

    record: dict
    values: tuple[float, ...]
    pools: Mapping[str, int | None]
    role: Callable[[str, Sequence[dict]], str]
    seed: int
    validation_size: int
    validation_samples: int
    temperature: float
    steps: int
    every: int


@dataclass(frozen=True)
class MetricView:
    """A registered grid metric (ict.compare.grid_metrics) as the report prints it: its file name
    in each run (`name`.json), the number's key, heading, paragraph (formatted) and decimals."""

    name: str
    value: str
    heading: str
    text: str
    digits: int


@dataclass
class StudyView:
    """What a study's sections read (built by ict.compare.study.Study.view).

    name: the preset; command: how its stages ran (the reports name it); out: the study
    directory; methods: the test arms; cells: {finished test seed: its run directories, one per
    method in `methods` order} (seeds whose every arm is done: a balanced design); declared_seeds,
    blocks: the design; endpoints: the preset's declared endpoints; settings: the preset's `study`
    mapping (each section reads its own key); pilot, metrics: see PilotView, MetricView;
    curve(run_dir): a cell's validation curve, points (step, pass1, pass32) from step 0; word: what a
    problem is called ("pairs"); eval_size: the final evaluation's problems; companion: the
    companion grid's directory and its arms and seeds (None without one)."""

    name: str
    command: str
    out: Path
    methods: list[str]
    cells: dict[int, list[Path]]
    declared_seeds: int
    blocks: int
    endpoints: Any = None
    settings: Mapping = field(default_factory=dict)
    pilot: PilotView | None = None
    metrics: list[MetricView] = field(default_factory=list)
    curve: Callable[[Path], list] | None = None
    word: str = "problems"
    eval_size: int | None = None
    companion: dict | None = None
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Section:
    """A registered report section: `write(study, dest)`, and `text` (docs/compare.md)."""

    name: str
    write: Callable[[StudyView, Path], Path | None]
    text: str


SECTIONS: dict[str, Section] = {}


def register_section(name: str, text: str):
    """Decorator: register `write(study, dest)` as section `name` (a preset lists it in
    `study.report`)."""

    def register(write):
        SECTIONS[name] = Section(name, write, text)
        return write

    return register


def fmt_signed(x: float | None) -> str:
    return "-" if x is None or x != x else f"{x:+.3f}"


def mean_interval(values: list, digits: int = 3, bounds=(-float("inf"), float("inf"))) -> str:
    """'mean [95% t interval]' over seeds (None / NaN left out), the interval clipped to `bounds`
    (a rate: [0, 1])."""
    return format_interval(clipped(t_interval(values), *bounds), digits)


def two_sided_word(seeds, problems, alpha: float) -> str:
    """'lower' / 'higher' when both tests pass at alpha (unadjusted: a declared secondary), else
    'no difference shown'."""
    ps = [t.p for t in (seeds, problems) if t is not None]
    if ps and all(p < alpha for p in ps):
        return "lower" if seeds.mean < 0 else "higher"
    return "no difference shown"


def arm_rows(values, fmt: str, signed: str) -> list[str]:
    """Table rows of an ict.report.secondary.ArmValues: arm, seeds, mean [interval], minus the
    baseline's, its paired p."""
    rows = []
    for arm, mean in values.mean.items():
        low, high = values.interval[arm]
        test = values.against_baseline.get(arm)
        rows.append(
            f"| {arm} | {len(values.per_seed[arm])} | {fmt.format(mean)} [{fmt.format(low)}, "
            f"{fmt.format(high)}] | "
            + (f"{signed.format(test.mean)} | {p_text(test.p)} |" if test else "(baseline) | |")
        )
    return rows


def benchmark_of(run_dir: Path) -> str:
    """The one benchmark of a run's final evaluation (the key of eval/<benchmark>/pass@k)."""
    result = read_json(Path(run_dir) / "final_eval.json") or {}
    (bench,) = result.get("benchmarks") or result.get("per_problem") or [None]
    if bench is None:
        raise ConfigError(f"{run_dir}/final_eval.json names no benchmark: run the test stage")
    return bench


def groups_of(study: StudyView) -> dict:
    """{method: [Run]} over the finished seeds, in seed order."""
    from ict.report.runs import load_run

    seeds = sorted(study.cells)
    return {m: [load_run(study.cells[s][i]) for s in seeds] for i, m in enumerate(study.methods)}


# ---- pilot ------------------------------------------------------------------------------------
@register_section("pilot", "the pilot's cells, its declared choice and frontier (DEST/pilot/)")
def pilot_section(study: StudyView, dest: Path) -> Path | None:
    """DEST/pilot/pilot.md, pilot.html, pilot.json and plots/ from OUT/pilot_choice.json: each
    cell's validation curve, the declared choice, the frontier figure (pass@32 against pass@1
    over checkpoints, one line per arm)."""
    from ict.report.document import Document

    pilot = study.pilot
    if pilot is None:
        raise ConfigError(f"no {study.out}/pilot_choice.json: run the decide stage first")
    dest = dest / "pilot"
    choice, cells = pilot.record["choice"], pilot.record["cells"]
    frontier = _pilot_figure(pilot, dest / "plots")
    doc = Document(f"{study.name}: the exploration study")
    doc.para(
        "Declared in [PROTOCOL.md](../PROTOCOL.md) before any cell ran. Commands: "
        "[COMMAND.md](../COMMAND.md). Stage A (the pilot, a description: one seed per cell) ran "
        f"in full: {len(cells)} cells."
    )
    doc.heading("The pilot's declared choice")
    doc.para(f"**{choice['reason']}**.")
    stable = ", ".join(
        f"{pool}: {lr:g}" if lr is not None else f"{pool}: none"
        for pool, lr in choice["stable_lr"].items()
    )
    doc.para(
        f"Largest learning rate at which ICT's validation pass@1 stayed >= its start: {stable}."
    )
    if choice["pool"] is None:
        doc.para(
            f"Stage B (the confirmatory comparison of {', '.join(study.methods[:-1])} and "
            f"{study.methods[-1]} over {study.declared_seeds} seeds and {study.eval_size} test "
            "problems) did not run, as the protocol declares; no verdict on ICT against GRPO or "
            "its random control comes from this study."
        )
    rows = []
    for c in cells:
        pts = c["curve"]
        start, end = pts[0], pts[-1]
        rows.append([
            c["method"], c["pool"], f"{c['lr']:g}",
            f"{start['pass1']:.3f} -> {end['pass1']:.3f}",
            f"{min(p['pass1'] for p in pts[1:]):.3f}",
            f"{start['pass32']:.3f} -> {end['pass32']:.3f}",
            f"{min(p['pass32'] for p in pts[1:]):.3f}",
            pilot.role(c["method"], pts),
        ])  # fmt: skip
    doc.heading(
        f"Pilot cells (validation: {pilot.validation_size} {study.word} x "
        f"{pilot.validation_samples} samples, temperature {pilot.temperature:g}, seed {pilot.seed})"
    )
    doc.table(
        ["method", "pool", "lr", f"pass@1 start -> {pilot.steps}", "min pass@1",
         f"pass@32 start -> {pilot.steps}", "min pass@32", "by the declared rule"],
        rows,
    )  # fmt: skip
    doc.image(
        frontier,
        f"The pilot's frontier: validation pass@32 against pass@1 at steps 0-{pilot.steps}",
    )
    curves = "\n".join(
        f"{c['method']} {c['pool']} lr {c['lr']:g}: "
        + " ".join(f"{p['step']}:{p['pass1']:.3f}/{p['pass32']:.3f}" for p in c["curve"])
        for c in cells
    )
    doc.heading("Every evaluation (step: pass@1 / pass@32)")
    doc.pre(curves)
    write_atomic(dest / "pilot.md", doc.markdown(dest))
    write_atomic(dest / "pilot.html", doc.html())
    write_json_atomic(dest / "pilot.json", {"stage": "pilot", **pilot.record})
    return dest / "pilot.md"


def _pilot_figure(pilot: PilotView, plots: Path) -> Path:
    """plots/frontier.png: one panel per pool, pass@32 against pass@1, darker for larger values."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ict.report.plots import method_color

    plots.mkdir(parents=True, exist_ok=True)
    pools = list(pilot.pools)
    fig, axes = plt.subplots(1, len(pools), figsize=(4.5 * len(pools), 4), sharex=True,
                             sharey=True, squeeze=False)  # fmt: skip
    axes = axes[0]
    for ax, pool in zip(axes, pools, strict=True):
        for c in (c for c in pilot.record["cells"] if c["pool"] == pool):
            xs = [p["pass1"] for p in c["curve"]]
            ys = [p["pass32"] for p in c["curve"]]
            shade = pilot.values.index(c["lr"]) / max(len(pilot.values) - 1, 1)
            ax.plot(xs, ys, "-o", ms=3, color=method_color(c["method"]), alpha=0.35 + 0.65 * shade,
                    label=f"{c['method']} lr {c['lr']:g}")  # fmt: skip
            ax.annotate("start", (xs[0], ys[0]), fontsize=9)
        size = pilot.pools[pool]
        ax.set_title(f"pool: {pool if size is None else f'{size} pairs'}", fontsize=12)
        ax.set_xlabel("validation pass@1", fontsize=11)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("validation pass@32", fontsize=11)
    axes[-1].legend(fontsize=8, loc="lower left")
    fig.suptitle(
        f"Pilot: pass@32 against pass@1 every {pilot.every} steps (darker: larger lr)", fontsize=12
    )
    fig.tight_layout()
    path = plots / "frontier.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ---- secondary --------------------------------------------------------------------------------
@register_section("secondary", "the declared secondary endpoints (DEST/secondary.md, .json)")
def secondary_section(study: StudyView, dest: Path) -> Path | None:
    """DEST/secondary.md and secondary.json: the declared secondary endpoints of
    `study.settings["secondary"]` over the finished seeds (ict.report.secondary): `non_inferiority`
    {method, baseline, k, fraction}, `two_sided` {method, baselines, k, note}, `entropy_baseline`,
    and each of the study's grid metrics per arm; `alpha` (default 0.05)."""
    from ict.report.health import run_health
    from ict.report.secondary import arm_values, difference_tests, entropy_ratios, non_inferiority

    if not study.cells:
        return None
    spec = study.settings.get("secondary") or {}
    alpha = spec.get("alpha", 0.05)
    groups = groups_of(study)
    bench = benchmark_of(study.cells[min(study.cells)][0])
    ni_spec, two = spec["non_inferiority"], spec["two_sided"]
    m, b = ni_spec["method"], ni_spec["baseline"]
    k1 = ni_spec["k"]
    ni = non_inferiority(groups, m, b, f"eval/{bench}/pass@{k1}", fraction=ni_spec["fraction"],
                         alpha=alpha)  # fmt: skip
    k2, tm = two["k"], two["method"]
    pairs = {
        x: difference_tests(groups, tm, x, f"eval/{bench}/pass@{k2}") for x in two["baselines"]
    }
    base = spec.get("entropy_baseline", b)
    ratios = entropy_ratios(groups, base)
    health = run_health(groups[base][0])
    window = health.window if health is not None else "?"
    seeds = len(groups[base])
    note = f" ({two['note']})" if two.get("note") else ""
    lines = [
        f"# {study.name} stage B: the declared secondary endpoints",
        "",
        f"Declared in [PROTOCOL.md](PROTOCOL.md) before any cell ran; {seeds} seeds "
        f"({study.blocks} warm starts), computed by `ict.report.secondary` from the finished "
        f"cells (`{study.command} report`). Each is tested at alpha {alpha:g} without a "
        "multiplicity adjustment: a secondary endpoint, read beside the primary verdicts in "
        "[report.md](report.md), not instead of them. Two tests, as for a primary verdict: the "
        "seed-level paired t blocked by warm start and the over-problems two-way "
        "variance-components t; a verdict needs both.",
        "",
        f"## pass@{k1}: {m.upper()} - {b.upper()}, non-inferiority",
        "",
        f"Margin: {ni_spec['fraction']:g} x {b.upper()}'s measured pass@{k1} gain over its start "
        f"model ({fmt_signed(ni.change)}) = {ni.margin:.3f}. One-sided: non-inferior when both "
        "tests reject difference <= -margin; inferior when both reject difference >= -margin.",
        "",
        "| difference | margin | p non-inferior (seeds / problems) | p inferior (seeds / problems) "
        "| verdict |",
        "|---|---|---|---|---|",
        f"| {fmt_signed(ni.seeds.mean if ni.seeds else float('nan'))} | {ni.margin:.3f} | "
        f"{p_text(ni.p_non_inferior[0])} / {p_text(ni.p_non_inferior[1])} | "
        f"{p_text(ni.p_inferior[0])} / {p_text(ni.p_inferior[1])} | **{ni.verdict}** |",
        "",
        f"## pass@{k2}{note}, two-sided",
        "",
        "| comparison | difference | seed-level p | over-problems p | verdict |",
        "|---|---|---|---|---|",
    ]
    for other, (s, pr) in pairs.items():
        lines.append(
            f"| {tm} - {other} | {fmt_signed(s.mean)} | {p_text(s.p)} | "
            f"{p_text(pr.p if pr else None)} | {two_sided_word(s, pr, alpha)} |"
        )
    lines += [
        "",
        f"## Entropy ratio (mean valid-token entropy of the last {window} logged steps / the "
        f"first {window})",
        "",
        f"| arm | seeds | mean [95% t interval] | minus {base.upper()}'s | paired p (blocked) |",
        "|---|---|---|---|---|",
    ]
    lines += arm_rows(ratios, "{:.2f}", "{:+.2f}")
    extra = {}
    for metric in study.metrics:
        values = arm_values(groups, base, _metric_reader(metric))
        extra[metric.name] = values.as_dict() if values.per_seed else None
        if not values.per_seed:
            continue
        digits = metric.digits
        lines += [
            "",
            f"## {metric.heading}",
            "",
            metric.text,
            "",
            f"| arm | seeds | mean [95% t interval] | minus {base.upper()}'s | paired p (blocked) |",
            "|---|---|---|---|---|",
        ]
        lines += arm_rows(values, f"{{:.{digits}f}}", f"{{:+.{digits}f}}")
    lines += [
        "",
        "## The frontier figure",
        "",
        "![The declared frontier: validation pass@32 against pass@1 at each evaluated step, mean "
        "over the seeds, one line per arm](plots/frontier.png)",
        "",
    ]
    dest.mkdir(parents=True, exist_ok=True)
    write_atomic(dest / "secondary.md", "\n".join(lines))
    record = {
        f"pass{k1}_non_inferiority": ni.as_dict(),
        f"pass{k2}": {
            f"{tm}-{other}": {
                "seed_level": s.p,
                "over_problems": pr.p if pr else None,
                "difference": s.mean,
                "verdict": two_sided_word(s, pr, alpha),
            }
            for other, (s, pr) in pairs.items()
        },
        "entropy_ratio": ratios.as_dict(),
        **extra,
    }
    write_json_atomic(dest / "secondary.json", record)
    return dest / "secondary.md"


def _metric_reader(metric: MetricView) -> Callable:
    def value(run) -> float | None:
        record = read_json(run.path / f"{metric.name}.json")
        return record[metric.value] if record else None

    return value


# ---- comparison and frontier ------------------------------------------------------------------
@register_section("comparison", "the comparison report over the finished seeds (DEST/report.md)")
def comparison_section(study: StudyView, dest: Path) -> Path | None:
    """DEST/report.md, report.html, report.json: ict.report.comparison over the finished seeds
    under the declared endpoints, titled PARTIAL until every declared seed is done; the notes say
    which seeds (per warm-start block) and add the study's own (`StudyView.notes`)."""
    from ict.report.comparison import build_report

    if not study.cells:
        return None
    seeds = sorted(study.cells)
    per_block = study.declared_seeds // study.blocks
    status = (
        ""
        if len(seeds) == study.declared_seeds
        else (
            f": PARTIAL, {len(seeds)} of {study.declared_seeds} seeds (the protocol draws no "
            "verdict from a partial design; the verdicts below describe these seeds)"
        )
    )
    blocks = ", ".join(
        f"{sum(b * per_block <= s < (b + 1) * per_block for s in seeds)} with warm start {b}"
        for b in range(study.blocks)
    )
    dest.mkdir(parents=True, exist_ok=True)
    return build_report(
        [d for s in seeds for d in study.cells[s]], dest,
        title=f"{study.name} stage B (confirmatory){status}",
        endpoints=study.endpoints,
        lr_choice=pilot_lr_choice(study.pilot),
        notes=[
            f"Finished seeds: {', '.join(map(str, seeds))} of the declared "
            f"0-{study.declared_seeds - 1} ({blocks}).",
            *study.notes,
        ],
    )  # fmt: skip


def pilot_lr_choice(pilot: PilotView | None) -> str | None:
    """How the test cells' learning rate was chosen, for the report's scope (ict.report.scope):
    the pilot's declared rule and what it read; None without a pilot record."""
    if pilot is None or not pilot.record or not pilot.record.get("choice"):
        return None
    choice = pilot.record["choice"]
    if choice.get("lr") is None:
        return None
    return (
        "stage A's declared rule (PROTOCOL.md), one rate shared by every arm: the largest of "
        f"{', '.join(f'{lr:.2g}' for lr in pilot.values)} at which ICT's validation pass@1 "
        f"(one seed, {pilot.validation_size} problems) stayed at or above its start at every "
        f"evaluation ({choice['lr']:.2g} on the {choice['pool']} pool; then GRPO's narrowing chose "
        "the pool and horizon). ICT's pass@k at large k and the other arms' stability were not "
        "part of the choice"
    )


@register_section("frontier", "validation pass@32 against pass@1, mean over seeds (plots/)")
def frontier_section(study: StudyView, dest: Path) -> Path | None:
    """DEST/plots/frontier.png: each arm's mean (over the finished seeds) validation pass@32
    against pass@1 at each evaluated step (the cells' heldout_before.json and step evaluations)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ict.report.plots import method_color

    if not study.cells or study.curve is None:
        return None
    seeds = sorted(study.cells)
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for i, method in enumerate(study.methods):
        curves = [study.curve(study.cells[s][i]) for s in seeds]
        steps = [p.step for p in curves[0]]
        x = [sum(c[j].pass1 for c in curves) / len(curves) for j in range(len(steps))]
        y = [sum(c[j].pass32 for c in curves) / len(curves) for j in range(len(steps))]
        ax.plot(x, y, "-o", ms=4, color=method_color(method), label=method)
        for j, step in enumerate(steps):
            ax.annotate(str(step), (x[j], y[j]), fontsize=8, xytext=(3, 3),
                        textcoords="offset points")  # fmt: skip
    ax.set_xlabel("validation pass@1 (mean over seeds)", fontsize=11)
    ax.set_ylabel("validation pass@32 (mean over seeds)", fontsize=11)
    ax.set_title(f"Frontier over checkpoints (step labels), {len(seeds)} seeds", fontsize=12)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=10)
    fig.tight_layout()
    path = dest / "plots" / "frontier.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ---- companion --------------------------------------------------------------------------------
def _first_step_at(run, key: str, level: float) -> int | None:
    steps, values = run.series(key)
    return next((s for s, v in zip(steps, values, strict=True) if v >= level), None)


@register_section("companion", "an exploratory companion grid's descriptions (DEST/companion/)")
def companion_section(study: StudyView, dest: Path) -> Path | None:
    """DEST/companion/: the companion's comparison report (every comparison exploratory) and
    companion.md, four descriptions per arm over the seeds whose arms are all done: the entropy
    ratio (last-W / first-W training steps), the training format rate and the first step at which
    it reached `format_learned`, and held-out format rate, pass@1 and pass@(largest k) before
    (the start model) and after; method - baseline by the two tests, unadjusted.
    `study.companion`: {root, methods, seeds, ks, format_learned, baseline, method, text}."""
    from ict.evidence.endpoints import declare
    from ict.report.comparison import build_report
    from ict.report.health import run_health
    from ict.report.runs import load_run
    from ict.report.secondary import difference_tests, entropy_ratios

    comp = study.companion
    if comp is None:
        return None
    root, methods, base, arm = Path(comp["root"]), comp["methods"], comp["baseline"], comp["method"]
    start = read_json(root / "start_eval.json") or {}
    seeds = [
        s for s in range(comp["seeds"])
        if all((root / "runs" / f"{m}_seed{s}" / "final_eval.json").is_file() for m in methods)
    ]  # fmt: skip
    if not seeds:
        return None
    groups = {m: [load_run(root / "runs" / f"{m}_seed{s}") for s in seeds] for m in methods}
    (bench,) = start.get("benchmarks", {}) or [None]
    before = start.get("benchmarks", {}).get(bench, {})
    target = dest / "companion"
    target.mkdir(parents=True, exist_ok=True)
    ratios = entropy_ratios(groups, base)
    health = run_health(groups[base][0])
    window = health.window if health is not None else "?"
    top = f"pass@{max(comp['ks'])}"
    keys = ("format_rate", "pass@1", top)
    key = {k: f"eval/{bench}/{k}" for k in keys}
    level = comp["format_learned"]
    status = (
        f" (PARTIAL: {len(seeds)} of {comp['seeds']} seeds)" if len(seeds) < comp["seeds"] else ""
    )
    lines = [
        f"# {study.name} companion: {comp['model']}, exploratory{status}",
        "",
        comp["text"].format(
            seeds=", ".join(map(str, seeds)),
            problems=before.get("problems", "?"),
            n=before.get("n", "?"),
        ),
        "",
        f"| arm | seeds | entropy ratio (last {window} / first {window} steps) | steps to training "
        f"format rate >= {level:g} | held-out format rate | held-out pass@1 | held-out {top} |",
        "|---|---|---|---|---|---|---|",
        "| start model | - | - | - | "
        + " | ".join(f"{before.get(k, float('nan')):.3f}" for k in keys)
        + " |",
    ]
    for method, runs in groups.items():
        reached = [_first_step_at(r, "format_rate", level) for r in runs]
        done = [s for s in reached if s is not None]
        cells = [mean_interval([r.final(key[k]) for r in runs], bounds=(0.0, 1.0)) for k in keys]
        ratio = mean_interval(list(ratios.per_seed.get(method, {}).values()))
        lines.append(
            f"| {method} | {len(runs)} | {ratio} | {mean_interval(done, digits=1)} "
            f"({len(done)} of {len(runs)} reached it) | " + " | ".join(cells) + " |"
        )
    lines += [
        "",
        f"{arm.upper()} - {base.upper()} (exploratory, unadjusted; seed-level paired t and "
        "over-problems t):",
        "",
        "| key | difference | seed-level p | over-problems p |",
        "|---|---|---|---|",
    ]
    for k in ("pass@1", top, "format_rate"):
        s, pr = difference_tests(groups, arm, base, key[k])
        lines.append(
            f"| {k} | {fmt_signed(s.mean)} | {p_text(s.p)} | {p_text(pr.p if pr else None)} |"
        )
    test = ratios.against_baseline.get(arm)
    if test is not None:
        lines.append(f"| entropy ratio | {test.mean:+.2f} | {p_text(test.p)} | - |")
    lines += ["", "The full comparison report of these runs: [report.md](report.md).", ""]
    build_report(
        [d.path for runs in groups.values() for d in runs], target,
        title=f"{study.name} companion (exploratory){status}",
        endpoints=declare([], source="none declared: the companion is exploratory"),
        notes=["The companion's summary, as the protocol asks it: [companion.md](companion.md)."],
    )  # fmt: skip
    write_atomic(target / "companion.md", "\n".join(lines))
    return target / "companion.md"
