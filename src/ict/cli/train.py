"""`ict train`: train a model with ICT or a baseline. Flags override --config YAML override defaults.

Every TrainConfig field is a flag (`learning_rate` -> `--learning-rate`), grouped by section in
`--help`. Heavy libraries (torch, transformers) are imported inside `run`, so `--help` needs none.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

EPILOG = """\
examples:
  ict train                                   # embedded default: SmolLM2-135M-Instruct, ict, addition
                                              # (~5 min on 2 CPU cores with native bf16, ~10 min in float32)
  ict train --method grpo --max-steps 10      # a baseline, shorter
  ict train --model Qwen/Qwen2.5-0.5B-Instruct --method ict+stapo --device cuda
  ict train --config my.yaml --learning-rate 1e-6   # YAML (flat or grouped by section), a flag on top
  ict train --resume runs/<run>               # continue a run from its last checkpoint
"""


def methods_help(width: int = 100) -> str:
    """The epilog's list of the methods and selectors (ict.cli.catalog: generated from the
    registries ict.methods.METHODS and ict.select.SELECTORS), one method a line."""
    import textwrap

    from ict.cli.catalog import METHODS, SELECTORS

    pad = max(len(name) for name, _, _ in METHODS) + 4
    lines = ["methods (--method NAME):"]
    for name, _, description in METHODS:
        lines += textwrap.wrap(
            description, width, initial_indent=f"  {name:<{pad - 2}}", subsequent_indent=" " * pad
        )
    selectors = ", ".join(name for name, *_ in SELECTORS)
    lines += textwrap.wrap(
        f"or a selector ({selectors}), or a composition such as ict+stapo (the method's "
        "selection intersected with the other parts').",
        width,
        initial_indent="  ",
        subsequent_indent="  ",
    )
    return "\n".join(lines) + "\n"


def _method_flag_help() -> str:
    from ict.cli.catalog import METHODS

    names = " | ".join(name for name, _, _ in METHODS)
    return f"method: {names} | a selector | a composition such as ict+stapo (listed below)"


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_parser(subparsers, summary: str = "train a model") -> argparse.ArgumentParser:
    from ict.train.config import SECTIONS, TrainConfig

    parser = subparsers.add_parser(
        "train",
        help=summary,
        description=f"{summary[0].upper()}{summary[1:]}.",
        epilog=EPILOG + methods_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        argument_default=argparse.SUPPRESS,
    )
    general = parser.add_argument_group("config files and resuming")
    general.add_argument(
        "--config",
        metavar="FILE",
        help="YAML config (flat or grouped by section); a packaged preset name such as 'default' also works",
    )
    general.add_argument(
        "--resume",
        metavar="RUN_DIR",
        help="continue RUN_DIR from its last checkpoint (its config.yaml; flags still override)",
    )
    general.add_argument(
        "--verbose",
        action="store_true",
        help="show third-party logs and progress bars (transformers' weight loading, the GGUF "
        "de-quantisation, huggingface_hub, datasets); ict's own step bar shows either way",
    )
    groups = {
        name: parser.add_argument_group(f"{name}: {title}") for name, title in SECTIONS.items()
    }
    for field in dataclasses.fields(TrainConfig):
        group, help_text = groups[field.metadata["section"]], field.metadata["help"]
        if field.name == "method":  # the registry's names (ict.cli.catalog), not a typed list
            help_text = _method_flag_help()
        help_text = help_text.replace("%", "%%")  # argparse %-formats help strings
        default = (
            field.default if field.default is not dataclasses.MISSING else field.default_factory()
        )
        annotation = str(field.type)
        if annotation == "bool":
            group.add_argument(
                _flag(field.name),
                dest=field.name,
                action=argparse.BooleanOptionalAction,
                help=f"{help_text} (default: {str(default).replace('%', '%%')})",
            )
        else:
            metavar = {"int": "N", "float": "X", "dict": "YAML", "list": "YAML"}.get(
                annotation.replace("| None", "").strip(), "STR"
            )
            group.add_argument(
                _flag(field.name),
                dest=field.name,
                metavar=metavar,
                help=f"{help_text} (default: {str(default).replace('%', '%%')})",
            )
    parser.set_defaults(func=run)
    return parser


def resolve_config(args: argparse.Namespace):
    """TrainConfig from (run dir config | --config file) + flags; returns (config, resume_dir).

    Every value of a file is type-checked, whether or not a flag overrides it. A run directory's
    config.yaml gives the options as that run chose them (its `resolved:` and `facts:` sections
    are for reading), so `--config RUN/config.yaml --method X` runs X as registered; a resumed run
    keeps its method."""
    from ict.errors import ConfigError, UserError
    from ict.train.config import RESOLVED, TrainConfig, coerce, flatten, load_yaml, preset_path

    names = TrainConfig.field_names()
    overrides = {name: getattr(args, name) for name in names if hasattr(args, name)}

    def read(path: Path) -> dict:
        raw = load_yaml(path)
        flat = flatten(raw, source=str(path))
        flat = {k: coerce(k, v, source=str(path)) for k, v in flat.items()}
        method = overrides.get("method")
        if (
            method is not None
            and method != flat.get("method", "ict")
            and isinstance(raw, dict)
            and "facts" in raw
            and RESOLVED not in raw
        ):  # an older run's config.yaml: its method's settings cannot be told from chosen ones
            raise ConfigError(
                f"{path} was written before ict kept a run's chosen settings apart from its "
                f"method's, so it cannot be reused for --method {method}: delete its method "
                "section's ratio/scope/reference/loss/warm-up lines, or start from a preset"
            )
        return flat

    resume = getattr(args, "resume", None)
    base: dict = {}
    if resume:
        run_dir = Path(resume)
        if not (run_dir / "config.yaml").is_file():
            raise UserError(
                f"--resume {run_dir}: no config.yaml there; pass a run directory written by `ict train`"
            )
        base = read(run_dir / "config.yaml")
        base["output_dir"] = str(run_dir)
        recorded = base.get("method", "ict")
        if "method" in overrides and overrides["method"] != recorded:
            raise ConfigError(
                f"--resume {run_dir} continues a {recorded} run and keeps its method: drop "
                f"--method {overrides['method']}, or start a new run with --config "
                f"{run_dir / 'config.yaml'} --method {overrides['method']}"
            )
    config_file = getattr(args, "config", None)
    if config_file:
        path = Path(config_file)
        if not path.exists() and not path.suffix:
            try:
                path = preset_path(config_file)
            except ConfigError:
                raise ConfigError(unknown_config_text(config_file)) from None
        base.update(read(path))
    if resume and "output_dir" in overrides and Path(overrides["output_dir"]) != Path(resume):
        raise ConfigError("--resume continues the run in place; drop --output-dir")
    return TrainConfig.from_dict({**base, **overrides}, source="--config / flags"), resume


def unknown_config_text(name: str) -> str:
    """The one line for a --config that is neither a file nor a packaged preset: the packaged
    presets, and `ict compare --preset NAME` when NAME is a comparison preset."""
    from ict.compare.presets import PRESETS
    from ict.train.config import packaged_presets

    text = (
        f"--config {name}: no such file or packaged preset; packaged presets: "
        f"{', '.join(packaged_presets())}, or pass a YAML file"
    )
    if name in PRESETS:
        text += f" ({name} is a comparison preset: ict compare --preset {name})"
    return text


def run(args: argparse.Namespace) -> int:
    import logging
    import os

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from ict.files import check_writable

    resume_dir, output_dir = getattr(args, "resume", None), getattr(args, "output_dir", None)
    if resume_dir and Path(resume_dir).is_dir():  # read-only or full: before the config's
        check_writable(resume_dir, flag="--resume")  # checks import torch
    elif output_dir and not resume_dir:
        check_writable(output_dir, flag="--output-dir")
    config, resume = resolve_config(args)
    check_writable(config.output_dir or "runs", flag="--output-dir")  # e.g. a --config file's
    from ict.models import check_model_path
    from ict.train.outputs import check_report_to

    check_report_to(config.report_to, config.wandb_mode)  # before torch, the task or the model
    check_model_path(config.model)  # a mistyped local path: at once, not tried as a hub id
    verbose = getattr(args, "verbose", False)
    from tqdm.contrib.logging import logging_redirect_tqdm

    from ict.console import quiet_console
    from ict.train import Trainer

    logging.basicConfig(  # ict's INFO lines; other libraries' only with --verbose
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    logging.getLogger("ict").setLevel(logging.INFO)
    with quiet_console(verbose), logging_redirect_tqdm():
        trainer = Trainer(config, resume=bool(resume))  # logs the precision line (once)
        print(
            f"ict train: method {config.method}, model {config.model or 'smollm2-135m-instruct (embedded)'}, "
            f"task {config.task}, {config.max_steps} steps; outputs in {trainer.run_dir}",
            flush=True,
        )
        try:
            summary = trainer.train()
        except OSError as err:
            failure = _write_failure(err, trainer.run_dir)
            if failure is err:
                raise
            raise failure from err
    paths = summary.get("paths", {})
    print(f"\ndone: {summary.get('steps')} steps in {summary.get('seconds_this_session', 0):.0f} s")
    heldout = summary.get("heldout")
    if heldout:
        st = heldout["settings"]
        print(
            f"held-out: {heldout['problems']} {heldout['benchmark']} problems x {st['n']} samples "
            f"(temperature {st['temperature']}, {st['max_new_tokens']} new tokens, seed {st['seed']}); "
            f"{heldout['method']}"
        )
    print(f"run directory: {paths.get('run_dir')}")
    for key in ("metrics", "samples", "checkpoint", "plots", "token_map"):
        if paths.get(key):
            print(f"  {key:10s} {paths[key]}")
    print(f"  summary    {Path(paths.get('run_dir', '.')) / 'summary.json'}")
    print(f"next: ict eval --model {paths.get('run_dir')}   |   ict inspect {paths.get('run_dir')}")
    print(summary.get("headline", ""))
    return 0


def _write_failure(err: OSError, run_dir: Path) -> Exception:
    """A write that failed during training (ict.files.is_write_failure: the disk filled, the
    location turned read-only) as one line naming the last checkpoint, which a failed save
    leaves intact (ict.train.checkpoint.save_checkpoint); any other OSError as it is."""
    from ict.files import is_write_failure, latest_checkpoint, write_failure

    if not is_write_failure(err):
        return err
    last = latest_checkpoint(run_dir)
    after = (
        f"the last checkpoint {last} is intact: `ict train --resume {run_dir}` continues from it"
        if last is not None
        else "no checkpoint was written yet: start again with a writable --output-dir"
    )
    return write_failure(err, after=after)
