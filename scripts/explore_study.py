"""Run the exploration study (docs/reports/toy-cot-explore/PROTOCOL.md) stage by stage; resumable.

    python scripts/explore_study.py pilot  --out runs/toy-cot-explore   # stage A: 12 pilot cells
    python scripts/explore_study.py decide --out runs/toy-cot-explore   # the declared choice
    python scripts/explore_study.py test   --out runs/toy-cot-explore --block 0   # stage B
    python scripts/explore_study.py test   --out runs/toy-cot-explore --block 1
    python scripts/explore_study.py retest --out runs/toy-cot-explore --block 0   # test split
    python scripts/explore_study.py retest --out runs/toy-cot-explore --block 1
    python scripts/explore_study.py kl     --out runs/toy-cot-explore --block 0   # KL to start
    python scripts/explore_study.py kl     --out runs/toy-cot-explore --block 1
    python scripts/explore_study.py companion --out runs/toy-cot-explore  # SmolLM2, exploratory
    python scripts/explore_study.py report --out runs/toy-cot-explore   # DEST/ and DEST/pilot/

Every stage is the grid of `ict compare` (ict.compare.grid): cells are claimed, so two processes
can run the same command on one directory (two workers), and either can be killed and restarted.
Stage A: OUT/pilot-<pool>/tuning/runs/<method>_lr<lr>_seed2000 (ict.compare.explore names the
grid). `decide` writes OUT/pilot_choice.json. Stage B block b: warm start seed b, test seeds
10b..10b+9, at the pilot's shared lr, pool and horizon, in OUT/test-warm<b>/runs/<method>_seed<s>.
The companion (exploratory): the `smollm` preset's model and task, GRPO vs ICT and
random_sequence with 1 dense warm-up step, 8 steps, 6 seeds, 64 held-out problems x 16 samples
before and after, in OUT/companion/.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
from pathlib import Path

from ict.compare import explore
from ict.compare.grid import (
    GridOptions,
    checkpoint_results,
    evaluate_cell,
    evaluate_start,
    load_for,
    plan_cells,
    prepare_start,
    run_all,
    run_grid,
    tuning_cell,
    write_grid_record,
)
from ict.compare.presets import EvalSpec, get_preset
from ict.compare.tuning import TuningSpec
from ict.data import HELDOUT_SPLIT
from ict.errors import ConfigError
from ict.fast import fast_path
from ict.files import read_json, write_json_atomic
from ict.report.verdicts import p_text

PRESET = "toy-cot-explore"
SEEDS_PER_BLOCK = 10
ALPHA = 0.05
NI_FRACTION = 0.5  # the pass@1 non-inferiority margin: this x GRPO's measured pass@1 gain
PASS1, PASS4 = "eval/toy:cot/pass@1", "eval/toy:cot/pass@4"
PILOT_SPEC = TuningSpec(
    values=explore.PILOT_LRS, seeds=(explore.PILOT_SEED,), metric=explore.PILOT_K, grow=0,
    validation_size=128, validation_samples=32,
)  # fmt: skip


def pool_options(pool: str) -> GridOptions:
    size = explore.PILOT_POOLS[pool]
    return GridOptions(overrides={"train_size": size} if size else {})


def pilot_cells(preset, out: Path):
    """{(method, pool, lr): Cell} of stage A."""
    cells = {}
    for pool in explore.POOL_ORDER:
        grid = pool_options(pool)
        for method in explore.PILOT_METHODS:
            for lr in explore.PILOT_LRS:
                cells[(method, pool, lr)] = tuning_cell(
                    preset, out / f"pilot-{pool}", PILOT_SPEC, method, lr, explore.PILOT_SEED, grid
                )
    return cells


def run_pilot(out: Path) -> None:
    preset = get_preset(PRESET)
    cells = pilot_cells(preset, out)
    # lr-major, so two workers finish whole (pool, lr) pairs together
    order = sorted(cells, key=lambda k: (explore.PILOT_LRS.index(k[2]), k[1], k[0]))
    with fast_path(True):
        start = prepare_start(preset, out, print)
        run_all([cells[k] for k in order], start, preset, GridOptions())


def decide(out: Path) -> explore.PilotChoice:
    preset = get_preset(PRESET)
    curves = {}
    for key, cell in pilot_cells(preset, out).items():
        before = read_json(cell.run_dir / "heldout_before.json")
        if before is None or read_json(cell.run_dir / "final_eval.json") is None:
            raise ConfigError(f"pilot cell {cell.run_dir} is not done: run the pilot stage first")
        curves[key] = explore.curve_of([before, *checkpoint_results(cell.run_dir)])
    choice = explore.choose(curves)
    table = [
        {"method": m, "pool": p, "lr": lr, "curve": [dataclasses.asdict(pt) for pt in c]}
        for (m, p, lr), c in curves.items()
    ]
    write_json_atomic(out / "pilot_choice.json", {"choice": choice.as_dict(), "cells": table})
    for (m, p, lr), c in curves.items():
        line = " ".join(f"{pt.step}:{pt.pass1:.3f}/{pt.pass32:.3f}" for pt in c)
        print(f"{m:5s} pool {p:4s} lr {lr:.3g}  step:pass@1/pass@32  {line}")
    print(f"choice: {choice.reason}")
    return choice


def test_grid(out: Path, block: int):
    """(preset, grid options, grid directory, cells) of stage B's block `block`."""
    record = read_json(out / "pilot_choice.json")
    if record is None:
        raise ConfigError(f"no {out}/pilot_choice.json: run `decide` after the pilot")
    choice = record["choice"]
    if choice["pool"] is None:
        raise ConfigError(f"the pilot found no stable narrowing regime ({choice['reason']})")
    preset = get_preset(PRESET)
    preset = dataclasses.replace(preset, warm=dataclasses.replace(preset.warm, seed=block))
    overrides = {"learning_rate": choice["lr"], "max_steps": choice["horizon"]}
    size = explore.PILOT_POOLS[choice["pool"]]
    if size:
        overrides["train_size"] = size
    seeds = range(SEEDS_PER_BLOCK * block, SEEDS_PER_BLOCK * (block + 1))
    grid = GridOptions(seeds=list(seeds), overrides=overrides)
    target = out / f"test-warm{block}"
    return preset, grid, target, plan_cells(preset, target, grid)


