"""`ICTGRPOConfig`: TRL's GRPOConfig plus ict's method options, resolved and checked once, and the
map of ict's loss aggregations onto TRL's `loss_type`."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field

import torch
from trl import GRPOConfig

from ict.errors import ConfigError
from ict.loss.policy import LOSS_AGGREGATIONS
from ict.methods import (
    Method,
    MethodOptions,
    check_engine_advantage,
    get_method,
    resolve_method,
    selector_kwargs,
    validate_method_options,
)

LOSS_AGG_TO_TRL = {
    "token_mean": "dapo",
    "seq_mean_token_mean": "grpo",
    "seq_mean_token_sum_norm": "dr_grpo",
}
assert set(LOSS_AGG_TO_TRL) == set(LOSS_AGGREGATIONS), "map every ict.loss aggregation to TRL"
TRL_TO_LOSS_AGG = {v: k for k, v in LOSS_AGG_TO_TRL.items()}
# TRL loss types whose normaliser is `num_items_in_batch` or independent of the mask: both
# `normalize_by` choices are expressible. The others divide by the (selected) mask itself.
_NORMALIZE_BY_VALID_OK = ("dapo", "cispo", "vespo", "dr_grpo")
logger = logging.getLogger("ict.integrations.trl")


@dataclass
class ICTGRPOConfig(MethodOptions, GRPOConfig):
    """`GRPOConfig` plus the ict method options (`ict.methods.MethodOptions`, the same fields as
    `ict train` and verl). `method="ict"` (default) is the paper's ICT: JS to the position-aligned
    group mean, top 10% of each response, Sparse-GRPO (`seq_mean_token_mean` over the selected
    tokens, TRL loss_type "grpo"), dense GRPO for the first `dense_warmup_steps` = 10 rollout
    (generation) batches, at most half the run. Settings left None take the method's.

    `loss_type` left None is the method's aggregation (LOSS_AGG_TO_TRL); an explicit one is
    honoured when it is an ict aggregation (grpo, dapo, dr_grpo: it then sets loss_agg) or when the
    method updates every token (method="grpo" runs any TRL loss_type); otherwise refused.
    Also: clip-higher `epsilon_high=0.28`, `beta=0`.

    `entropy_coef` is ict's entropy bonus (`MethodOptions.entropy_coef`; the field TRL's own
    `entropy_coef` shares): None is the method's (0.01 for entropy_bonus, else 0), and
    `__post_init__` writes that resolved value back, so the config reads the coefficient that runs.
    ICTGRPOTrainer computes the bonus itself, with the method's aggregation over its tokens
    (`ict.loss.policy_loss`), and keeps TRL's own entropy term at 0 so that it never counts twice.
    A method with an entropy bonus or a loss mode (clip_cov, kl_cov) runs ict's loss, which refuses
    the TRL settings it does not compute (`beta`, vLLM importance sampling, `use_adaptive_entropy`,
    sequence-level importance sampling, the off-policy mask, a loss_type with no ict aggregation).
    The one exception: `use_adaptive_entropy=True` (with a vanilla method and no bonus of its own)
    is TRL's adaptive entropy controller, TRL's own term on the selected tokens, `entropy_coef` its
    initial coefficient; ict's bonus is then 0."""

    loss_type: str | None = field(
        default=None,
        metadata={
            "help": "TRL's loss type (None: the method's loss_agg: seq_mean_token_mean -> grpo, "
            "token_mean -> dapo, seq_mean_token_sum_norm -> dr_grpo)."
        },
    )
    stats_chunk_size: int | None = field(
        default=None,
        metadata={
            "help": "Rows of the vocabulary-wide tensors per chunk (None: ict.stats default)."
        },
    )
    dynamic_sampling: bool = field(
        default=False,
        metadata={"help": "DAPO's dynamic sampling with refill: not on TRL (refused)."},
    )
    one_forward: bool = field(
        default=True,
        metadata={
            "help": "When the update is on-policy (one optimizer step per generation batch), take "
            "ict's statistics from the loss forward instead of a separate forward (see "
            "ict.integrations.trl.single_forward; the trainer's `ict_one_forward_reason` says why "
            "not when it cannot). False: always the separate statistics forward."
        },
    )
    epsilon: float | None = field(
        default=None,
        metadata={
            "help": "Lower clip. None: the method's (0.2; clip_cov 1.0, its authors' range)."
        },
    )
    epsilon_high: float | None = field(
        default=None,
        metadata={
            "help": "Upper clip. None: the method's (0.28, clip-higher; clip_cov 1.0, its authors')."
        },
    )

    def _cpu_precision(self) -> None:
        """`bf16` left unset on a machine without an accelerator (or with `use_cpu=True`):
        ict.precision's rule instead of TRL's default bf16, which transformers refuses on such a
        machine without `use_cpu` ("Your setup doesn't support bf16/gpu") and which CPUs without
        native bf16 run ~50x slower. So: bf16 only with `use_cpu=True` on a CPU with native bf16,
        else float32. With an accelerator, TRL's default stays."""
        if self.bf16 is not None or self.fp16:
            return
        accelerator = getattr(torch, "accelerator", None)
        has_accelerator = (
            accelerator.is_available() if accelerator is not None else torch.cuda.is_available()
        )
        if has_accelerator and not self.use_cpu:
            return
        from ict.precision import choose_precision

        choice = choose_precision("auto", "cpu")
        self.bf16 = bool(self.use_cpu and choice.name == "bf16")
        logger.info(
            "bf16 left unset, no accelerator in use: bf16=%s (%s)", self.bf16, choice.reason
        )

    def resolved_method(self) -> Method:
        """The config's resolved ict.methods.Method: `method` with this config's explicit
        settings, its loss_agg the one TRL's `loss_type` computes ("trl_<type>" for a TRL loss
        type that no ict aggregation equals). The warm-up is not yet fitted to the run's length:
        the method that runs is the trainer's (`ICTGRPOTrainer.ict_method`, its step plan's)."""
        method = resolve_method(self)
        agg = TRL_TO_LOSS_AGG.get(self.loss_type, f"trl_{self.loss_type}")
        if self.use_adaptive_entropy:  # TRL's adaptive controller owns the bonus (__post_init__)
            method = dataclasses.replace(method, entropy_coef=0.0)
        clip = {"eps_low": self.epsilon, "eps_high": self.epsilon_high}  # TRL's names of the range
        return dataclasses.replace(
            method, loss_agg=agg, **{k: v for k, v in clip.items() if v is not None}
        )

    def ict_selector_options(self) -> dict:
        """Keyword options for the method's selector (ict.methods.selector_kwargs)."""
        return selector_kwargs(self, self.resolved_method().selector)

    def __post_init__(self):
        if self.dynamic_sampling:  # TRL's GRPOTrainer samples one fixed batch per generation step
            raise ConfigError("dynamic_sampling (refill to B informative groups) is not available on TRL: use `ict train --dynamic-sampling`")  # fmt: skip
        validate_method_options(self)
        self._cpu_precision()
        method = resolve_method(self)
        check_engine_advantage(self, "TRL")
        if method.advantage != "grpo" and (
            self.multi_objective_aggregation != "sum_then_normalize"
            or self.scale_rewards != "group"
        ):
            raise ConfigError(
                f"advantage={method.advantage!r} (method={self.method!r}'s unless set) is ict's "
                "estimator of the summed rewards, and TRL's scale_rewards / "
                "multi_objective_aggregation shape only TRL's grpo advantages: leave them at "
                "'group' / 'sum_then_normalize', or use advantage='grpo'."
            )
        # the clip range: TRL's epsilon / epsilon_high, None = the method's (ict.methods)
        self.epsilon = method.eps_low if self.epsilon is None else self.epsilon
        self.epsilon_high = method.eps_high if self.epsilon_high is None else self.epsilon_high
        if self.use_adaptive_entropy:
            # TRL's adaptive entropy controller runs TRL's own term, entropy_coef its initial value
            own = dataclasses.replace(method, entropy_coef=0.0)
            if get_method(self.method).resolved().entropy_coef != 0.0 or ict_computes_loss(own):
                raise ConfigError(
                    f"use_adaptive_entropy (TRL's adaptive entropy bonus) cannot run with "
                    f"method={self.method!r} (loss_mode={method.loss_mode!r}, whose loss and "
                    "entropy bonus ict computes): set use_adaptive_entropy=False and entropy_coef "
                    "(ict's fixed bonus), or use a method with the vanilla loss and no bonus."
                )
            self.entropy_coef = 0.0 if self.entropy_coef is None else self.entropy_coef
        elif self.entropy_coef is None:  # ict's coefficient, resolved (TRL's own term stays 0)
            self.entropy_coef = float(method.entropy_coef)
        if self.loss_type is None:
            self.loss_type = LOSS_AGG_TO_TRL[method.loss_agg]
        else:
            equivalent = TRL_TO_LOSS_AGG.get(self.loss_type)
            if self.loss_agg is not None and equivalent != self.loss_agg:
                raise ConfigError(
                    f"loss_agg={self.loss_agg!r} and loss_type={self.loss_type!r} disagree "
                    f"(loss_agg {self.loss_agg!r} is TRL's {LOSS_AGG_TO_TRL[self.loss_agg]!r}): "
                    "set only one of them."
                )
            if equivalent is None and method.selector != "every":
                raise ConfigError(
                    f"loss_type={self.loss_type!r} is not an ict aggregation, so method="
                    f"{self.method!r} would not run its own loss: drop loss_type (the method's "
                    f"is {LOSS_AGG_TO_TRL[method.loss_agg]!r}), choose one of "
                    f"{sorted(TRL_TO_LOSS_AGG)}, or use method='grpo' to run TRL's "
                    f"{self.loss_type!r} on every token."
                )
        super().__post_init__()
        method = self.resolved_method()
        if method.normalize_by == "valid" and self.loss_type not in _NORMALIZE_BY_VALID_OK:
            raise ConfigError(
                f"normalize_by='valid' needs a loss_type whose normaliser is not the loss mask "
                f"({', '.join(_NORMALIZE_BY_VALID_OK)}); got loss_type={self.loss_type!r}. "
                "Use loss_agg='token_mean' (loss_type='dapo') or normalize_by='selected'."
            )
        if (
            method.selector != "every" or ict_computes_loss(method)
        ) and self.steps_per_generation % self.gradient_accumulation_steps:
            raise ConfigError(
                f"steps_per_generation={self.steps_per_generation} is not a multiple of "
                f"gradient_accumulation_steps={self.gradient_accumulation_steps}: an optimizer "
                f"step would span generation batches, whose selections and loss normalisers "
                f"method={self.method!r} keeps apart. Make steps_per_generation a multiple of "
                "gradient_accumulation_steps (TRL's default: equal)."
            )
        if self.top_entropy_quantile < 1.0 and method.selector != "every":
            raise ConfigError(
                f"top_entropy_quantile={self.top_entropy_quantile} is TRL's own entropy mask and would stack on "
                f"method={self.method!r}: use method='entropy' (exact top-k) with top_entropy_quantile=1.0, "
                "or method='grpo' to keep TRL's quantile mask."
            )
        if method.reference == "reference_policy" and self.beta == 0.0:
            raise ConfigError(
                "reference='reference_policy' needs TRL's reference model, which TRL only builds when beta != 0: "
                "set beta (e.g. 1e-3) or choose another reference (default: the method's, group_position)."
            )
        if ict_computes_loss(method):
            self._check_ict_loss(method)

    def _check_ict_loss(self, method: Method) -> None:
        """The TRL settings that ict's own loss (a loss mode or an entropy bonus) cannot honour."""
        what = (
            f"method={self.method!r} (loss_mode={method.loss_mode!r}, "
            f"entropy_coef={method.entropy_coef:g}) runs ict's loss, not TRL's"
        )
        if self.loss_type not in TRL_TO_LOSS_AGG:
            raise ConfigError(
                f"{what}, and loss_type={self.loss_type!r} has no ict aggregation: drop loss_type "
                f"or choose one of {sorted(TRL_TO_LOSS_AGG)}."
            )
        refused = (
            (
                self.delta is not None and method.loss_mode != "vanilla",
                f"delta={self.delta!r} (a dual clip: loss_mode={method.loss_mode!r} has no dual "
                "clip, as verl's)",
                "set delta=None",
            ),
            (
                self.beta != 0.0 and self.use_bias_correction_kl,
                "use_bias_correction_kl (TRL's importance-weighted KL)",
                "set use_bias_correction_kl=False",
            ),
            (
                self.use_vllm and self.vllm_importance_sampling_correction,
                "vLLM importance-sampling correction",
                "set vllm_importance_sampling_correction=False",
            ),
            (
                self.importance_sampling_level != "token",
                f"importance_sampling_level={self.importance_sampling_level!r}",
                "set importance_sampling_level='token'",
            ),
            (
                self.off_policy_mask_threshold is not None,
                "off_policy_mask_threshold (TRL's off-policy sequence mask)",
                "set off_policy_mask_threshold=None",
            ),
            (
                self.top_entropy_quantile < 1.0,
                f"top_entropy_quantile={self.top_entropy_quantile} (TRL's entropy mask)",
                "set top_entropy_quantile=1.0 (or use method='entropy')",
            ),
        )
        for bad, setting, fix in refused:
            if bad:
                raise ConfigError(f"{what}, which does not support {setting}: {fix}.")


def ict_computes_loss(method: Method) -> bool:
    """Whether ict.loss.policy_loss computes the method's loss in TRL: a loss mode other than
    vanilla (Clip-Cov, KL-Cov), an entropy bonus or the entropy-based advantage, which TRL's own
    loss cannot compute (TRL's entropy term is a plain per-micro-batch token mean, not the
    method's aggregation; TRL's advantages are per response)."""
    return (
        method.loss_mode != "vanilla"
        or method.entropy_coef != 0.0
        or (method.entropy_advantage or 0.0) != 0.0
    )
