"""The method's options, declared and validated once for every engine.

`MethodOptions` is a dataclass mixin: the native `TrainConfig`, TRL's `ICTGRPOConfig` and verl's
`IctVerlConfig` inherit these fields, so a method option has one name, one default, one help text
and one check everywhere. Each field's metadata holds `help` (read by `ict train --help` and by
Hugging Face's argument parser) and `section` (the native config's grouping).

    method, ratio, scope, reference, loss_agg, normalize_by, dense_warmup_steps, loss_mode,
    entropy_coef, advantage, entropy_advantage: what runs
    granularity, stapo_prob_below, stapo_entropy_quantile, selector_options: selector settings
    clip_cov_ratio, clip_cov_lb, clip_cov_ub, kl_cov_ratio, kl_cov_coef: the loss modes' settings

None means "the method's" (ict.methods.METHODS): `resolve_method(options)` fills them in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ict.errors import ConfigError
from ict.loss.options import COVARIANCE_FIELDS, LOSS_MODES, CovarianceOptions

# the fields a Method fixes; an explicit (non-None) value overrides the method's
METHOD_FIELDS = (
    "ratio", "scope", "reference", "loss_agg", "normalize_by", "dense_warmup_steps", "loss_mode",
    "entropy_coef", "advantage", "entropy_advantage",
)  # fmt: skip
# the clip range, which a Method may also fix; each engine spells it its own way (native eps_low /
# eps_high, TRL epsilon / epsilon_high, verl clip_ratio_low / clip_ratio_high), so it is not a
# MethodOptions field
CLIP_FIELDS = ("eps_low", "eps_high")


def _opt(default, section: str, help: str):
    meta = {"section": section, "help": help}
    if isinstance(default, dict):
        return field(default_factory=dict, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class MethodOptions:
    """Every option that says which method runs and how it selects (see the module docstring)."""

    method: str = _opt(
        "ict",
        "method",
        "method: a name of ict.methods.METHODS (`ict train --help` lists them; ict is the "
        "paper's), a selector of ict.select.SELECTORS, or a composition such as ict+stapo",
    )
    ratio: float | None = _opt(
        None,
        "method",
        "fraction of valid tokens kept (none = the method's: ict 0.10, entropy 0.20, random 0.10)",
    )
    reference: str | None = _opt(
        None,
        "method",
        "ICT score reference distribution (ict.stats.REFERENCES; none = the method's, "
        "group_position for the paper's ICT)",
    )
    scope: str | None = _opt(
        None,
        "method",
        "top-k scope: global | micro_batch | sequence (none = the method's: sequence for ict, "
        "global for entropy)",
    )
    dense_warmup_steps: int | None = _opt(
        None,
        "method",
        "Theta: the first N rollout batches update every valid token, then the method's "
        "selection (none = the method's, at most half the run: ict min(10, half), baselines 0)",
    )
    granularity: str = _opt("position", "method", "ICT granularity: position | token_id")
    stapo_prob_below: float = _opt(
        0.01, "method", "STAPO: spurious if p(y_t) below this (secondary-source default)"
    )
    stapo_entropy_quantile: float = _opt(
        0.05, "method", "STAPO: spurious if H below this quantile of valid entropies"
    )
    selector_options: dict = _opt(
        {}, "method", "extra keyword options of the method's selector (ict.select)"
    )
    loss_agg: str | None = _opt(
        None,
        "loss",
        "loss aggregation: seq_mean_token_mean | token_mean | seq_mean_token_sum_norm (none = "
        "the method's: seq_mean_token_mean, GRPO's and the paper's)",
    )
    normalize_by: str | None = _opt(
        None, "loss", "loss normaliser: selected | valid tokens (none = the method's: selected)"
    )
    loss_mode: str | None = _opt(
        None,
        "loss",
        "per-token policy loss: vanilla | clip_cov | kl_cov (none = the method's: clip_cov and "
        "kl_cov for those methods, else vanilla)",
    )
    entropy_coef: float | None = _opt(
        None,
        "loss",
        "entropy bonus coefficient (none = the method's: 0.01 for entropy_bonus, else 0)",
    )
    advantage: str | None = _opt(
        None,
        "loss",
        "advantage estimator (ict.loss.ADVANTAGE_ESTIMATORS): grpo | dr_grpo | w_reinforce | nsr "
        "| psr | passk, or verl's own grpo_passk on verl (none = the method's: its authors' for "
        "w_reinforce, nsr, psr, passk, else grpo)",
    )
    entropy_advantage: float | None = _opt(
        None,
        "loss",
        "alpha of the entropy-based advantage A + min(alpha H, |A| / 2), arXiv 2506.14758 (none "
        "= the method's: 0.4 for entropy_advantage, else 0 = off)",
    )
    clip_cov_ratio: float = _opt(
        CovarianceOptions.clip_cov_ratio,
        "loss",
        "Clip-Cov: fraction of tokens whose gradient is cut",
    )
    clip_cov_lb: float = _opt(
        CovarianceOptions.clip_cov_lb, "loss", "Clip-Cov: lower bound of the covariance window"
    )
    clip_cov_ub: float = _opt(
        CovarianceOptions.clip_cov_ub, "loss", "Clip-Cov: upper bound of the covariance window"
    )
    kl_cov_ratio: float = _opt(
        CovarianceOptions.kl_cov_ratio, "loss", "KL-Cov: fraction of tokens given the KL penalty"
    )
    kl_cov_coef: float = _opt(
        CovarianceOptions.kl_cov_coef, "loss", "KL-Cov: coefficient of the |log-ratio| penalty"
    )


def resolve_method(options: MethodOptions):
    """The resolved ict.methods.Method: `options.method` with its explicit fields applied (and an
    explicit clip range, `eps_low` / `eps_high`, where the options carry one: the native config)."""
    from ict.methods.registry import get_method

    overrides = {k: getattr(options, k) for k in METHOD_FIELDS}
    overrides.update({k: getattr(options, k, None) for k in CLIP_FIELDS})
    return get_method(options.method).with_overrides(**overrides)


def check_engine_advantage(options: MethodOptions, engine: str) -> None:
    """ConfigError (one line) when the method's advantage is another engine's own estimator
    (ict.loss.ENGINE_ADVANTAGES: verl's grpo_passk), which `engine` cannot compute."""
    from ict.loss.advantages import ENGINE_ADVANTAGES

    advantage = resolve_method(options).advantage
    owner = ENGINE_ADVANTAGES.get(advantage)
    if owner is not None and owner != engine:
        raise ConfigError(
            f"advantage={advantage!r} is {owner}'s own estimator, which {engine} does not compute: "
            "use advantage='passk' (Pass@k Training's analytic advantage, every engine) or run on "
            f"{owner}"
        )


def selector_kwargs(options: MethodOptions, selector: str) -> dict:
    """Keyword options for `selector`: STAPO's thresholds and `selector_options`, restricted to
    those the selector declares (ict.select facts), so one set of options serves every method."""
    from ict.select.core import selector_facts

    declared = selector_facts(selector)["options"]
    given = {
        "prob_below": options.stapo_prob_below,
        "entropy_quantile": options.stapo_entropy_quantile,
    }
    given.update(options.selector_options or {})
    return {k: v for k, v in given.items() if k in declared}


def validate_method_options(options: MethodOptions, *, prefix: str = "") -> None:
    """Raise ConfigError (one line: the option, the problem, the fix) for the first bad method
    option. `prefix` is how the engine spells the keys (verl: "ict.")."""
    from ict.loss.advantages import ADVANTAGE_ESTIMATORS, ENGINE_ADVANTAGES
    from ict.loss.policy import LOSS_AGGREGATIONS, NORMALIZE_BY, LossConfig
    from ict.methods.registry import get_method
    from ict.select import GRANULARITIES, SCOPES
    from ict.select.core import selector_facts
    from ict.stats import REFERENCES

    try:
        base = get_method(options.method)
    except ConfigError as err:
        detail = str(err).removeprefix(f"unknown method {options.method!r}")
        raise ConfigError(f"{prefix}method={options.method!r} is unknown{detail}") from None
    for name, allowed in (
        ("reference", REFERENCES),
        ("scope", SCOPES),
        ("granularity", GRANULARITIES),
        ("normalize_by", NORMALIZE_BY),
        ("loss_agg", LOSS_AGGREGATIONS),
        ("loss_mode", LOSS_MODES),
        ("advantage", (*ADVANTAGE_ESTIMATORS, *ENGINE_ADVANTAGES)),
    ):
        value = getattr(options, name)
        if value is not None and value not in allowed:
            raise ConfigError(
                f"{prefix}{name}={value!r} is unknown: use one of {', '.join(allowed)}"
            )
    facts = selector_facts(base.selector)
    ratio = options.ratio
    if ratio is not None:
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 1:
            raise ConfigError(f"{prefix}ratio={ratio!r} must be in (0, 1], e.g. 0.1")
        if not facts["takes_ratio"]:
            raise ConfigError(
                f"{prefix}method={options.method!r} keeps no top fraction, so ratio does not "
                f"apply: drop {prefix}ratio"
            )
    warmup = options.dense_warmup_steps
    if warmup is not None and (
        isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0
    ):
        raise ConfigError(f"{prefix}dense_warmup_steps={warmup!r} must be an integer >= 0")
    if not 0 < options.stapo_prob_below <= 1:
        raise ConfigError(
            f"{prefix}stapo_prob_below={options.stapo_prob_below!r} must be in (0, 1], e.g. 0.01"
        )
    if not 0 <= options.stapo_entropy_quantile <= 1:
        raise ConfigError(
            f"{prefix}stapo_entropy_quantile={options.stapo_entropy_quantile!r} must be in "
            "[0, 1], e.g. 0.05"
        )
    coef = options.entropy_coef
    if coef is not None and (
        isinstance(coef, bool) or not isinstance(coef, (int, float)) or not 0 <= coef < math.inf
    ):
        raise ConfigError(f"{prefix}entropy_coef={coef!r} must be a finite number >= 0, e.g. 0.01")
    shaping = options.entropy_advantage
    if shaping is not None and (
        isinstance(shaping, bool) or not isinstance(shaping, (int, float))
        or not 0 <= shaping < math.inf
    ):  # fmt: skip
        raise ConfigError(
            f"{prefix}entropy_advantage={shaping!r} must be a finite number >= 0, e.g. 0.4"
        )
    try:  # the loss modes' settings: one check, LossConfig's
        LossConfig(**{k: getattr(options, k) for k in COVARIANCE_FIELDS})
    except ConfigError as err:
        raise ConfigError(f"{prefix}{err}") from None
    if not isinstance(options.selector_options, dict):
        raise ConfigError(
            f"{prefix}selector_options must be a mapping, e.g. {{weight: 1.0}}, got "
            f"{options.selector_options!r}"
        )
    unknown = set(options.selector_options) - set(facts["options"])
    if unknown:
        raise ConfigError(
            f"{prefix}selector_options {sorted(unknown)} are not options of method="
            f"{options.method!r} (its options: {sorted(facts['options']) or 'none'})"
        )