def run_test(out: Path, block: int) -> None:
    preset, grid, target, cells = test_grid(out, block)
    with fast_path(True):
        start = prepare_start(preset, target, print)
        write_grid_record(target, preset, cells, grid)
        evaluate_start(cells[0], start, preset, grid)
        run_all(cells, start, preset, grid)


VALIDATION_COPY = "{}_validation.json"  # where retest keeps a result made on the validation split


def _set_aside(path: Path) -> bool:
    """Move a final result made on the validation split to <name>_validation.json; True when
    `path` must be evaluated (again)."""
    result = read_json(path)
    if result is not None and result.get("settings", {}).get("split") == HELDOUT_SPLIT:
        return False
    if result is not None:
        os.replace(path, path.with_name(VALIDATION_COPY.format(path.stem)))
    return True


def run_retest(out: Path, block: int) -> None:
    """Stage B's final evaluation on the held-out test split, as PROTOCOL.md declares it. The cells
    ran at ba0f717, whose grid evaluated the start model and each cell's final checkpoint on the
    cells' curve split (`eval_split: validation`; fixed in ict.compare.grid.final_evaluation).
    This evaluates the warm start and every trained cell's final checkpoint again on the test split
    (the same 512 x 32 settings otherwise) and keeps the validation results beside them as
    start_eval_validation.json / final_eval_validation.json. Resumable: a result already on the
    test split is kept."""
    preset, grid, target, cells = test_grid(out, block)
    with fast_path(True):
        start = prepare_start(preset, target, print)
        if _set_aside(target / "start_eval.json"):
            evaluate_start(cells[0], start, preset, grid)
        for cell in cells:
            if not (cell.run_dir / "summary.json").is_file():
                print(f"{cell.tag} not trained: skipped")
                continue
            if _set_aside(cell.run_dir / "final_eval.json"):
                evaluate_cell(cell, preset, grid)


KL_PROBLEMS, KL_SAMPLES, KL_SEED = 64, 8, 1234  # the kl stage: test problems x final-policy samples


