"""Grid presets for `ict compare`: what is trained, for how long, and how it is evaluated.

The shipped presets are YAML files, package data in ict/configs/presets/<name>.yaml (read those
for the values and the reasons behind them):

    toy, toy-cot, toy-cot-long, quick   tiny transformers warm-started on the toy tasks (CPU)
    smollm, smollm-cot                  the embedded SmolLM2-135M-Instruct (CPU, slow)
    paper                               the paper's grid on Qwen2.5-Instruct (GPUs; --dry-run: CPU)

A file holds the Preset's fields (`methods`, `seeds`, `primary`, `alpha`, `equivalence_margin`,
`train`: TrainConfig fields shared by every cell, `method_train`: per-method overrides, `eval`:
EvalSpec fields, `warm`: WarmStart fields or absent, `study`: a study's stages, ict.compare.study), and may name a preset it `extends` (its
values, with this file's on top: `train`, `eval` and `warm` merged key by key). `order` places it
in `ict compare --help`. The paper's file also names its `model_sizes` (--model-size) and its
`dry_run` overrides (--dry-run: `model: tiny` is the tiny offline model saved under the grid
directory, `data_dir: fixtures` the benchmark fixtures shipped with ict). A preset's one-line
summary and its description are generated from its values (`summary`, `describe`), so they
cannot disagree with them.

Every preset is registered in PRESETS (name -> PresetEntry: the summary, the function that
builds a fresh Preset, the options it takes); `get_preset`, `ict compare --preset NAME` and
`ict compare --help` read that registry, and `register_preset` adds one from Python.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import yaml

from ict.compare.tuning import TuningSpec
from ict.errors import ConfigError
from ict.evidence.endpoints import ALPHA, MARGIN, declare
from ict.testing import save_tiny_model
from ict.train.config import TrainConfig
from ict.train.problems import task_spec

# the benchmark fixture files the paper dry run reads (package data: they ship with the wheel)
FIXTURES_DIR = Path(__file__).resolve().parent / "fixtures" / "benchmarks"
# the shipped presets' files (package data)
PRESET_DIR = Path(__file__).resolve().parent.parent / "configs" / "presets"
# the default methods (ict.methods): the baselines, the paper's ICT and the batch-mean guess
METHODS = ["grpo", "entropy", "stapo", "random", "ict", "ict_batch_mean"]


@dataclass(frozen=True)
class WarmStart:
    """Supervised warm start of the toy model (all fields enter the cache key)."""

    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 4
    intermediate_size: int = 128
    max_steps: int = 1500
    batch_size: int = 64
    learning_rate: float = 3e-3
    # stop once sampled (T = 1) accuracy on 200 training problems reaches this
    target_accuracy: float = 0.5
    check_every: int = 50
    seed: int = 0


@dataclass
class EvalSpec:
    """Final held-out evaluation of every cell: `size` problems, `n` samples each, pass@k for `ks`.
    Everything else (top-p, stop strings, prompt rendering, generation batch) is the cells' own
    evaluation settings (ict.compare.grid.final_evaluation)."""

    size: int | None = 100  # problems per benchmark (None: all)
    n: int = 8
    ks: tuple[int, ...] = (1, 2, 4, 8)
    temperature: float | None = None  # None: the cells' sampling temperature
    seed: int = 1234
    benchmarks: tuple[str, ...] = ()  # benchmark specs; () = the training task's held-out split
    max_new_tokens: int | None = None  # None: the cells' training response budget


@dataclass
class Preset:
    name: str
    description: str
    train: dict  # TrainConfig overrides shared by every cell
    eval: EvalSpec
    methods: list[str] = field(default_factory=lambda: list(METHODS))
    seeds: int = 3
    warm: WarmStart | None = None  # cells start from a supervised warm start on the task
    method_train: dict[str, dict] = field(default_factory=dict)  # per-method TrainConfig overrides
    data_dir: str | None = None  # local benchmark files, passed to training and evaluation
    # declared endpoints (ict.evidence.endpoints), fixed before any cell runs: the comparisons
    # that carry the claims ("A-B@METRIC"; Holm-adjusted as one family), alpha and the
    # equivalence margin (absolute pass@k); every other comparison is exploratory
    primary: list[str] = field(default_factory=list)
    alpha: float = ALPHA
    equivalence_margin: float = MARGIN
    # when set: the margin is this fraction of the baseline's measured change from the start on
    # the compared key (ict.evidence.endpoints.Endpoints.relative_margin)
    relative_margin: float | None = None
    # what the seed-level test replicates: "seed" (paired t over seeds, blocked by warm start
    # when there are several) or "warm start" (the warm starts' mean differences are the units;
    # ict.evidence.seed_tests.unit_test); a study with the warm start as its unit needs several
    unit: str = "seed"
    # the tuning stage (ict.compare.tuning): each method's learning rate chosen on validation
    # problems with tuning seeds before the test cells run; None: every method at train's lr
    tuning: TuningSpec | None = None
    # a study's stages, rules, metrics and report sections (ict.compare.study.StudySpec); None:
    # the preset is one grid
    study: dict | None = None

    def declared_endpoints(self):
        """The preset's declared endpoints (ict.evidence.endpoints.declare)."""
        return declare(
            self.primary, alpha=self.alpha, margin=self.equivalence_margin,
            source=f"declared by preset {self.name}", relative_margin=self.relative_margin,
            unit=self.unit,
        )  # fmt: skip

    def cell_train(self, method: str) -> dict:
        """The TrainConfig fields of a `method` cell: shared settings, then the method's own."""
        return {**self.train, **self.method_train.get(method, {}), "method": method}

    @property
    def task(self) -> str:
        """The cells' ict.data task spec: `train["task"]` (TrainConfig's default task if unset)
        with `train["task_config"]` as options."""
        return task_spec(settings(self.train))


