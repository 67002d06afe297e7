"""`ict compare`: a grid of methods x seeds with one report, or a report from existing runs."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from ict.compare.tuning import tuning_path
from ict.console import quiet_console
from ict.errors import ConfigError
from ict.evidence.endpoints import ALPHA, MARGIN, Endpoints, declare
from ict.files import (
    check_writable,
    read_json_if_present,
    read_json_required,
)

EXAMPLES = """\
examples:
  ict compare --preset toy                  # toy task: warm start + {toy}
  ict compare --preset toy-cot              # reasoning chains: 52-token answers, {toy-cot}
  ict compare --quick                       # {quick}: a few minutes, first contact
  ict compare                               # preset {default}: {default_summary}
  ict compare --preset smollm-cot --methods grpo,ict,random_sequence --seeds 2   # SmolLM2 chains
  ict compare --preset toy --methods grpo,ict --seeds 5 --steps 100
  ict compare --preset toy-cot-long --tuning-only   # each method's learning rate on validation
  ict compare --preset toy-cot-explore --stage decide --out runs/toy-cot-explore   # a study's stage
  ict compare --runs runs/a runs/b runs/c   # report from existing run directories (any engine)
  ict compare --runs runs/* --primary ict-grpo@pass@4 --alpha 0.05 --margin 0.03   # with endpoints
  ict compare --rerender docs/reports/toy-cot --preset toy-cot   # re-render verdicts from report.json
  ict compare --preset paper --dry-run      # the paper's grid end to end on a tiny model + fixtures
  ict compare --preset paper --model-size 1.5b   # the paper's grid on GPUs (docs/paper.md)
Rerunning the same command resumes: finished cells are skipped, interrupted ones resume.
Several processes may run the same command on one --out: each runs cells the others do not hold.
"""
DEFAULT_PRESET = "smollm"


def _built(name: str):
    from ict.compare.presets import PRESETS

    return PRESETS[name].build()


def grid_size(name: str) -> str:
    """'<methods> methods x <seeds> seeds' of a registered preset, read from the preset itself."""
    preset = _built(name)
    return f"{len(preset.methods)} methods x {preset.seeds} seeds"


def presets_help() -> str:
    """The epilog's list of the registered presets (ict.compare.presets.PRESETS), one a line, with
    each preset's grid (methods x seeds, RL steps) read from the preset itself."""
    from ict.compare.presets import PRESETS

    width = max(len(name) for name in PRESETS) + 2
    lines = []
    for name, entry in PRESETS.items():
        preset = entry.build()
        steps = preset.train.get("max_steps")
        grid = f"{grid_size(name)}{f', {steps} steps' if steps else ''}"
        lines.append(f"  {name:<{width}}{entry.summary} [{grid}]")
    return "presets (--preset NAME):\n" + "\n".join(lines) + "\n"


def examples_help() -> str:
    """EXAMPLES with the grid sizes and the default preset's summary from the registry."""
    from ict.compare.presets import PRESETS

    return EXAMPLES.format_map(
        {name: grid_size(name) for name in ("toy", "toy-cot", "quick")}
        | {"default": DEFAULT_PRESET, "default_summary": PRESETS[DEFAULT_PRESET].summary}
    )


def _seeds_help() -> str:
    from ict.compare.presets import PRESETS

    seeds = ", ".join(f"{name} {entry.build().seeds}" for name, entry in PRESETS.items())
    return f"number of seeds 0..N-1 (default: the preset's: {seeds})"


def _methods_help() -> str:
    from ict.cli.catalog import METHODS

    names = ", ".join(name for name, _, _ in METHODS)
    return (
        "comma-separated methods (default: the preset's, listed below; any method of "
        f"`ict train --help`: {names}; a selector or a composition such as ict+stapo)"
    )


def _stage_names() -> list[str]:
    from ict.compare.study import STAGES

    return list(STAGES)


def _stages_help() -> str:
    from ict.compare.study import STAGES

    return "; ".join(f"{name}: {stage.text}" for name, stage in STAGES.items())


def add_parser(subparsers, summary: str) -> None:
    p = subparsers.add_parser(
        "compare",
        help=summary,
        description=summary,
        epilog=presets_help() + examples_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from ict.compare.presets import PRESETS

    p.add_argument(
        "--preset",
        choices=list(PRESETS),
        default=None,
        help=f"what to train and how long, a preset listed below (default {DEFAULT_PRESET}); "
        "with --runs or --rerender: whose declared endpoints to use",
    )
    p.add_argument(
        "--model-size",
        choices=["0.5b", "1.5b", "7b"],
        default="0.5b",
        help="paper preset: the Qwen2.5-Instruct size (default 0.5b)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="paper preset: run the whole pipeline with a tiny offline model and the benchmark "
        "fixtures (minutes on a CPU; checks the pipeline, not the claim)",
    )
    p.add_argument("--quick", action="store_true", help="same as --preset quick")
    p.add_argument(
        "--methods",
        help=_methods_help(),
    )
    p.add_argument("--seeds", type=int, help=_seeds_help())
    p.add_argument("--steps", type=int, help="RL steps per cell (default: the preset's)")
    p.add_argument(
        "--tuning",
        choices=["per_method", "shared", "off"],
        help="the tuning stage before the test cells (default: the preset's; docs/compare.md): "
        "per_method chooses each method's learning rate on validation problems with tuning "
        "seeds, shared one learning rate for all, off runs every method at the preset's",
    )
    p.add_argument(
        "--tuning-only",
        action="store_true",
        help="stop after the tuning stage (its method x value table: OUT/tuning/tuning.json)",
    )
    p.add_argument(
        "--stage",
        choices=_stage_names(),
        help="run one stage of a preset that declares a study (its `study:` mapping; "
        "docs/compare.md, Studies): " + _stages_help(),
    )
    p.add_argument(
        "--block",
        type=int,
        default=0,
        help="with --stage test / retest / metrics: the test block (warm start) to run (default 0)",
    )
    p.add_argument(
        "--dest",
        help="with --stage report: the report folder (default OUT/report)",
    )
    p.add_argument(
        "--out",
        help="grid directory (default runs/compare-<preset>); the report goes to OUT/report",
    )
    p.add_argument(
        "--runs", nargs="+", metavar="DIR", help="build the report from these run directories only"
    )
    p.add_argument(
        "--baseline", default="grpo", help="method the others are compared with (default grpo)"
    )
    p.add_argument(
        "--no-fast",
        action="store_true",
        help="sample with Hugging Face generate even where ict.fast applies (the toy presets' "
        "small models; the same samples, more time)",
    )
    p.add_argument("--confidence", type=float, default=0.95, help="interval level (default 0.95)")
    p.add_argument(
        "--primary",
        action="append",
        metavar="A-B@METRIC",
        help="a declared primary comparison, e.g. ict-grpo@pass@4 or ict-random_sequence@pass@1 "
        "(repeat the flag for more; METRIC: pass@K, reward or a report key); replaces the "
        "preset's list; `--primary none` declares none. Without a preset and this flag every "
        "comparison is exploratory",
    )
    p.add_argument(
        "--alpha",
        type=float,
        help=f"level of the seed-level tests (default: the preset's, {ALPHA})",
    )
    p.add_argument(
        "--margin",
        type=float,
        help=f"equivalence margin of TOST, absolute pass@k (default: the preset's, {MARGIN})",
    )
    p.add_argument(
        "--rerender",
        metavar="REPORT_DIR",
        help="rebuild the verdicts of an existing report from its report.json (per-seed values) "
        "and rewrite its report.md / report.html / report.json in place; no run directories needed",
    )
    p.add_argument("--title", help="report title")
    p.add_argument(
        "--verbose",
        action="store_true",
        help="show third-party logs and loading bars (transformers, huggingface_hub, datasets)",
    )
    p.set_defaults(func=run)


def _start_note(result: dict) -> str:
    """The report's "before RL" sentence from an evaluation result of the start model."""
    from ict.compare.grid import eval_line

    return (
        f"Before RL, the same held-out evaluation gives {eval_line(result)} "
        "(the start model: 95% bootstrap intervals over problems)."
    )


def endpoints_from(args, preset=None) -> Endpoints:
    """The declared endpoints: the preset's (`Preset.declared_endpoints`, when one is given), with
    --primary / --alpha / --margin replacing its values; none declared without a preset or flags.
    An absolute --margin replaces a preset's relative one."""
    declared = preset.declared_endpoints() if preset is not None else declare()
    primary, source = declared.primary, declared.source
    if args.primary:
        given = [p for p in args.primary if p.lower() != "none"]
        primary, source = given, "declared by --primary" if given else "--primary none"
    return declare(
        primary,
        alpha=args.alpha if args.alpha is not None else declared.alpha,
        margin=args.margin if args.margin is not None else declared.margin,
        source=source,
        relative_margin=declared.relative_margin if args.margin is None else None,
        unit=declared.unit,
    )


def _named_preset(args):
    """The preset named by --preset (or --quick) for its declared endpoints, None when neither
    is given (built without its dry run: nothing is written)."""
    from ict.compare import presets

    name = "quick" if args.quick else args.preset
    if name is None:
        return None
    takes = presets.PRESETS[name].options
    return presets.get_preset(
        name, **({"model_size": args.model_size} if "model_size" in takes else {})
    )


def run(args) -> int:
    if args.rerender:
        check_writable(args.rerender, flag="--rerender")  # rewritten in place
        from ict.report.rerender import rerender

        endpoints = endpoints_from(args, _named_preset(args))
        command = "ict " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        md = rerender(args.rerender, endpoints, command=command)
        print(f"report: {md} (verdicts re-rendered from report.json)")
        return 0
    if args.runs:
        return _report_from_runs(args)
    preset, out = _preset_and_out(args)
    if args.stage:
        return _run_stage(args, preset, out)
    if args.dest is not None:
        raise ConfigError("--dest belongs to --stage report (a grid's report goes to OUT/report)")

    preset, out = _preset_and_out(args)
    check_writable(out, flag="--out")  # read-only or full: before any cell or model loads (torch)
    from ict.compare.grid import run_grid

    methods = [m.strip() for m in args.methods.split(",") if m.strip()] if args.methods else None
    if args.seeds is not None and args.seeds < 1:
        raise ConfigError(f"--seeds must be >= 1, got {args.seeds}")
    if args.steps is not None and args.steps < 1:
        raise ConfigError(f"--steps must be >= 1, got {args.steps}")
    overrides = {"max_steps": args.steps} if args.steps else None
    with quiet_console(args.verbose):
        dirs = run_grid(
            preset,
            out,
            methods=methods,
            seeds=range(args.seeds) if args.seeds else None,
            overrides=overrides,
            log=lambda line: print(line, flush=True),
            tuning=args.tuning,
            tuning_only=args.tuning_only,
            fast=not args.no_fast,
        )
    if args.tuning_only:
        print(f"tuning: {tuning_path(out)}")
        return 0
    _grid_report(args, preset, out, dirs)
    return 0


def _run_stage(args, preset, out: Path) -> int:
    """`--stage`: one stage of the preset's study (ict.compare.study.run_stage)."""
    from ict.compare.study import run_stage

    if args.methods or args.seeds is not None or args.steps is not None or args.tuning:
        raise ConfigError(
            "--stage runs the study as its preset declares it: drop --methods / --seeds / "
            "--steps / --tuning"
        )
    with quiet_console(args.verbose):
        run_stage(preset, args.stage, out, dest=args.dest, block=args.block,
                  fast=not args.no_fast, log=lambda line: print(line, flush=True))  # fmt: skip
    return 0


def _report_from_runs(args) -> int:
    """`--runs`: the report from existing run directories only."""
    out = Path(args.out or "compare-report")
    check_writable(out, flag="--out")
    from ict.report.comparison import build_report

    md = build_report(
        args.runs,
        out,
        title=args.title or "ict compare",
        baseline=args.baseline,
        confidence=args.confidence,
        endpoints=endpoints_from(args, _named_preset(args)),
    )
    print(f"report: {md} and {md.with_suffix('.html')}")
    return 0


def _preset_and_out(args):
    """(the Preset the flags name, the grid directory). The preset's own options come from the
    flags of the same name (--model-size, --dry-run; the grid directory is its work_dir)."""
    from ict.compare import presets

    name = "quick" if args.quick else (args.preset or DEFAULT_PRESET)
    takes = presets.PRESETS[name].options if name in presets.PRESETS else ()
    if args.dry_run and "dry_run" not in takes:
        owners = [n for n, entry in presets.PRESETS.items() if "dry_run" in entry.options]
        raise ConfigError(f"--dry-run belongs to --preset {' / '.join(owners)}")
    default_out = f"runs/compare-{name}{'-dry-run' if args.dry_run else ''}"
    out = Path(args.out or default_out)
    flags = {"model_size": args.model_size, "dry_run": args.dry_run, "work_dir": out}
    return presets.get_preset(name, **{k: v for k, v in flags.items() if k in takes}), out


def _grid_notes(preset, out: Path) -> list[str]:
    """The report's notes: the preset, and the start point's evaluation (warm start or model)."""
    notes = [f"Preset **{preset.name}**: {preset.description}"]
    warm = out / "warm_start.json"
    if warm.exists():
        info = read_json_required(warm)
        notes.append(
            f"Supervised warm start: {info['steps']} steps, sampled accuracy {info['accuracy']:.2f} "
            "on 200 training problems before RL (every cell starts from these weights)."
        )
    start = out / "start_eval.json"
    if start.exists():
        notes.append(_start_note(read_json_required(start)))
    return notes


def _grid_report(args, preset, out: Path, dirs: list[Path]) -> None:
    """OUT/report from the grid's cells, and the paper's table when the preset names benchmarks."""
    from ict.report.comparison import build_report

    md = build_report(
        dirs,
        out / "report",
        title=args.title or f"ict compare - {preset.name}",
        baseline=args.baseline,
        confidence=args.confidence,
        notes=_grid_notes(preset, out),
        endpoints=endpoints_from(args, preset),
        tuning=read_json_if_present(tuning_path(out)),
    )
    print(f"report: {md} and {md.with_suffix('.html')}")
    if preset.eval.benchmarks:  # the paper's table: P@1 / P@4 per benchmark and their average
        from ict.eval.paper import write_grid_paper_table

        print(write_grid_paper_table(dirs, out / "report"))
