"""Training configuration: one flat dataclass (TRL `GRPOConfig` style), grouped into sections.

Precedence: command-line flags override the YAML file (`--config`), which overrides the defaults
below. The YAML file may be flat (`learning_rate: 1e-6`) or grouped by section
(`optim: {learning_rate: 1e-6}`); `config.yaml` in a run directory is written grouped. Every field
carries its section and help text in `metadata`, from which `ict train --help` is generated.

A run's config.yaml records what was chosen apart from what the method implied: the sections hold
the options as given (a method setting left none stays none: "the method's"), `resolved:` the
values the method filled in for this run, and `facts:` what the run found (the precision). Both
are for reading; `--config` ignores them, so `--config RUN/config.yaml --method X` runs X as X is
registered, not with the settings RUN's method implied.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ict.data.tasks import SPLITS
from ict.errors import ConfigError
from ict.evidence.health import HealthCriterion
from ict.files import write_atomic
from ict.methods.options import (
    MethodOptions,
    check_engine_advantage,
    resolve_method,
    validate_method_options,
)
from ict.precision import CHOICES as PRECISION_CHOICES

SECTIONS = {
    "model": "model and numerics",
    "data": "task / dataset",
    "rollout": "rollouts (sampling)",
    "method": "token selection and statistics (METHOD.md)",
    "loss": "advantages and policy loss",
    "optim": "optimisation",
    "run": "run length, outputs, checkpoints, logging",
    "health": "entropy health warnings",
}

SCHEDULERS = ("constant", "linear", "cosine")
# registry choices checked by validate_method_options (None there means "the method's")
METHOD_CHOICE_FIELDS = (
    "reference", "scope", "granularity", "loss_agg", "normalize_by", "loss_mode", "advantage",
)  # fmt: skip
REPORT_TO = ("none", "tensorboard", "wandb")
# config.yaml's read-only sections: the method's settings as the run resolved them, and what the
# run found about itself; written for reading, ignored on input
RESOLVED, FACTS = "resolved", "facts"
READ_ONLY = (RESOLVED, FACTS)
_HEADER = (
    "# ict train config. The sections hold the options as chosen (none = the method's); "
    "`resolved:`\n# is what the method filled in for this run and `facts:` what the run found: "
    "both are for\n# reading, and --config ignores them.\n"
)
WANDB_MODES = ("online", "offline", "disabled")

HEALTH = HealthCriterion()  # the entropy-health defaults (ict.evidence.health)


def registry_choices() -> dict[str, tuple[str, ...]]:
    """The allowed values of the options whose names live in a registry (the only lists)."""
    from ict.loss import ADVANTAGE_ESTIMATORS, KL_ESTIMATORS, LOSS_AGGREGATIONS
    from ict.loss.policy import KL_ON, NORMALIZE_BY
    from ict.select import GRANULARITIES, SCOPES
    from ict.stats import REFERENCES

    return {
        "reference": tuple(REFERENCES),
        "scope": tuple(SCOPES),
        "granularity": tuple(GRANULARITIES),
        "advantage": tuple(ADVANTAGE_ESTIMATORS),
        "loss_agg": tuple(LOSS_AGGREGATIONS),
        "normalize_by": tuple(NORMALIZE_BY),
        "kl_estimator": tuple(KL_ESTIMATORS),
        "kl_on": tuple(KL_ON),
    }


def _f(default: Any, section: str, help: str, **extra) -> Any:
    meta = {"section": section, "help": help, **extra}
    if isinstance(default, (dict, list)):
        return field(default_factory=lambda d=default: type(d)(d), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class TrainConfig(MethodOptions):
    """Every option of `ict train`. Defaults = the embedded default run (METHOD.md defaults).

    The method options (method, ratio, scope, reference, loss_agg, normalize_by,
    dense_warmup_steps, granularity, STAPO thresholds, selector_options) are `MethodOptions`'s,
    the same fields TRL's ICTGRPOConfig and verl's `ict:` section have."""

    # model
    model: str | None = _f(
        None,
        "model",
        "HF hub id, local model dir or ict run dir; none = embedded SmolLM2-135M-Instruct (GGUF)",
    )
    dtype: str = _f(
        "float32",
        "model",
        "weight dtype (float32 | bfloat16 | float16); float32 master weights are safest",
    )
    device: str = _f("auto", "model", "auto (cuda if available, else cpu) | cpu | cuda | cuda:N")
    autocast: str = _f(
        "auto",
        "model",
        "autocast for the statistics and update passes: auto (bf16 where the hardware computes it natively, else float32) | bf16 | fp16 | off",
    )
    rollout_autocast: bool = _f(
        False, "model", "also autocast generation (faster, slightly off-policy)"
    )
    chat_template: bool = _f(
        True, "model", "wrap prompts in the tokenizer's chat template when it has one"
    )
    system_prompt: str | None = _f(
        None, "model", "optional system message for chat-templated prompts"
    )
    # data
    task: str = _f(
        'rg:basic_arithmetic?template=sum_2shot&min_terms=2&max_terms=2&min_digits=1&max_digits=2&operators=["%2B"]&allow_parentheses=false&allow_negation=false',
        "data",
        "task spec (ict.data.load_task): rg:<reasoning-gym task>?<options>, a benchmark, hf:<id>?..., or a local .jsonl/.parquet file?question=<col>&answer=<col>",
    )
    task_config: dict = _f(
        {},
        "data",
        "extra task options appended to the spec as ?key=value, e.g. '{min_terms: 3}' or '{question: problem, answer: solution}'",
    )
    train_size: int = _f(
        2000,
        "data",
        "number of training problems (procedural tasks are generated with train seeds)",
    )
    data_seed: int = _f(
        0, "data", "seed of the problem generator (held-out problems use disjoint seeds)"
    )
    reward_timeout_s: float = _f(
        5.0, "data", "per-sample time limit of the reward function; a timeout or error scores 0"
    )
    # rollout
    prompts_per_step: int = _f(8, "rollout", "B: prompts per training step")
    num_generations: int = _f(8, "rollout", "G: sampled responses per prompt")
    temperature: float = _f(1.0, "rollout", "sampling temperature (statistics use the same T)")
    top_p: float = _f(1.0, "rollout", "nucleus sampling threshold")
    max_new_tokens: int = _f(24, "rollout", "maximum response length in tokens")
    generation_batch_size: int = _f(64, "rollout", "sequences generated at once")
    stop: list = _f(
        ["</answer>"], "rollout", "strings that end a response (kept in it); [] = only EOS"
    )
    dynamic_sampling: bool = _f(
        False,
        "rollout",
        "DAPO's dynamic sampling: each step draws further prompts, B at a time, until it holds B groups whose rewards differ (or max_generation_rounds; ict.train.refill)",
    )
    max_generation_rounds: int = _f(
        10, "rollout", "with dynamic_sampling: the most generation rounds of B prompts per step"
    )
    # method: the MethodOptions fields (ict.methods.options), shared with TRL and verl
    stats_chunk_size: int = _f(
        1024, "method", "rows of the vocabulary-wide tensors processed at once (memory bound)"
    )
    # loss
    drop_zero_variance_groups: bool = _f(
        False,
        "loss",
        "leave groups whose rewards are all equal out of the update (the batch shrinks; dynamic_sampling refills it)",
    )
    eps_low: float | None = _f(
        None, "loss", "lower clip range (none = the method's: 0.2; clip_cov 1, its authors')"
    )
    eps_high: float | None = _f(
        None, "loss", "upper clip range (none = the method's: 0.28, clip-higher; clip_cov 1)"
    )
    dual_clip: float | None = _f(
        None, "loss", "dual-clip constant c for A < 0 (e.g. 3.0); none = off"
    )
    skip_zero_advantage: bool = _f(
        True,
        "loss",
        "leave rows with advantage 0 out of the update's forward and backward when no KL or entropy term reads them (same gradient, less compute)",
    )
    kl_coef: float = _f(
        0.0, "loss", "beta of the KL penalty to a frozen reference model (0 = no reference model)"
    )
    kl_estimator: str = _f("k3", "loss", "KL estimator: k1 | k3")
    kl_on: str = _f("selected", "loss", "KL over selected | valid tokens")
    # optim
    learning_rate: float = _f(2e-5, "optim", "AdamW peak learning rate")
    weight_decay: float = _f(0.0, "optim", "AdamW weight decay")
    adam_beta1: float = _f(0.9, "optim", "AdamW beta1")
    adam_beta2: float = _f(0.99, "optim", "AdamW beta2")
    adam_epsilon: float = _f(1e-8, "optim", "AdamW epsilon")
    warmup_steps: int = _f(2, "optim", "linear warm-up, in optimizer steps")
    lr_scheduler: str = _f(
        "constant",
        "optim",
        "after warm-up: constant | linear | cosine (decay to 0 at the last step)",
    )
    max_grad_norm: float = _f(1.0, "optim", "gradient clipping norm (0 = off)")
    num_epochs: int = _f(1, "optim", "optimisation epochs over each rollout batch")
    mini_batch_size: int | None = _f(
        None, "optim", "sequences per optimizer step (none = the whole batch: one step per epoch)"
    )
    disable_dropout: bool = _f(
        True,
        "optim",
        "turn dropout off in the model (as TRL's disable_dropout), so the old-policy pass and the update compute the same distribution and the first importance ratio is exactly 1",
    )
    one_forward: bool = _f(
        True,
        "optim",
        "when the update is on-policy (one epoch, one mini-batch), take the step's token statistics from the update's own forward instead of a separate old-policy forward (ict.train.stats_in_update; same values to float rounding)",
    )
    micro_batch_size: int = _f(
        8,
        "optim",
        "sequences per forward/backward (gradient accumulation inside a mini-batch); with share_prompt, rounded to whole groups of G",
    )
    share_prompt: bool = _f(
        True,
        "optim",
        "run each prompt once per group of G samples (KV cache repeated G times): same values and gradients, several times cheaper",
    )
    # run
    max_steps: int = _f(6, "run", "training steps (one rollout batch each)")
    seed: int = _f(0, "run", "seed of sampling, prompt order and the random selector")
    output_dir: str | None = _f(
        None, "run", "run directory (default runs/<date>-<method>-<task>-seed<seed>)"
    )
    save_every: int = _f(5, "run", "checkpoint every N steps (and at the end); 0 = only at the end")
    keep_last: int = _f(2, "run", "checkpoints kept")
    log_samples_every: int = _f(
        5, "run", "write per-token samples every N steps (and the first and last steps)"
    )
    num_log_samples: int = _f(4, "run", "responses written to samples.jsonl per logged step")
    heldout_eval: bool = _f(
        True,
        "run",
        "evaluate held-out pass@1 before the first step and after the last, on the same problems and sampling settings (eval_size x eval_num_samples), and report the paired difference",
    )
    eval_seed: int = _f(1234, "run", "sampling seed of the held-out evaluations")
    eval_every: int = _f(0, "run", "held-out pass@k every N steps via ict.eval (0 = off)")
    eval_size: int = _f(64, "run", "held-out problems for periodic evaluation")
    eval_num_samples: int = _f(4, "run", "samples per held-out problem (n of pass@k)")
    eval_split: str = _f(
        "eval",
        "run",
        "problems of the held-out evaluations: eval (the test problems) | validation (disjoint "
        "from training and test: a tuning stage's) | train",
    )
    report_to: str = _f(
        "none",
        "run",
        "extra logger: none | tensorboard (pip install -e '.[tensorboard]') | wandb "
        "(pip install -e '.[wandb]'); scalars each step, plots and token map at the end",
    )
    run_name: str | None = _f(
        None, "run", "the run's name in the logger (none = the run directory's name)"
    )
    wandb_project: str | None = _f(None, "run", "W&B project (none = $WANDB_PROJECT, else 'ict')")
    wandb_mode: str | None = _f(
        None,
        "run",
        "W&B mode: online | offline | disabled (none = $WANDB_MODE, else wandb's own: online)",
    )
    plots: bool = _f(True, "run", "write PNG plots at the end (ict.report)")
    progress: bool = _f(True, "run", "show a progress bar")
    # health
    health_window: int = _f(
        HEALTH.window, "health", "steps per window: the last W steps' mean against the first W's"
    )
    collapse_fraction: float = _f(
        HEALTH.collapse_fraction,
        "health",
        "entropy collapse: last-window mean valid/entropy below this fraction of the first's",
    )
    explosion_multiple: float = _f(
        HEALTH.explosion_multiple,
        "health",
        "entropy explosion: last-window mean valid/entropy above this multiple of the first's",
    )
    format_drop_fraction: float = _f(
        HEALTH.format_drop_fraction,
        "health",
        "explosion also when the last window's format_rate is below this fraction of the first's",
    )

    def __post_init__(self) -> None:
        self.validate()

    # ---- validation -------------------------------------------------------------------------
    def validate(self) -> None:
        """Raise ConfigError naming the first invalid option and the allowed values."""
        validate_method_options(self)
        choices = {
            **{k: v for k, v in registry_choices().items() if k not in METHOD_CHOICE_FIELDS},
            "lr_scheduler": SCHEDULERS,
            "autocast": PRECISION_CHOICES,
            "report_to": REPORT_TO,
            "eval_split": SPLITS,
            "dtype": ("float32", "bfloat16", "float16"),
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ConfigError(
                    f"{name}={getattr(self, name)!r} is not one of {', '.join(allowed)}"
                )
        if self.wandb_mode is not None and self.wandb_mode not in WANDB_MODES:
            raise ConfigError(
                f"wandb_mode={self.wandb_mode!r} is not one of {', '.join(WANDB_MODES)}"
            )
        positive = (
            "train_size",
            "prompts_per_step",
            "num_generations",
            "max_new_tokens",
            "generation_batch_size",
            "micro_batch_size",
            "max_steps",
            "num_epochs",
            "stats_chunk_size",
            "keep_last",
            "health_window",
            "eval_size",
            "eval_num_samples",
            "max_generation_rounds",
        )
        for name in positive:
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ConfigError(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        for name in (
            "save_every",
            "log_samples_every",
            "eval_every",
            "warmup_steps",
            "num_log_samples",
        ):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                raise ConfigError(f"{name} must be an integer >= 0, got {getattr(self, name)!r}")
        if self.dynamic_sampling and self.num_generations < 2:
            raise ConfigError(
                "dynamic_sampling needs num_generations >= 2 (one response has no rewards to differ)"
            )
        check_engine_advantage(self, "the native trainer")
        from ict.loss.advantages import PASSK_K

        if resolve_method(self).advantage == "passk" and self.num_generations < PASSK_K:
            raise ConfigError(
                f"advantage 'passk' (pass@{PASSK_K}) needs num_generations >= {PASSK_K}, got "
                f"{self.num_generations}: raise num_generations"
            )
        if self.num_generations < 2 and resolve_method(self).advantage == "grpo":
            raise ConfigError("num_generations must be >= 2 for group-relative advantages (grpo)")
        if not self.temperature > 0:
            raise ConfigError(f"temperature must be > 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p}")
        for name in ("eps_low", "eps_high"):  # none: the method's clip range
            value = getattr(self, name)
            if value is not None and (
                not isinstance(value, (int, float)) or value < 0 or not math.isfinite(value)
            ):
                raise ConfigError(f"{name} must be a finite number >= 0 or none, got {value!r}")
        for name in (
            "learning_rate",
            "kl_coef",
            "weight_decay",
            "max_grad_norm",
            "reward_timeout_s",
        ):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value < 0 or not math.isfinite(value):
                raise ConfigError(f"{name} must be a finite number >= 0, got {value!r}")
        if self.dual_clip is not None and self.dual_clip <= 1.0:
            raise ConfigError(f"dual_clip must be > 1 (e.g. 3.0) or none, got {self.dual_clip}")
        if self.mini_batch_size is not None and self.mini_batch_size < 1:
            raise ConfigError(f"mini_batch_size must be >= 1 or none, got {self.mini_batch_size}")
        for name in ("task_config",):
            if not isinstance(getattr(self, name), dict):
                raise ConfigError(
                    f"{name} must be a mapping, e.g. '{{key: value}}', got {getattr(self, name)!r}"
                )

    @property
    def batch_size(self) -> int:
        """Sequences per rollout batch (B * G)."""
        return self.prompts_per_step * self.num_generations

    # ---- (de)serialisation ------------------------------------------------------------------
    def to_dict(self, grouped: bool = True) -> dict:
        """Plain dict (grouped by section for config.yaml, or flat)."""
        flat = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if not grouped:
            return flat
        out: dict[str, dict] = {s: {} for s in SECTIONS}
        for f in dataclasses.fields(self):
            out[f.metadata["section"]][f.name] = flat[f.name]
        return out

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_dict(cls, data: dict | None, *, source: str = "config") -> TrainConfig:
        """Build from a flat or section-grouped mapping; unknown keys raise ConfigError."""
        flat = flatten(data or {}, source=source)
        return cls(**{k: coerce(k, v, source=source) for k, v in flat.items()})

    @classmethod
    def from_yaml(cls, path: str | Path) -> TrainConfig:
        return cls.from_dict(load_yaml(path), source=str(path))

    def save_yaml(
        self, path: str | Path, extra: dict | None = None, *, resolved: TrainConfig | None = None
    ) -> None:
        """Write config.yaml (grouped) of this config, the options as chosen. `resolved`: the same
        config with the method's settings filled in (RunPlan.config); the values it adds go under
        `resolved:`. `extra`: read-only facts of the run (e.g. the precision chosen and why) under
        `facts:`. `from_yaml` and `--config` ignore both sections."""
        import yaml

        data = self.to_dict(grouped=True)
        if resolved is not None:
            data[RESOLVED] = implied_settings(self, resolved)
        if extra:
            data[FACTS] = extra
        write_atomic(path, _HEADER + yaml.safe_dump(data, sort_keys=False))

    def replace(self, **changes) -> TrainConfig:
        unknown_keys(changes, source="overrides")
        return dataclasses.replace(
            self, **{k: coerce(k, v, source="overrides") for k, v in changes.items()}
        )


def implied_settings(chosen: TrainConfig, resolved: TrainConfig) -> dict:
    """{field: value} of the settings `resolved` holds that `chosen` left to the method."""
    return {
        f.name: getattr(resolved, f.name)
        for f in dataclasses.fields(chosen)
        if getattr(chosen, f.name) != getattr(resolved, f.name)
    }


def coerce(name: str, value: Any, *, source: str = "config") -> Any:
    """Convert `value` (e.g. a string from a flag or YAML "1e-6") to the type of field `name`."""
    annotation = str(TrainConfig.__dataclass_fields__[name].type)
    optional = "None" in annotation
    if value is None or (
        optional and isinstance(value, str) and value.strip().lower() in ("none", "null", "")
    ):
        if not optional:
            raise ConfigError(f"{name} cannot be none ({source})")
        return None
    base = annotation.replace("| None", "").strip()
    try:
        if base == "bool":
            if isinstance(value, str):
                lowered = value.strip().lower()
                if lowered not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
                    raise ValueError(value)
                return lowered in ("true", "1", "yes", "on")
            return bool(value)
        if base == "int":
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(value)
            return int(value) if not isinstance(value, bool) else int(value)
        if base == "float":
            return float(value)
        if base == "dict":
            if isinstance(value, str):
                value = parse_yaml_value(name, value, source=source) or {}
            if not isinstance(value, dict):
                raise ValueError(value)
            return value
        if base == "list":
            if isinstance(value, str):
                value = (
                    parse_yaml_value(name, value, source=source)
                    if value.strip().startswith("[")
                    else [value]
                )
            if not isinstance(value, (list, tuple)):
                raise ValueError(value)
            return [str(v) for v in value]
        if base == "str":
            return str(value)
    except ConfigError:
        raise
    except (ValueError, TypeError):
        raise ConfigError(f"{name}={value!r} ({source}) is not a valid {base}") from None
    return value


# a valid value of each YAML-valued field, shown when a flag's value does not parse
YAML_EXAMPLES = {
    "task_config": "'{min_terms: 3, operators: [\"+\"]}'",
    "selector_options": "'{prob_below: 0.02}'",
    "stop": '\'["</answer>", "\\n\\n"]\'',
}


def parse_yaml_value(name: str, text: str, *, source: str = "config"):
    """The YAML value of field `name` given as the string `text` (a flag such as --task-config,
    or a string in a config file). A parse error is one ConfigError line naming the flag (or the
    key and file), the position (line and column, 1-based) and an example of valid input."""
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
        where = ""
        if mark is not None:
            where = (
                f"line {mark.line + 1}, column {mark.column + 1}"
                if "\n" in text.strip()
                else f"column {mark.column + 1}"
            )
        problem = getattr(err, "problem", None) or "not valid YAML"
        flag = "--" + name.replace("_", "-")
        named = f"{flag} {text!r}" if "flag" in source else f"{name}={text!r} ({source})"
        example = YAML_EXAMPLES.get(name, "'{key: value}'")
        raise ConfigError(
            f"{named} is not valid YAML ({problem}{' at ' + where if where else ''}); "
            f"pass a YAML {'list' if name == 'stop' else 'mapping'} such as {flag} {example}"
        ) from None


def unknown_keys(data: dict, *, source: str) -> None:
    """Raise ConfigError for the first key that is not a TrainConfig field, with close matches."""
    names = TrainConfig.field_names()
    for key in data:
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=3)
            hint = (
                f"; did you mean {', '.join(close)}?"
                if close
                else f"; valid keys: {', '.join(names)}"
            )
            raise ConfigError(f"unknown config key {key!r} in {source}{hint}")


def flatten(data: dict, *, source: str = "config") -> dict:
    """Merge section-grouped keys (`optim: {learning_rate: ..}`) into one flat mapping."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source} must be a mapping of option: value, got {type(data).__name__}")
    flat: dict = {}
    for key, value in data.items():
        if key in READ_ONLY:  # what a run recorded about itself (config.yaml), not options
            continue
        if key in SECTIONS and isinstance(value, dict):
            unknown_keys(value, source=f"{source} (section {key})")
            flat.update(value)
        else:
            flat[key] = value
    unknown_keys(flat, source=source)
    return flat


def load_yaml(path: str | Path) -> dict:
    import yaml

    path = Path(path)
    if not path.is_file():
        raise ConfigError(
            f"config file {path} does not exist; pass an existing YAML file to --config"
        )
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ConfigError(f"{path} is not valid YAML: {err}") from err
    return data or {}


def packaged_presets() -> list[str]:
    """The names of the packaged training presets (ict/configs/*.yaml: "default", ...)."""
    return sorted(
        p.stem for p in (Path(__file__).resolve().parent.parent / "configs").glob("*.yaml")
    )


def preset_path(name: str) -> Path:
    """Path of a packaged preset in ict/configs (e.g. "default"); ConfigError naming the packaged
    presets when there is none of that name."""
    path = Path(__file__).resolve().parent.parent / "configs" / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError(
            f"no packaged preset {name!r}; packaged presets: {', '.join(packaged_presets())}"
        )
    return path