@dataclass(frozen=True)
class PresetEntry:
    """A registered preset: `build(**options)` returns a fresh Preset; `options` names the keyword
    options it takes (the paper's model_size, dry_run, work_dir); `summary`: one line for --help
    (for the shipped presets, generated from their values: `summary`)."""

    name: str
    summary: str
    build: Callable[..., Preset]
    options: tuple[str, ...] = ()


PRESETS: dict[str, PresetEntry] = {}


def register_preset(name: str, summary: str, *, options: tuple[str, ...] = ()):
    """Decorator: register a function returning a fresh Preset under `name` (see PresetEntry)."""

    def register(build: Callable[..., Preset]) -> Callable[..., Preset]:
        PRESETS[name] = PresetEntry(name, summary, build, tuple(options))
        return build

    return register


def get_preset(name: str, **options) -> Preset:
    """A fresh Preset by name (PRESETS); ConfigError listing the names when unknown, or naming the
    options a preset does not take.

    `paper` takes `model_size` ("0.5b", "1.5b", "7b"), `dry_run` and `work_dir` (the grid
    directory: the dry run saves its tiny model there)."""
    entry = PRESETS.get(name)
    if entry is None:
        raise ConfigError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    unknown = sorted(set(options) - set(entry.options))
    if unknown:
        takes = f"takes only {', '.join(entry.options)}" if entry.options else "takes no options"
        raise ConfigError(f"preset {name!r} {takes}, got {unknown}")
    return entry.build(**options)


# ---- the shipped presets: YAML files ----------------------------------------------------------
def read_preset_file(name: str) -> dict:
    """The values of ict/configs/presets/<name>.yaml, its `extends` chain merged in (the
    parent's values first; `train`, `eval` and `warm` merged key by key)."""
    path = PRESET_DIR / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError(f"no preset file {path} (ict's package data: reinstall ict)")
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    parent = data.pop("extends", None)
    return merge(read_preset_file(parent), data) if parent else data


def merge(base: dict, top: dict) -> dict:
    """`top` over `base`: the keys of `top` win; `train`, `eval`, `warm` and `model_sizes`
    (mappings) are merged key by key."""
    out = copy.deepcopy(base)
    for key, value in top.items():
        if key in ("train", "eval", "warm", "model_sizes") and isinstance(out.get(key), dict):
            out[key] = {**out[key], **(value or {})}
        else:
            out[key] = copy.deepcopy(value)
    return out


OPTION_KEYS = ("order", "model_sizes", "dry_run", "model", "name")  # not Preset fields


