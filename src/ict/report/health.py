"""The comparison report's training-health sections: entropy health over windows, and the token
rates of the loss modes (Clip-Cov, KL-Cov).

Entropy health: each run is judged by ict.evidence.health.judge_health on its logged
`valid/entropy` (and `format_rate`) series with the criterion of its own config.yaml
(health_window, collapse_fraction, explosion_multiple, format_drop_fraction; the defaults of
ict.evidence.health when absent). Per-step health flags an older trainer logged
(`health/entropy_collapse` rows) are counted but are not verdicts.

Phases: a run that logged `dense_warmup` (its dense warm-up steps, every valid token selected:
GRPO) is also judged phase by phase (ict.evidence.health.judge_phases), and a flag names the
phase it fell in, so a collapse in the warm-up is not read as the method's.

Learning signal: each run's `zero_variance_share` series (the share of its groups whose rewards
were all equal, every engine logs it) judged by ict.evidence.health.judge_signal, with the steps
that had no group with signal, and, for runs with dynamic sampling (`dynamic/*` metrics,
ict.train.refill), the generated sequences per step and the steps that hit the cap on rounds.

Loss-mode rates: from metrics.jsonl's `loss_mode/changed_tokens`, `loss_mode/changed_rate` and
`loss_mode/nominal_rate` (absent in older runs: the section says so). Clip-Cov and KL-Cov touch
max(1, floor(r |M|)) tokens of a mini-batch; when the realised rate is at least FLOOR_DOMINATES
times the nominal r, the floor of one token decides the rate, and the report says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ict.evidence.health import (
    HealthCriterion,
    HealthJudgement,
    PhaseHealth,
    judge_health,
    judge_phases,
    judge_signal,
    no_signal_advice,
)
from ict.loss.options import LOSS_MODE_KEYS
from ict.report.runs import Run, flat_config

FLOOR_DOMINATES = 2.0  # realised / nominal rate at which the one-token floor decides the rate
_CRITERION_FIELDS = ("window", "collapse_fraction", "explosion_multiple", "format_drop_fraction")
_CONFIG_NAMES = {"window": "health_window"}  # HealthCriterion field -> TrainConfig field


def run_criterion(run: Run) -> HealthCriterion:
    """The health criterion a run was trained with (its config.yaml), else the defaults."""
    flat = flat_config(run.config)
    given = {}
    for name in _CRITERION_FIELDS:
        value = flat.get(_CONFIG_NAMES.get(name, name))
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            given[name] = int(value) if name == "window" else float(value)
    return HealthCriterion(**given)


def run_health(run: Run) -> HealthJudgement | None:
    """The window judgement of one run (None when it logged fewer than 2 entropies)."""
    _, entropy = run.series("valid/entropy")
    _, formats = run.series("format_rate")
    return judge_health(entropy, formats or None, run_criterion(run))


def run_phases(run: Run) -> PhaseHealth | None:
    """The judgement of each phase of one run (its dense warm-up and the method's own steps, by
    the logged `dense_warmup` metric), None when it logged no warm-up step or none after it."""
    rows = [
        r for r in run.metrics
        if isinstance(r.get("valid/entropy"), (int, float)) and "dense_warmup" in r
    ]  # fmt: skip
    if not rows or len(rows) != len(run.series("valid/entropy")[0]):
        return None
    formats = [r.get("format_rate") for r in rows]
    return judge_phases(
        [r.get("step", i + 1) for i, r in enumerate(rows)],
        [float(r["valid/entropy"]) for r in rows],
        [bool(r["dense_warmup"]) for r in rows],
        formats if all(isinstance(f, (int, float)) for f in formats) else None,
        run_criterion(run),
    )


def _step_flags(run: Run) -> int:
    """Steps at which an older trainer logged a per-step health flag."""
    keys = ("health/entropy_collapse", "health/entropy_explosion")
    return sum(any(row.get(k) is True for k in keys) for row in run.metrics)


def write_health_section(doc, runs: Sequence[Run], groups: dict[str, list[Run]]) -> dict:
    """The "Entropy health" section; returns {"runs": [...], "flagged": n, "step_flags": n}."""
    doc.heading("Entropy health")
    rows, flagged, judged, records, in_warmup = [], 0, 0, [], 0
    blips = sum(_step_flags(r) > 0 for r in runs)
    for method, rs in groups.items():
        found = [(r, run_health(r)) for r in rs]
        phases = {id(r): run_phases(r) for r, _ in found}
        records += [
            {"method": method, "seed": r.seed, **(j.as_dict() if j else {}),
             **({"phases": phases[id(r)].as_dict()} if phases[id(r)] else {})}
            for r, j in found
        ]  # fmt: skip
        found = [(r, j) for r, j in found if j is not None]
        if not found:
            continue
        judged += len(found)
        flags = [
            f"{r.seed}: {_flag(j, phases[id(r)])}" for r, j in found if j.collapse or j.explosion
        ]
        in_warmup += sum(
            bool(p and p.where("collapse" if j.collapse else "explosion") == "warm-up")
            for r, j in found
            if (j.collapse or j.explosion) and (p := phases[id(r)]) is not None
        )
        flagged += len(flags)
        ratios = "; ".join(f"s{r.seed} {j.ratio:.2f}x" for r, j in found)
        criteria = sorted({j.criterion_text for _, j in found})
        rows.append(
            [method, str(len(found)), "; ".join(flags) or "-", ratios, " / ".join(criteria)]
        )
    if not judged:
        doc.para("No run logged `valid/entropy`: no entropy-health judgement.")
    else:
        doc.para(
            "Judged over windows, not steps: the mean entropy of the last W logged steps against "
            "the first W (W shrinks to half the steps for short runs), each run by its own "
            f"config's criterion. {flagged} of {judged} runs flagged."
            + (
                f" {in_warmup} of them in the dense warm-up (its first steps: every valid token "
                "selected, i.e. GRPO), not in the method's own steps, which are judged apart."
                if in_warmup
                else ""
            )
        )
        doc.table(
            ["method", "runs", "flags (seed: flag)", "last-W / first-W mean H", "criterion"], rows
        )
    if blips:
        doc.para(
            f"{blips} run{'s' * (blips != 1)} logged per-step health flags (an older trainer: one "
            "step below a fraction of a 3-step baseline). A per-step dip is a warning in the "
            "training log, not a verdict; they are not counted above."
        )
    signal = _write_signal(doc, groups)
    return {
        "runs": records, "flagged": flagged, "judged": judged, "runs_with_step_flags": blips,
        "signal": signal,
    }  # fmt: skip


def _write_signal(doc, groups: dict[str, list[Run]]) -> dict:
    """The learning-signal table of the health section; returns its numbers per run."""
    rows, records, flagged = [], [], 0
    for method, rs in groups.items():
        found = []
        for r in rs:
            share = r.series("no_signal_share")[1]  # runs before it logged only the rewards'
            j = judge_signal(share if len(share) else r.series("zero_variance_share")[1])
            if j is None:
                continue
            _, rounds = r.series("dynamic/rounds")
            _, sequences = r.series("rollout/sequences")
            caps = sum(bool(row.get("dynamic/cap_hit")) for row in r.metrics)
            dynamic = bool(flat_config(r.config).get("dynamic_sampling")) or bool(rounds)
            found.append((r, j))
            records.append(
                {"method": method, "seed": r.seed, **j.as_dict(), "dynamic_sampling": dynamic,
                 "sequences_per_step": float(np.mean(sequences)) if sequences else None,
                 "cap_hit_steps": caps}
            )  # fmt: skip
        if not found:
            continue
        flags = [f"{r.seed}: {j.share:.0%}" for r, j in found if j.flagged]
        flagged += len(flags)
        mine = [x for x in records if x["method"] == method]
        per_step = [x["sequences_per_step"] for x in mine if x["sequences_per_step"] is not None]
        rows.append(
            [
                method,
                str(len(found)),
                f"{np.mean([j.share for _, j in found]):.2f}",
                str(sum(j.silent_steps for _, j in found)),
                "yes" if any(x["dynamic_sampling"] for x in mine) else "no",
                f"{np.mean(per_step):.0f}" if per_step else "-",
                str(sum(x["cap_hit_steps"] for x in mine)),
                "; ".join(flags) or "-",
            ]
        )
    if rows:
        doc.para(
            "Learning signal: the share of groups whose rewards were all equal (advantage 0: no "
            "policy-gradient signal), mean over steps and runs; steps in which no group had any "
            f"made no update. A run is flagged at >= {judge_signal([0.0]).threshold:.0%} "
            f"({flagged} flagged; the fix: {no_signal_advice()})."
        )
        doc.table(
            ["method", "runs", "groups without signal", "steps without signal", "dynamic sampling", "sequences / step", "cap hit (steps)", "flagged (seed: share)"],
            rows,
        )  # fmt: skip
    return {"runs": records, "flagged": flagged}


def _flag(j: HealthJudgement, phases: PhaseHealth | None = None) -> str:
    """'COLLAPSE', with the phase it fell in for a run with a dense warm-up ('COLLAPSE in the
    warm-up (GRPO)', 'COLLAPSE in the method's steps')."""
    flag = "collapse" if j.collapse else "explosion"
    where = phases.where(flag) if phases is not None else None
    named = {
        "warm-up": " in the warm-up (GRPO)",
        "method": " in the method's steps",
        "warm-up and method": " in the warm-up (GRPO) and the method's steps",
    }
    return flag.upper() + named.get(where or "", "")


def _loss_mode_methods(groups: dict[str, list[Run]]) -> list[str]:
    """Methods with a loss mode other than vanilla (ict.methods), or that logged its keys."""
    from ict.methods import METHODS

    out = []
    for method, rs in groups.items():
        spec = METHODS.get(method)
        mode = getattr(spec, "loss_mode", None)
        logged = any(LOSS_MODE_KEYS[1] in r.keys() for r in rs)
        if (mode and mode != "vanilla") or logged:
            out.append(method)
    return out


def write_loss_mode_section(doc, groups: dict[str, list[Run]]) -> dict | None:
    """Realised vs nominal token rates of the loss modes; None when no method has one."""
    methods = _loss_mode_methods(groups)
    if not methods:
        return None
    doc.heading("Loss modes: realised token rates")
    rows, raw, missing = [], {}, []
    for method in methods:
        per_run = []
        for r in groups[method]:
            series = {k: r.series(k)[1] for k in LOSS_MODE_KEYS}
            if series["loss_mode/changed_rate"]:
                per_run.append({k: float(np.mean(v)) if v else math.nan for k, v in series.items()})
        if not per_run:
            missing.append(method)
            continue
        realised = float(np.mean([p["loss_mode/changed_rate"] for p in per_run]))
        nominal = float(np.nanmean([p["loss_mode/nominal_rate"] for p in per_run]))
        tokens = float(np.nanmean([p["loss_mode/changed_tokens"] for p in per_run]))
        ratio = realised / nominal if nominal > 0 else math.nan
        floor = math.isfinite(ratio) and ratio >= FLOOR_DOMINATES
        note = (
            f"the floor of one token dominates (realised >= {FLOOR_DOMINATES:g}x nominal)"
            if floor
            else ""
        )
        rows.append(
            [
                method,
                str(len(per_run)),
                f"{tokens:.2f}",
                f"{realised:.4f}",
                f"{nominal:.4f}",
                f"{ratio:.2f}x",
                note,
            ]
        )
        raw[method] = {
            "runs": len(per_run), "changed_tokens": tokens, "changed_rate": realised,
            "nominal_rate": nominal, "ratio": ratio, "floor_dominates": floor,
        }  # fmt: skip
    if rows:
        doc.para(
            "Mean over logged steps and seeds of the tokens each loss mode changed per step and "
            "their share of the valid tokens, against the method's nominal rate r (it touches "
            "max(1, floor(r |M|)) tokens of a mini-batch of |M| valid tokens)."
        )
        doc.table(
            ["method", "runs", "changed tokens / step", "realised rate", "nominal rate", "realised / nominal", "note"],
            rows,
        )  # fmt: skip
    if missing:
        doc.para(
            "Not logged by these runs (older run directories, before `loss_mode/changed_rate`): "
            + ", ".join(f"**{m}**" for m in missing)
            + ". How many tokens their loss mode changed is unknown here."
        )
    return {"methods": raw, "not_logged": missing}