def token_kl(policy, start, rollout, temperature: float) -> tuple[float, int]:
    """(mean over response tokens of KL(pi || pi_start) in nats, the number of tokens), both
    distributions at the sampling `temperature`, on `rollout` (ict.generation.Rollout: [N, P + R],
    responses sampled from `policy`)."""
    import torch

    ids, attn = rollout.input_ids, rollout.attention_mask
    positions = (attn.long().cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        lp, lq = (
            torch.log_softmax(
                m(ids, attention_mask=attn, position_ids=positions).logits[:, :-1].float()
                / temperature,
                dim=-1,
            )
            for m in (policy, start)
        )
        kl = (lp.exp() * (lp - lq)).sum(-1)  # [N, P + R - 1]: the token at t + 1 given t
    mask = rollout.response_mask[:, 1:]
    return float(kl[mask].mean()), int(mask.sum())


def run_kl(out: Path, block: int) -> None:
    """RUN/kl_to_start.json for every trained cell of block `block`: the mean token KL of its final
    policy to the warm start on KL_PROBLEMS test problems x KL_SAMPLES samples of the final policy
    (temperature, response budget and rendering of the cells). Issue 38 asked for it; PROTOCOL.md
    did not declare it, so it is a description added after the run."""
    from ict.data import load_task
    from ict.generation import generate
    from ict.models import format_prompt
    from ict.train.problems import task_spec

    preset, grid, target, cells = test_grid(out, block)
    cfg = cells[0].config  # the cells of a block differ in method and seed only
    with fast_path(True):
        start = prepare_start(preset, target, print)
        base, tokenizer = start.start_model(cfg)
        items = load_task(task_spec(cfg), split=HELDOUT_SPLIT, size=KL_PROBLEMS)
        prompts = [
            format_prompt(tokenizer, it.messages, system=cfg.system_prompt,
                          chat_template=cfg.chat_template)
            for it in items
        ]  # fmt: skip
        for cell in cells:
            path = cell.run_dir / "kl_to_start.json"
            if path.is_file() or not (cell.run_dir / "summary.json").is_file():
                continue
            policy, _ = load_for(cell.config, cell.run_dir)
            rollout = generate(
                policy, tokenizer, prompts, num_samples=KL_SAMPLES, temperature=cfg.temperature,
                top_p=cfg.top_p, max_new_tokens=cfg.max_new_tokens, batch_size=256, seed=KL_SEED,
                stop=cfg.stop,
            )  # fmt: skip
            kl, tokens = token_kl(policy, base, rollout, cfg.temperature)
            write_json_atomic(
                path,
                {"kl_mean_nats": kl, "tokens": tokens, "problems": len(items),
                 "samples": KL_SAMPLES, "temperature": cfg.temperature, "split": HELDOUT_SPLIT,
                 "seed": KL_SEED, "step": cfg.max_steps},
            )  # fmt: skip
            print(f"{cell.tag} KL to the start {kl:.4f} nats over {tokens} tokens")


def pilot_report(out: Path, dest: Path) -> Path:
    """DEST/pilot.md, pilot.html, pilot.json and plots/ of the pilot (stage A) from
    OUT/pilot_choice.json: each cell's validation curve, the declared choice, the frontier
    figure (pass@32 against pass@1 over checkpoints, one line per arm)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ict.files import write_atomic
    from ict.report.document import Document
    from ict.report.plots import method_color

    record = read_json(out / "pilot_choice.json")
    if record is None:
        raise ConfigError(f"no {out}/pilot_choice.json: run `decide` first")
    choice, cells = record["choice"], record["cells"]
    plots = dest / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 2, figsize=(9, 4), sharex=True, sharey=True)
    for ax, pool in zip(axes, explore.POOL_ORDER, strict=True):
        for c in (c for c in cells if c["pool"] == pool):
            xs = [p["pass1"] for p in c["curve"]]
            ys = [p["pass32"] for p in c["curve"]]
            alpha = 0.35 + 0.65 * explore.PILOT_LRS.index(c["lr"]) / (len(explore.PILOT_LRS) - 1)
            ax.plot(xs, ys, "-o", ms=3, color=method_color(c["method"]), alpha=alpha,
                    label=f"{c['method']} lr {c['lr']:g}")  # fmt: skip
            ax.annotate("start", (xs[0], ys[0]), fontsize=9)
        ax.set_title(f"pool: {pool if pool == 'full' else pool + ' pairs'}", fontsize=12)
        ax.set_xlabel("validation pass@1", fontsize=11)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("validation pass@32", fontsize=11)
    axes[1].legend(fontsize=8, loc="lower left")
    fig.suptitle("Pilot: pass@32 against pass@1 every 50 steps (darker: larger lr)", fontsize=12)
    fig.tight_layout()
    frontier = plots / "frontier.png"
    fig.savefig(frontier, dpi=110)
    plt.close(fig)

    doc = Document("toy-cot-explore: the exploration study")
    doc.para(
        "Declared in [PROTOCOL.md](../PROTOCOL.md) before any cell ran. Commands: "
        "[COMMAND.md](../COMMAND.md). Stage A (the pilot, a description: one seed per cell) ran "
        "in full: 12 cells."
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
            "Stage B (the confirmatory comparison of grpo, ict and random_sequence over 20 seeds and "
            "512 test problems) did not run, as the protocol declares; no verdict on ICT against "
            "GRPO or its random control comes from this study."
        )
    rows = []
    for c in cells:
        pts = [explore.Point(**p) for p in c["curve"]]
        start, end = pts[0], pts[-1]
        role = (
            ("stable" if explore.ict_stable(pts) else "not stable")
            if c["method"] == "ict"
            else (f"narrows at step {explore.narrowing_step(pts)}"
                  if explore.narrowing_step(pts) is not None else "does not narrow")
        )  # fmt: skip
        rows.append([
            c["method"], c["pool"], f"{c['lr']:g}",
            f"{start.pass1:.3f} -> {end.pass1:.3f}", f"{min(p.pass1 for p in pts[1:]):.3f}",
            f"{start.pass32:.3f} -> {end.pass32:.3f}", f"{min(p.pass32 for p in pts[1:]):.3f}",
            role,
        ])  # fmt: skip
    doc.heading("Pilot cells (validation: 128 pairs x 32 samples, temperature 1.5, seed 2000)")
    doc.table(
        ["method", "pool", "lr", "pass@1 start -> 300", "min pass@1", "pass@32 start -> 300",
         "min pass@32", "by the declared rule"],
        rows,
    )  # fmt: skip
    doc.image(frontier, "The pilot's frontier: validation pass@32 against pass@1 at steps 0-300")
    curves = "\n".join(
        f"{c['method']} {c['pool']} lr {c['lr']:g}: "
        + " ".join(f"{p['step']}:{p['pass1']:.3f}/{p['pass32']:.3f}" for p in c["curve"])
        for c in cells
    )
    doc.heading("Every evaluation (step: pass@1 / pass@32)")
    doc.pre(curves)
    write_atomic(dest / "pilot.md", doc.markdown(dest))
    write_atomic(dest / "pilot.html", doc.html())
    write_json_atomic(dest / "pilot.json", {"stage": "pilot", **record})
    return dest / "pilot.md"


def finished_test_cells(out: Path) -> dict[int, list[Path]]:
    """{seed: its cells} for the test seeds whose every arm is done (a balanced partial design)."""
    preset = get_preset(PRESET)
    by_seed: dict[int, list[Path]] = {}
    for block in (0, 1):
        for seed in range(SEEDS_PER_BLOCK * block, SEEDS_PER_BLOCK * (block + 1)):
            dirs = [out / f"test-warm{block}" / "runs" / f"{m}_seed{seed}" for m in preset.methods]
            if all((d / "final_eval.json").is_file() for d in dirs):
                by_seed[seed] = dirs
    return by_seed


def _two_sided_word(seeds, problems, alpha: float = ALPHA) -> str:
    """'lower' / 'higher' when both tests pass at alpha (unadjusted: a declared secondary), else
    'no difference shown'."""
    ps = [t.p for t in (seeds, problems) if t is not None]
    if ps and all(p < alpha for p in ps):
        return "lower" if seeds.mean < 0 else "higher"
    return "no difference shown"


def _arm_rows(values, fmt: str, signed: str) -> list[str]:
    """Table rows of an ict.compare.secondary.ArmValues: arm, seeds, mean [interval], minus the
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


def _kl_of(run) -> float | None:
    record = read_json(run.path / "kl_to_start.json")
    return record["kl_mean_nats"] if record else None


def secondary_report(groups: dict, dest: Path) -> Path:
    """DEST/secondary.md and secondary.json: the protocol's declared secondary endpoints over the
    finished seeds (ict.compare.secondary), beside the frontier figure the report stage draws."""
    from ict.compare.secondary import (
        arm_values,
        difference_tests,
        entropy_ratios,
        non_inferiority,
    )

    ni = non_inferiority(groups, "ict", "grpo", PASS1, fraction=NI_FRACTION, alpha=ALPHA)
    pass4 = {b: difference_tests(groups, "ict", b, PASS4) for b in ("grpo", "random_sequence")}
    ratios = entropy_ratios(groups, "grpo")
    seeds = len(groups["grpo"])
    lines = [
        "# toy-cot-explore stage B: the declared secondary endpoints",
        "",
        f"Declared in [PROTOCOL.md](PROTOCOL.md) before any cell ran; {seeds} seeds (2 warm starts), "
        "computed by `ict.compare.secondary` from the finished cells (`scripts/explore_study.py "
        "report`). Each is tested at alpha 0.05 without a multiplicity adjustment: a secondary "
        "endpoint, read beside the primary verdicts in [report.md](report.md), not instead of "
        "them. Two tests, as for a primary verdict: the seed-level paired t blocked by warm start "
        "and the over-problems two-way variance-components t; a verdict needs both.",
        "",
        "## pass@1: ICT - GRPO, non-inferiority",
        "",
        f"Margin: {NI_FRACTION:g} x GRPO's measured pass@1 gain over its start model "
        f"({_fmt(ni.change)}) = {ni.margin:.3f}. One-sided: non-inferior when both tests reject "
        "difference <= -margin; inferior when both reject difference >= -margin.",
        "",
        "| difference | margin | p non-inferior (seeds / problems) | p inferior (seeds / problems) "
        "| verdict |",
        "|---|---|---|---|---|",
        f"| {_fmt(ni.seeds.mean if ni.seeds else float('nan'))} | {ni.margin:.3f} | "
        f"{p_text(ni.p_non_inferior[0])} / {p_text(ni.p_non_inferior[1])} | {p_text(ni.p_inferior[0])} / "
        f"{p_text(ni.p_inferior[1])} | **{ni.verdict}** |",
        "",
        "## pass@4 (the paper's headline k), two-sided",
        "",
        "| comparison | difference | seed-level p | over-problems p | verdict |",
        "|---|---|---|---|---|",
    ]
    for base, (s, pr) in pass4.items():
        lines.append(
            f"| ict - {base} | {_fmt(s.mean)} | {p_text(s.p)} | {p_text(pr.p if pr else None)} "
            f"| {_two_sided_word(s, pr)} |"
        )
    lines += [
        "",
        "## Entropy ratio (mean valid-token entropy of the last 10 logged steps / the first 10)",
        "",
        "| arm | seeds | mean [95% t interval] | minus GRPO's | paired p (blocked) |",
        "|---|---|---|---|---|",
    ]
    lines += _arm_rows(ratios, "{:.2f}", "{:+.2f}")
    kl = arm_values(groups, "grpo", _kl_of)
    if kl.per_seed:
        lines += [
            "",
            "## Mean token KL of the final policy to the start model (added after the run)",
            "",
            "Issue 38 asked for it; PROTOCOL.md did not declare it, so it is a description. "
            f"KL(pi_final || pi_start) in nats at the sampling temperature, averaged over the "
            f"response tokens of {KL_SAMPLES} samples of the final policy on each of the first "
            f"{KL_PROBLEMS} test problems (`scripts/explore_study.py kl`).",
            "",
            "| arm | seeds | mean [95% t interval] | minus GRPO's | paired p (blocked) |",
            "|---|---|---|---|---|",
        ]
        lines += _arm_rows(kl, "{:.4f}", "{:+.4f}")
    lines += [
        "",
        "## The frontier figure",
        "",
        "![The declared frontier: validation pass@32 against pass@1 at each evaluated step, mean "
        "over the seeds, one line per arm](plots/frontier.png)",
        "",
    ]
    from ict.files import write_atomic

    write_atomic(dest / "secondary.md", "\n".join(lines))
    write_json_atomic(
        dest / "secondary.json",
        {
            "pass1_non_inferiority": ni.as_dict(),
            "pass4": {
                f"ict-{b}": {
                    "seed_level": s.p,
                    "over_problems": pr.p if pr else None,
                    "difference": s.mean,
                    "verdict": _two_sided_word(s, pr),
                }
                for b, (s, pr) in pass4.items()
            },
            "entropy_ratio": ratios.as_dict(),
            "kl_to_start": kl.as_dict() if kl.per_seed else None,
        },  # fmt: skip
    )
    return dest / "secondary.md"


def _fmt(x: float | None) -> str:
    return "-" if x is None or x != x else f"{x:+.3f}"


def stage_b_lr_choice(record: dict | None) -> str | None:
    """How stage B's learning rate was chosen, for the report's scope (ict.report.scope): the
    pilot's declared rule and what it read; None without a pilot record."""
    if not record:
        return None
    choice = record["choice"]
    return (
        "stage A's declared rule (PROTOCOL.md), one rate shared by every arm: the largest of "
        f"{', '.join(f'{lr:.2g}' for lr in explore.PILOT_LRS)} at which ICT's validation pass@1 "
        "(one seed, 128 problems) stayed at or above its start at every evaluation "
        f"({choice['lr']:.2g} on the {choice['pool']} pool; then GRPO's narrowing chose the pool "
        "and horizon). ICT's pass@k at large k and the other arms' stability were not part of "
        "the choice"
    )


def stage_b_report(out: Path, dest: Path) -> Path | None:
    """DEST/report.md, report.html, report.json, plots/: the comparison report (ict.report.comparison, the preset's declared
    endpoints and relative margin) over the finished seeds, and the frontier figure (validation
    pass@32 against pass@1, mean over those seeds, one line per arm); None before any seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ict.cli.compare import endpoints_from
    from ict.report.comparison import build_report
    from ict.report.plots import method_color

    cells = finished_test_cells(out)
    if not cells:
        return None
    preset = get_preset(PRESET)
    seeds = sorted(cells)
    args = argparse.Namespace(primary=None, alpha=None, margin=None)
    target = dest
    done = len(seeds) == 2 * SEEDS_PER_BLOCK
    status = (
        ""
        if done
        else (
            f": PARTIAL, {len(seeds)} of {2 * SEEDS_PER_BLOCK} seeds (the protocol draws no verdict "
            "from a partial design; the verdicts below describe these seeds)"
        )
    )
    from ict.report.runs import load_run

    groups = {m: [load_run(cells[s][i]) for s in seeds] for i, m in enumerate(preset.methods)}
    target.mkdir(parents=True, exist_ok=True)
    secondary_report(groups, target)
    md = build_report(
        [d for s in seeds for d in cells[s]], target,
        title=f"toy-cot-explore stage B (confirmatory){status}",
        endpoints=endpoints_from(args, preset),
        lr_choice=stage_b_lr_choice(read_json(out / "pilot_choice.json")),
        notes=[
            f"Finished seeds: {', '.join(map(str, seeds))} of the declared 0-19 "
            f"({sum(s < SEEDS_PER_BLOCK for s in seeds)} with warm start 0, "
            f"{sum(s >= SEEDS_PER_BLOCK for s in seeds)} with warm start 1).",
            *(
                [
                    "The final results are on the 512 test pairs the protocol declares: the cells' "
                    "own grid (at ba0f717) had evaluated the start models and the final "
                    "checkpoints on the validation split (the cells' curve split; a grid bug, "
                    "fixed in 4a816e8), so `scripts/explore_study.py retest` evaluated them again "
                    "on the test split with the same settings. The validation-split results stay "
                    "beside them (final_eval_validation.json, start_eval_validation.json in "
                    "cells.tar.gz); COMMAND.md compares the two."
                ]
                if any((d / "final_eval_validation.json").is_file() for s in seeds for d in cells[s])
                else []
            ),
            "The protocol's declared secondary endpoints (pass@1 non-inferiority, pass@4, the "
            "entropy ratio, the frontier figure): [secondary.md](secondary.md). Stage A (the pilot "
            "and its declared choice): [pilot/pilot.md](pilot/pilot.md).",
        ],
    )  # fmt: skip
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for i, method in enumerate(preset.methods):
        curves = [
            explore.curve_of(
                [read_json(cells[s][i] / "heldout_before.json"), *checkpoint_results(cells[s][i])]
            )
            for s in seeds
        ]
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
    fig.savefig(target / "plots" / "frontier.png", dpi=110)
    plt.close(fig)
    return md


COMPANION_METHODS = ("grpo", "ict", "random_sequence")


def companion_preset():
    """The declared companion: `smollm` with 3 arms, 1 warm-up step for the sparse arms, 8 steps,
    6 seeds, 64 x 16 held-out evaluation (pass@1..16)."""
    base = get_preset("smollm")
    return dataclasses.replace(
        base,
        name="smollm-companion",
        methods=list(COMPANION_METHODS),
        seeds=6,
        primary=[],
        train={**base.train, "max_steps": 8, "save_every": 4, "log_samples_every": 4},
        method_train={
            "ict": {"dense_warmup_steps": 1},
            "random_sequence": {"dense_warmup_steps": 1},
        },
        eval=EvalSpec(size=64, n=16, ks=(1, 2, 4, 8, 16)),
    )


def run_companion(out: Path) -> None:
    run_grid(companion_preset(), out / "companion", tuning="off")


FORMAT_LEARNED = 0.95  # the companion's "format learned": training format rate at or above this


def _first_step_at(run, key: str, level: float) -> int | None:
    steps, values = run.series(key)
    return next((s for s, v in zip(steps, values, strict=True) if v >= level), None)


def _mean_iv(values: list, digits: int = 3, bounds=(-math.inf, math.inf)) -> str:
    """'mean [95% t interval]' over seeds (None / NaN left out), the interval clipped to `bounds`
    (a rate: [0, 1])."""
    from ict.evidence.intervals import clipped, format_interval, t_interval

    return format_interval(clipped(t_interval(values), *bounds), digits)


def companion_report(out: Path, dest: Path) -> Path | None:
    """DEST/companion/: the companion's comparison report (every comparison exploratory) and
    companion.md, the protocol's four descriptions per arm over the seeds whose three arms are
    done: the entropy ratio (last-W / first-W training steps, W = 4 of 8), the training format
    rate and the first step at which it reached FORMAT_LEARNED, and held-out format rate, pass@1
    and pass@16 before (the start model) and after; ICT - GRPO by the two tests, unadjusted."""
    from ict.compare.secondary import difference_tests, entropy_ratios
    from ict.evidence.endpoints import declare
    from ict.report.comparison import build_report
    from ict.report.runs import load_run

    preset = companion_preset()
    root = out / "companion"
    start = read_json(root / "start_eval.json") or {}
    seeds = [
        s for s in range(preset.seeds)
        if all((root / "runs" / f"{m}_seed{s}" / "final_eval.json").is_file() for m in preset.methods)
    ]  # fmt: skip
    if not seeds:
        return None
    groups = {m: [load_run(root / "runs" / f"{m}_seed{s}") for s in seeds] for m in preset.methods}
    (bench,) = start.get("benchmarks", {}) or [None]
    before = start.get("benchmarks", {}).get(bench, {})
    target = dest / "companion"
    target.mkdir(parents=True, exist_ok=True)
    ratios = entropy_ratios(groups, "grpo")
    key = {k: f"eval/{bench}/{k}" for k in ("pass@1", "pass@16", "format_rate")}
    status = (
        "" if len(seeds) == preset.seeds else f" (PARTIAL: {len(seeds)} of {preset.seeds} seeds)"
    )
    lines = [
        f"# toy-cot-explore companion: SmolLM2-135M-Instruct, exploratory{status}",
        "",
        "Declared in [../PROTOCOL.md](../PROTOCOL.md) as exploratory: a description, not a test. "
        "`ict train`'s default model and task (reasoning-gym addition of two 1-2 digit numbers, "
        "two-shot prompt), GRPO against the paper's ICT and `random_sequence`, each with 1 dense "
        f"warm-up step, 8 steps of 8 prompts x 8, seeds {', '.join(map(str, seeds))}; held-out "
        f"evaluation {before.get('problems', '?')} problems x {before.get('n', '?')} samples before "
        "(the start model, once) and after. Question: does ICT keep entropy while learning the "
        "answer format as fast as GRPO? Means over seeds [95% t interval].",
        "",
        "| arm | seeds | entropy ratio (last 4 / first 4 steps) | steps to training format rate "
        f">= {FORMAT_LEARNED:g} | held-out format rate | held-out pass@1 | held-out pass@16 |",
        "|---|---|---|---|---|---|---|",
        f"| start model | - | - | - | {before.get('format_rate', float('nan')):.3f} | "
        f"{before.get('pass@1', float('nan')):.3f} | {before.get('pass@16', float('nan')):.3f} |",
    ]
    for method, runs in groups.items():
        reached = [_first_step_at(r, "format_rate", FORMAT_LEARNED) for r in runs]
        done = [s for s in reached if s is not None]
        cells = [
            _mean_iv([r.final(key[k]) for r in runs], bounds=(0.0, 1.0))
            for k in ("format_rate", "pass@1", "pass@16")
        ]
        lines.append(
            f"| {method} | {len(runs)} | {_mean_iv(list(ratios.per_seed.get(method, {}).values()))} | "
            f"{_mean_iv(done, digits=1)} ({len(done)} of {len(runs)} reached it) | "
            + " | ".join(cells) + " |"
        )  # fmt: skip
    lines += [
        "",
        "ICT - GRPO (exploratory, unadjusted; seed-level paired t and over-problems t):",
        "",
    ]
    lines += ["| key | difference | seed-level p | over-problems p |", "|---|---|---|---|"]
    for k in ("pass@1", "pass@16", "format_rate"):
        s, pr = difference_tests(groups, "ict", "grpo", key[k])
        lines.append(f"| {k} | {_fmt(s.mean)} | {p_text(s.p)} | {p_text(pr.p if pr else None)} |")
    test = ratios.against_baseline.get("ict")
    if test is not None:
        lines.append(f"| entropy ratio | {test.mean:+.2f} | {p_text(test.p)} | - |")
    lines += ["", "The full comparison report of these runs: [report.md](report.md).", ""]
    build_report(
        [d.path for runs in groups.values() for d in runs], target,
        title=f"toy-cot-explore companion (exploratory){status}",
        endpoints=declare([], source="none declared: the companion is exploratory"),
        notes=["The companion's summary, as the protocol asks it: [companion.md](companion.md)."],
    )  # fmt: skip
    from ict.files import write_atomic

    write_atomic(target / "companion.md", "\n".join(lines))
    return target / "companion.md"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "stage", choices=("pilot", "decide", "test", "retest", "kl", "companion", "report")
    )
    parser.add_argument(
        "--dest", type=Path, default=Path("docs/reports/toy-cot-explore"), help="report folder"
    )
    parser.add_argument("--out", type=Path, default=Path("runs/toy-cot-explore"))
    parser.add_argument("--block", type=int, choices=(0, 1), default=0)
    args = parser.parse_args(argv)
    try:
        if args.stage == "pilot":
            run_pilot(args.out)
        elif args.stage == "decide":
            decide(args.out)
        elif args.stage == "companion":
            run_companion(args.out)
        elif args.stage == "retest":
            run_retest(args.out, args.block)
        elif args.stage == "kl":
            run_kl(args.out, args.block)
        elif args.stage == "report":
            print(pilot_report(args.out, args.dest / "pilot"))
            print(stage_b_report(args.out, args.dest))
            print(companion_report(args.out, args.dest))
        else:
            run_test(args.out, args.block)
    except ConfigError as err:
        print(f"explore_study: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