def preset_from_values(
    name: str, data: dict, *, data_dir: str | None = None, model_label: str | None = None
) -> Preset:
    """A Preset of a file's values (its description generated from them; `model_label`: what
    the description calls the model instead of `train["model"]`)."""
    fields = {f.name for f in dataclasses.fields(Preset)} - {"name", "description"}
    unknown = sorted(set(data) - fields - set(OPTION_KEYS))
    if unknown:
        raise ConfigError(f"preset {name}: unknown keys {unknown}; a preset has {sorted(fields)}")
    warm, tuning = data.get("warm"), data.get("tuning")
    preset = Preset(
        name=data.get("name", name),
        description="",
        train=dict(data.get("train") or {}),
        eval=EvalSpec(**{k: tuple(v) if isinstance(v, list) else v
                         for k, v in (data.get("eval") or {}).items()}),
        methods=list(data.get("methods", METHODS)),
        seeds=int(data.get("seeds", 3)),
        warm=None if warm is None else WarmStart(**warm),
        method_train={m: dict(o) for m, o in (data.get("method_train") or {}).items()},
        data_dir=data_dir,
        primary=list(data.get("primary") or []),
        alpha=float(data.get("alpha", ALPHA)),
        equivalence_margin=float(data.get("equivalence_margin", MARGIN)),
        relative_margin=data.get("relative_margin"),
        unit=str(data.get("unit", "seed")),
        tuning=None if tuning is None else tuning_spec(tuning),
        study=data.get("study"),
    )  # fmt: skip
    preset.description = describe(preset, model=model_label)
    return preset


def tuning_spec(values: dict) -> TuningSpec:
    """A file's `tuning` mapping as a TuningSpec (lists become tuples)."""

    def frozen(v):
        return tuple(v) if isinstance(v, list) else v

    out = {k: frozen(v) for k, v in values.items() if k != "per_method"}
    per_method = {m: tuple(g) for m, g in (values.get("per_method") or {}).items()}
    return TuningSpec(**out, per_method=per_method)


def build_shipped(name: str, *, model_size: str | None = None, dry_run: bool = False,
                  work_dir: str | os.PathLike | None = None) -> Preset:  # fmt: skip
    """The shipped preset `name` with its options applied (see the module docstring)."""
    data = read_preset_file(name)
    sizes = data.get("model_sizes") or {}
    if model_size is not None:
        if model_size not in sizes:
            raise ConfigError(
                f"unknown {name} model size {model_size!r}; choose one of {', '.join(sizes)}"
            )
        data["train"]["model"] = sizes[model_size]
    data_dir = label = None
    if dry_run:
        data = merge(data, data.get("dry_run") or {})
        label = "the tiny offline model" if data.get("model") == "tiny" else None
        data_dir = dry_run_files(data, work_dir)
    return preset_from_values(name, data, data_dir=data_dir, model_label=label)


def dry_run_files(data: dict, work_dir) -> str | None:
    """Resolve a dry run's `model: tiny` (the tiny offline model, saved under `work_dir`) and
    `data_dir: fixtures` (FIXTURES_DIR) in `data`; returns the data directory."""
    if data.get("model") == "tiny":
        if work_dir is None:
            raise ConfigError("the paper dry run needs a work_dir for its tiny model")
        model_dir = Path(work_dir) / "tiny-model"
        if not (model_dir / "config.json").is_file():
            save_tiny_model(model_dir)
        data["train"]["model"] = str(model_dir)
    if data.get("data_dir") == "fixtures":
        if not FIXTURES_DIR.is_dir():
            raise ConfigError(
                f"the paper dry run reads the benchmark fixtures in {FIXTURES_DIR}, which this "
                "install lacks (they are package data of ict: reinstall it)"
            )
        return str(FIXTURES_DIR)
    return data.get("data_dir")


# ---- descriptions, generated from the values --------------------------------------------------
def _model_text(preset: Preset) -> str:
    """The cells' start model in words: the warm start's shape, or the model's name."""
    if preset.warm is not None:
        w = preset.warm
        return (
            f"a {w.num_layers}-layer {w.hidden_size}-wide transformer warm-started from scratch "
            f"by supervised learning until {w.target_accuracy:.0%} of its sampled answers are right"
        )
    model = preset.train.get("model")
    return model or "the embedded SmolLM2-135M-Instruct"


def settings(values: dict) -> SimpleNamespace:
    """TrainConfig's defaults with `values` on top, unvalidated: what a description reads,
    without building a TrainConfig (its checks import torch, and `ict --help` lists presets
    without it; the grid validates every cell's TrainConfig before it runs)."""
    defaults = {
        f.name: f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        for f in dataclasses.fields(TrainConfig)
    }
    return SimpleNamespace(**{**defaults, **values})


def _eval_text(preset: Preset, config: SimpleNamespace) -> str:
    spec = preset.eval
    if spec.benchmarks:
        each = "every problem" if spec.size is None else f"{spec.size} problems each"
        where = f"{each} of {', '.join(spec.benchmarks)}"
    else:
        each = "every" if spec.size is None else f"{spec.size}"
        where = f"{each} held-out problems of the task"
    temperature = config.temperature if spec.temperature is None else spec.temperature
    ks = ", ".join(f"pass@{k}" for k in spec.ks)
    return f"{ks} on {where}, n = {spec.n}, temperature {temperature:g}"


def describe(preset: Preset, *, model: str | None = None) -> str:
    """The preset's description, from its values: model and task, budget per cell, methods and
    seeds, the final (and periodic) evaluation, the declared primary comparisons, the tuning.
    `model`: the model's words (default: the warm start's shape or `train["model"]`)."""
    config = settings(preset.cell_train(preset.methods[0]))
    updates = ""
    if config.mini_batch_size:
        batch = config.prompts_per_step * config.num_generations  # TrainConfig.batch_size
        per_step = config.num_epochs * -(-batch // config.mini_batch_size)
        updates = f", {per_step} updates per step"
    periodic = (
        f" Every {config.eval_every} steps: pass@k on {config.eval_size} held-out problems, "
        f"n = {config.eval_num_samples}."
        if config.eval_every
        else ""
    )
    primary = f" Primary comparisons: {', '.join(preset.primary)}." if preset.primary else ""
    tuning = preset.tuning
    if tuning is not None:
        grid = ", ".join(f"{v:g}" for v in tuning.values)
        seeds = ", ".join(str(s) for s in tuning.seeds)
        primary += (
            f" Each method's {tuning.param.replace('_', ' ')} tuned on validation problems "
            f"({grid}; tuning seeds {seeds}; {tuning.mode.replace('_', ' ')})."
        )
    return (
        f"{model or _model_text(preset)} on {preset.task}; {config.max_steps} RL steps of "
        f"{config.prompts_per_step} prompts x {config.num_generations} samples at lr "
        f"{config.learning_rate:g}{updates}; methods {', '.join(preset.methods)}; "
        f"{preset.seeds} seeds. Final evaluation: {_eval_text(preset, config)}.{periodic}"
        f"{primary}"
    )


def summary(preset: Preset, options: dict | None = None) -> str:
    """One line for `ict compare --help` (which adds the grid: methods x seeds, steps): the model,
    the task family (and its prompt template), the benchmarks, the tuning stage and the file's
    options (`model_sizes`, `dry_run`), from the values."""
    options = options or {}
    if preset.warm is not None:
        w = preset.warm
        model = f"{w.num_layers}-layer {w.hidden_size}-wide transformer (supervised warm start)"
    else:
        model = _model_text(preset)
    spec = preset.train.get("task", "ict train's default task")
    task, _, query = spec.partition("?")
    template = dict(p.partition("=")[::2] for p in query.split("&")).get("template")
    text = f"{model} on {task}{f' ({template})' if template else ''}"
    if preset.eval.benchmarks:
        text += f", evaluated on {len(preset.eval.benchmarks)} benchmarks"
    if preset.tuning is not None:
        text += f", each method's {preset.tuning.param.replace('_', ' ')} tuned"
    if options.get("model_sizes"):
        text += f" (--model-size {'/'.join(options['model_sizes'])}"
        text += "; --dry-run: CPU)" if options.get("dry_run") else ")"
    return text


def _register_shipped() -> None:
    """PRESETS gets every ict/configs/presets/*.yaml, in the files' `order`."""
    found = []
    for path in PRESET_DIR.glob("*.yaml"):
        data = read_preset_file(path.stem)
        options = ("model_size", "dry_run", "work_dir") if "dry_run" in data else ()
        found.append((data.get("order", 1000), path.stem, options, data))
    for _, name, options, data in sorted(found, key=lambda f: f[:2]):

        def build(_name=name, **kw) -> Preset:
            return build_shipped(_name, **kw)

        register_preset(name, summary(build_shipped(name), data), options=options)(build)


_register_shipped()
