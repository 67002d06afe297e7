"""TRL integration: token-selective GRPO on top of TRL's `GRPOTrainer`.

Swap two names in an existing TRL script and every ict selector runs inside TRL, with TRL's own
generation (transformers or vLLM), accelerate/DeepSpeed/FSDP, logging and checkpointing:

    from ict.integrations.trl import ICTGRPOConfig as GRPOConfig, ICTGRPOTrainer as GRPOTrainer
    args = GRPOConfig(..., method="ict", ratio=0.10)

How it plugs in (three overrides, nothing else of TRL is replaced):

1. `_generate_and_score_completions`: after TRL has sampled and scored a generation batch, run one
   no-grad forward of the policy that produced it (the old policy) through the backbone, and compute
   H, H2, log p(y) and the method's score (JS, or KL for ict_kl) from the final hidden states and
   the LM head weight with `ict.stats.token_stats_from_hidden` (chunked: the [tokens x V] logits
   are never built). The paper's `group_position` reference needs each process to hold whole
   groups of `num_generations` rows (checked, see `check_whole_groups`); `batch_mean` is
   all-reduced over ranks. Per-token statistics travel with the batch.
2. `_prepare_inputs`: once TRL has shuffled and split the generation batch into micro-batches, select
   tokens with `ict.select.select_tokens` under the method's scope (`ict.methods`; rows put back
   in generation order first, so the selection does not depend on the shuffle or on the number of
   ranks; "global" spans every rank, "micro_batch" is TRL's per-device micro-batch). During the
   method's dense warm-up every valid token is selected. With `normalize_by="selected"` the
   token-mean normaliser (`num_items_in_batch`) becomes the global number of selected tokens.
   Metrics: `ict.metrics.token_metrics` over every rank's rows, `ict.select.jaccard`.
3. `_compute_loss`: the selection is multiplied into TRL's loss mask (`tool_mask`), and TRL's own
   loss runs unchanged: clip `epsilon`/`epsilon_high`, `delta` (dual clip), KL (`beta`), vLLM
   importance-sampling correction and loss types. A method whose loss TRL cannot compute (a
   `loss_mode` other than vanilla: clip_cov, kl_cov; or an entropy bonus, `entropy_coef` != 0) is
   computed by `ict.loss.policy_loss` instead, on TRL's own log-probs and entropies, with the
   per-optimizer-step normalisers (see `ICTGRPOTrainer._ict_compute_loss`).

On-policy (one optimizer step per generation batch: `num_iterations == 1`, `steps_per_generation
== gradient_accumulation_steps`), on any number of processes, the statistics forward of 1. is not run: the
statistics come from the loss forward of each micro-batch (ict.integrations.trl_one_forward: a
forward hook on the backbone, whole groups per micro-batch), the selection is made up front where
it reads no statistics and per micro-batch for a per-row top-k, and the metrics of 2. are logged
after the generation batch's last micro-batch. `ICTGRPOConfig.one_forward=False` forces the
two-pass path; `ICTGRPOTrainer.ict_one_forward_reason` says why a run keeps it.

`loss_agg` maps onto TRL's `loss_type`: token_mean -> "dapo" (global token mean),
seq_mean_token_mean -> "grpo" (advantages rescaled so that the mean runs over the responses with a
selected token, as in METHOD.md), seq_mean_token_sum_norm -> "dr_grpo" (see docs/engines/trl.md).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass, field

import torch

from ict.errors import ConfigError, UserError

TRL_MIN, TRL_MAX = "1.16", "2"  # supported: TRL_MIN <= trl < TRL_MAX (the hooks below are private)


def check_trl_version(version: str) -> None:
    """Raise `UserError` unless `TRL_MIN <= version < TRL_MAX` (the private hooks used here)."""
    from packaging.version import Version

    v = Version(version)
    if not (Version(TRL_MIN) <= Version(v.base_version) < Version(TRL_MAX)):
        raise UserError(
            f"ict.integrations.trl supports trl>={TRL_MIN},<{TRL_MAX}, found trl {version}: "
            f'install a supported version with `pip install "trl>={TRL_MIN},<{TRL_MAX}"`.'
        )


try:
    import trl
except ImportError as e:  # pragma: no cover - exercised only without the optional install
    raise UserError(
        'ict.integrations.trl needs TRL: install it with `pip install -e ".[trl]"` in a clone of ict.'
    ) from e
check_trl_version(trl.__version__)

from accelerate.utils import is_peft_model  # noqa: E402
from transformers import TrainerCallback  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402
from trl.trainer.utils import maybe_gather_lm_head_ctx  # noqa: E402

from ict.head import LogitHead, logit_head  # noqa: E402
from ict.integrations.trl_one_forward import (  # noqa: E402
    OneForwardPlan,
    OneForwardSteps,
    one_forward_plan,
    regroup,
)
from ict.loss.modes import loss_mode_metrics  # noqa: E402
from ict.loss.options import COVARIANCE_FIELDS  # noqa: E402
from ict.loss.policy import LOSS_AGGREGATIONS, LossConfig, loss_masks, policy_loss  # noqa: E402
from ict.methods import (  # noqa: E402
    Method,
    MethodOptions,
    StepInputs,
    get_method,
    resolve_method,
    run_warmup,
    select_method,
    select_step,
    selector_kwargs,
    step_metrics,
    validate_method_options,
    warmup_warning,
)
from ict.methods.step import gathered  # noqa: E402
from ict.metrics import ParamChange  # noqa: E402
from ict.stats import GROUP_REFERENCES, TokenStats, token_stats_from_hidden  # noqa: E402

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
_STAT_FIELDS = ("entropy", "renyi2", "logprob", "js")
# TRL loss types that divide by `num_items_in_batch` (set per optimizer step below)
_TOKEN_COUNT_LOSSES = ("dapo", "cispo", "vespo")
# the model inputs TRL's `_compute_loss` passes to `_get_per_token_logps_and_entropies` (TRL 1.16)
_TRL_MODEL_KWARGS = (
    "pixel_values", "image_grid_thw", "num_images", "pixel_attention_mask", "spatial_shapes",
    "num_tiles", "image_sizes", "token_type_ids", "mm_token_type_ids", "image_position_ids",
)  # fmt: skip
# ict.loss.policy_loss metric -> TRL's metric name (token fractions / means over the loss tokens)
_ICT_LOSS_METRICS = {
    "clip/low": "clip_ratio/low_mean",
    "clip/high": "clip_ratio/high_mean",
    "clip_fraction": "clip_ratio/region_mean",
    "dual_clip_fraction": "dual_clip_fraction",
    "entropy": "entropy",
    "kl": "kl",
}
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
    one_forward: bool = field(
        default=True,
        metadata={
            "help": "When the update is on-policy (one optimizer step per generation batch), take "
            "ict's statistics from the loss forward instead of a separate forward (see "
            "ict.integrations.trl_one_forward; the trainer's `ict_one_forward_reason` says why "
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

    def ict_method(self) -> Method:
        """The resolved ict.methods.Method that runs: `method` with this config's explicit
        settings, its loss_agg the one TRL's `loss_type` computes ("trl_<type>" for a TRL loss
        type that no ict aggregation equals). The warm-up is not yet fitted to the run's length
        (the trainer does that, `ict.methods.run_warmup`)."""
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
        return selector_kwargs(self, self.ict_method().selector)

    def __post_init__(self):
        validate_method_options(self)
        self._cpu_precision()
        method = resolve_method(self)
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
        method = self.ict_method()
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
    vanilla (Clip-Cov, KL-Cov) or an entropy bonus, which TRL's own loss cannot compute (TRL's
    entropy term is a plain per-micro-batch token mean, not the method's aggregation)."""
    return method.loss_mode != "vanilla" or method.entropy_coef != 0.0


def check_whole_groups(
    n_local: int, group_size: int, num_processes: int, mode: str, reference: str = "group_position"
) -> None:
    """A group reference (`ict.stats.GROUP_REFERENCES`) under several processes: TRL's
    RepeatSampler puts a prompt's G completions on consecutive rows of the global generation batch
    and gives process r the rows [r * n_local, (r + 1) * n_local), so a process holds whole groups
    iff n_local % G == 0. Raise ConfigError naming the TRL settings otherwise (the reference needs
    every completion of a prompt; TRL only checks that the global batch is a multiple of G)."""
    if reference not in GROUP_REFERENCES or num_processes <= 1 or n_local % group_size == 0:
        return
    if mode == "train":
        setting = (
            f"per_device_train_batch_size * steps_per_generation = {n_local} rows per process is "
            f"not a multiple of num_generations = {group_size}"
        )
        fix = (
            "make per_device_train_batch_size * steps_per_generation a multiple of num_generations"
        )
    else:
        setting = (
            f"the per-process eval batch of {n_local} rows is not a multiple of "
            f"num_generations_eval = {group_size}"
        )
        fix = "make per_device_eval_batch_size a multiple of num_generations_eval"
    what = " (the paper's ICT score)" if reference == "group_position" else ""
    raise ConfigError(
        f'reference="{reference}"{what} needs each prompt\'s completions on '
        f"one process, but with {num_processes} processes {setting}, so TRL splits a prompt's group "
        f"across processes: {fix}, or choose another reference (e.g. reference='batch_mean')."
    )


class _ParamChangeCallback(TrainerCallback):
    """`update/param_change_rel` of each optimizer step (ict.metrics.ParamChange: one snapshot
    of the trainable parameters before the step, the relative change after it), logged with TRL's
    metrics. Sharded parameters are summed over processes."""

    def __init__(self, trainer):
        self.trainer, self.change = trainer, None

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        self.change = ParamChange(model.parameters())

    def on_optimizer_step(self, args, state, control, **kwargs):
        if self.change is None:
            return
        accelerator = self.trainer.accelerator
        reduce = None
        if accelerator.num_processes > 1:
            reduce = lambda x: accelerator.reduce(x, reduction="sum")  # noqa: E731
        self.trainer._metrics["train"]["update/param_change_rel"].append(
            self.change.relative(reduce)
        )
        self.change = None


class ICTGRPOTrainer(OneForwardSteps, GRPOTrainer):
    """`GRPOTrainer` that updates only the tokens chosen by an ict selector (see module docstring).

    `ict_one_forward` (bool): whether this run takes ict's statistics from the loss forward
    (ict.integrations.trl_one_forward), resolved at set-up with `ict_resolve`;
    `ict_one_forward_reason` says why not when it does not ("" when it does)."""

    _ICT_MODEL_KWARGS = _TRL_MODEL_KWARGS

    def __init__(self, model, reward_funcs=None, args=None, *rest, **kwargs):  # TRL's signature
        if args is None:  # as TRL builds its default GRPOConfig, with the ict default method
            name = model if isinstance(model, str) else model.config._name_or_path
            args = ICTGRPOConfig(f"{str(name).split('/')[-1]}-GRPO")
        super().__init__(model, reward_funcs, args, *rest, **kwargs)
        if not getattr(self.args, "use_adaptive_entropy", False):
            # the entropy bonus is ict's (`ict_computes_loss`): TRL's own term stays off
            self.entropy_coef, self._entropy_bonus_enabled = 0.0, False
        self._ict_warned = False
        self._ict_mode_counts: dict[str, list[int]] = {}  # the loss mode's, per optimizer step
        self.add_callback(_ParamChangeCallback(self))  # update/param_change_rel
        if not isinstance(self.args, ICTGRPOConfig):
            raise ConfigError(
                f"ICTGRPOTrainer needs an ICTGRPOConfig, got {type(self.args).__name__}: "
                "replace GRPOConfig with ict.integrations.trl.ICTGRPOConfig."
            )
        # the distribution the model samples: its own logit transform (soft-cap, scale; ict.head),
        # or a ConfigError naming a model whose transform ict does not know
        logit_head(self.model)
        method = self.ict_resolve()  # the config, resolved once
        check_whole_groups(  # the training batch's layout, checked up front
            self.args.per_device_train_batch_size * self.args.steps_per_generation,
            self.num_generations, self.accelerator.num_processes, "train", method.reference,
        )  # fmt: skip
        if method.reference == "reference_policy" and self.ref_model is None:
            raise ConfigError(
                "reference='reference_policy' needs a separate reference model (TRL has none with PEFT): "
                "use reference='batch_mean' or train without PEFT."
            )
        self._ict_temperature = self.temperature

    # ---- 1. statistics of the old policy, once per generation batch -------------------------------
    @torch.no_grad()
    def _ict_hidden(self, model, input_ids, attention_mask, first, last):
        """Final hidden states at positions [first, last) of every row: [B, last-first, D], model dtype."""
        base = model.get_base_model() if is_peft_model(model) else model
        rows = (
            self.args.per_device_train_batch_size
        )  # the rows TRL itself runs through the model at once
        parts = []
        for start in range(0, input_ids.size(0), max(rows, 1)):
            with self.accelerator.autocast():
                out = base.base_model(
                    input_ids=input_ids[start : start + rows],
                    attention_mask=attention_mask[start : start + rows],
                    use_cache=False,
                )
            parts.append(out.last_hidden_state[:, first:last])
        return torch.cat(parts, dim=0)

    @staticmethod
    def _lm_head(model) -> LogitHead:
        """The logits `model` samples from (ict.head: its transform), on full tensors."""
        base = model.get_base_model() if is_peft_model(model) else model
        head = logit_head(base)
        weight, bias = head.weight, head.bias
        if hasattr(weight, "full_tensor"):  # FSDP2 DTensor
            weight = weight.full_tensor()
            bias = bias.full_tensor() if bias is not None else None
        return LogitHead(weight, bias, head.scale, head.softcap)

    @torch.no_grad()
    def ict_token_stats(
        self, prompt_ids, prompt_mask, completion_ids, completion_mask, valid, group_ids,
        hidden=None,
    ):  # fmt: skip
        """Token statistics of the current (old) policy on a local batch.

        prompt_ids/prompt_mask: [B, P] (left-padded); completion_ids/completion_mask: [B, C];
        valid: [B, C] bool (loss mask); group_ids: [B] long (global prompt index).
        hidden: the policy's final hidden states on prompt + completion, [B, P + C, D], when a
        forward already computed them (the loss forward, ict.integrations.trl_one_forward);
        None: a no-grad forward of the policy here.
        Returns TokenStats with [B, C] float32 fields (kl too when the method scores by KL), 0
        where `valid` is False. The reference and divergence are the method's. One leading column
        (the distribution predicting the last prompt token) is passed to ict.stats and dropped, so
        `reference="previous_token"` has a p_{t-1} for the first response token.
        """
        lead = 1 if prompt_ids.size(1) >= 2 else 0
        P, C = prompt_ids.size(1), completion_ids.size(1)
        input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
        attention_mask = torch.cat([prompt_mask, completion_mask], dim=1)
        first, last = P - 1 - lead, P + C - 1
        tokens = input_ids[:, first + 1 : last + 1]
        mask = torch.cat([valid.new_zeros(valid.size(0), lead), valid.bool()], dim=1)

        if hidden is None:
            hidden = self._ict_hidden(self.model, input_ids, attention_mask, first, last)
        else:
            hidden = hidden[:, first:last]
        ref_kwargs = {}
        if self.ict_method().reference == "reference_policy":
            ref_kwargs = dict(
                reference_hidden=self._ict_hidden(
                    self.ref_model, input_ids, attention_mask, first, last
                ),
                reference_head=self._lm_head(self.ref_model),
            )
        stats = self.ict_stats_from_hidden(
            hidden, self._lm_head(self.model), tokens, mask, group_ids, **ref_kwargs
        )
        fields = {f: getattr(stats, f)[:, lead:] for f in _STAT_FIELDS}
        return TokenStats(**fields, kl=None if stats.kl is None else stats.kl[:, lead:])

    def ict_stats_from_hidden(self, hidden, head, tokens, mask, group_ids, **ref_kwargs):
        """`token_stats_from_hidden` with this trainer's temperature, reference and chunk size.

        hidden: [B, T, D]; head: the model's ict.head.LogitHead (weight [V, D]); tokens: [B, T];
        mask: [B, T] bool; group_ids: [B]; ref_kwargs: reference_hidden, reference_head.
        Returns TokenStats, [B, T] float32 fields.
        """
        method = self.ict_method()
        if self.args.stats_chunk_size is not None:
            ref_kwargs["chunk_size"] = self.args.stats_chunk_size
        if "kl" in method.needs():
            ref_kwargs["divergence"] = "kl"
        ref = ref_kwargs.get("reference_head")
        gather = (head.weight, head.bias, *((ref.weight, ref.bias) if ref is not None else ()))
        with maybe_gather_lm_head_ctx(*gather):  # ZeRO-3: the head's shards, for the duration
            return token_stats_from_hidden(
                hidden, head, tokens, mask, temperature=self._ict_temperature,
                reference=method.reference, group_ids=group_ids, **ref_kwargs,
            )  # fmt: skip

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        mode = "train" if self.model.training else "eval"
        self._ict_log_zero_variance(mode)
        n_local = out["completion_ids"].size(0)
        group_size = self.num_generations if mode == "train" else self.num_generations_eval
        rows = self.accelerator.process_index * n_local + torch.arange(
            n_local, device=out["completion_ids"].device
        )
        check_whole_groups(
            n_local, group_size, self.accelerator.num_processes, mode, self.ict_method().reference
        )
        out["ict_row"] = rows
        if mode == "train" and self.ict_one_forward:  # from the loss forward (trl_one_forward)
            return out
        valid = self._valid_mask(out)
        stats = self.ict_token_stats(
            out["prompt_ids"], out["prompt_mask"], out["completion_ids"], out["completion_mask"], valid,
            rows // group_size,
        )  # fmt: skip
        out.update({f"ict_{f}": getattr(stats, f) for f in _STAT_FIELDS})
        if stats.kl is not None:
            out["ict_kl"] = stats.kl
        return out

    def _ict_log_zero_variance(self, mode) -> None:
        """`zero_variance_share` (groups whose rewards are all equal / groups): TRL's own
        `frac_reward_zero_std` of this generation batch, which is that share when the std is the
        group's (scale_rewards "group" or "none", rewards summed before normalising: each group
        is num_generations rows); not logged otherwise."""
        logged = self._metrics[mode]
        per_group = self.scale_rewards in ("group", "none") and (
            self.multi_objective_aggregation == "sum_then_normalize"
        )
        if per_group and logged.get("frac_reward_zero_std"):
            logged["zero_variance_share"].append(logged["frac_reward_zero_std"][-1])

    @staticmethod
    def _valid_mask(inputs) -> torch.Tensor:
        mask = inputs["completion_mask"].bool()
        return mask if inputs.get("tool_mask") is None else mask & inputs["tool_mask"].bool()

    # ---- 2. selection, once per generation batch, after TRL's shuffle and split --------------------
    def ict_select(self, method, stats, valid, advantages, tokens, *, local=False):
        """Selection mask [B, C] bool (subset of `valid`) for rows in generation order, without
        the warm-up (ict.methods.select_method, the selection every engine runs).

        method: a resolved ict.methods.Method, or a name (this config's method with its overrides,
        any other name with its own settings). advantages: [B] or [B, C]; tokens: [B, C] long.
        `local=True` selects inside this batch only (micro-batch scope); otherwise the method's
        scope applies, "global" across all processes.
        """
        from ict.methods import selection_seed

        if isinstance(method, str):
            method = (
                self.ict_method() if method == self.args.method else get_method(method).resolved()
            )
        if local:
            method = dataclasses.replace(method, scope="micro_batch")
        where = {"micro_batch_size": valid.size(0)} if local else {}
        seed = selection_seed(self.args.seed, self.ict_rollout_batch())
        return select_method(
            method, self.args, StepInputs(valid, stats, advantages, tokens), seed=seed, **where
        )

    def _ict_batches_per_generation(self) -> float:
        """Optimizer steps per generation batch: steps_per_generation * num_iterations / GA."""
        ga = self.args.gradient_accumulation_steps
        return self.args.steps_per_generation * self.num_iterations / ga

    def ict_rollout_batch(self) -> int:
        """The 1-based index of the current generation batch, the unit of the warm-up and the
        selection seed on every engine (native: the training step; verl: global_steps). From TRL's
        restored `state.global_step`, so it survives a resume."""
        return int(self.state.global_step // self._ict_batches_per_generation()) + 1

    def ict_resolve(self) -> Method:
        """Resolve this trainer's config once: its method (`ICTGRPOConfig.ict_method`) and ict's
        loss settings for it (`ict_loss_config`), read from here on by every batch. Called at
        set-up; call it again after changing `self.args` in place."""
        method = self.args.ict_method()
        self._ict_method, self._ict_loss = method, self.ict_loss_config(method)
        text_config = self.model.config.get_text_config()
        self.ict_one_forward_plan: OneForwardPlan = one_forward_plan(
            self.args, method, num_iterations=self.num_iterations, group_size=self.num_generations,
            multimodal=text_config is not self.model.config,
        )  # fmt: skip
        if not self.ict_one_forward_plan.on:
            logger.info("statistics from a separate forward: %s", self.ict_one_forward_reason)
        return method

    @property
    def ict_one_forward(self) -> bool:
        """Whether ict's statistics come from the loss forward (no statistics forward)."""
        return self.ict_one_forward_plan.on

    @property
    def ict_one_forward_reason(self) -> str:
        """Why the statistics need their own forward ("" when they do not)."""
        return self.ict_one_forward_plan.reason

    def ict_method(self) -> Method:
        """The method this trainer runs (resolved by `ict_resolve`; its warm-up not yet fitted
        to the run: `ict_run_method`)."""
        return self._ict_method

    def ict_method_loss(self) -> LossConfig | None:
        """ict's loss settings for `ict_method()` (None: TRL's own loss computes it)."""
        return self._ict_loss

    def ict_run_method(self) -> Method:
        """The method that runs, its own warm-up capped at half of the run's generation batches
        (ict.methods.run_warmup; a warning once if an explicit warm-up covers the whole run)."""
        total = None
        if getattr(self.state, "max_steps", 0) and self.state.max_steps > 0:
            total = max(1, math.ceil(self.state.max_steps / self._ict_batches_per_generation()))
        method = run_warmup(
            self.ict_method(), total, explicit=self.args.dense_warmup_steps is not None
        )
        warning = warmup_warning(method, total)
        if warning and self.args.dense_warmup_steps is not None and not self._ict_warned:
            logger.warning("%s", warning)
            self._ict_warned = True
        return method

    def _prepare_inputs(self, generation_batch):
        if not self.model.training:
            inputs = super()._prepare_inputs(generation_batch)
            self._ict_apply_selection([inputs], "eval")
            return inputs
        before = self._buffered_inputs
        inputs = super()._prepare_inputs(generation_batch)
        if self._buffered_inputs is not before:  # a new generation batch was produced and split
            if not self.ict_one_forward:
                self._ict_apply_selection(self._buffered_inputs, "train")
                return inputs
            if self.ict_one_forward_plan.regroup:  # whole groups per micro-batch
                self._buffered_inputs = regroup(self._buffered_inputs)
                inputs = self._buffered_inputs[self._step % self.args.steps_per_generation]
            self._ict_prepare_one_forward(self._buffered_inputs)
        return inputs

    def _ict_in_order(self, chunks):
        """The micro-batches `chunks` as one batch in generation order (independent of TRL's
        shuffle): (order [B], stats, valid [B, C], advantages, tokens [B, C])."""

        def cat(key):
            return torch.cat([c[key] for c in chunks], dim=0)

        order = torch.argsort(cat("ict_row"))
        kl = cat("ict_kl")[order] if chunks[0].get("ict_kl") is not None else None
        stats = TokenStats(**{f: cat(f"ict_{f}")[order] for f in _STAT_FIELDS}, kl=kl)
        valid = torch.cat([self._valid_mask(c) for c in chunks], dim=0)[order]
        return order, stats, valid, cat("advantages")[order], cat("completion_ids")[order]

    def _ict_apply_selection(self, chunks, mode):
        """Select on the micro-batches `chunks` (in place: adds `ict_selected` and the loss's
        per-optimizer-step normalisers) with ict.methods.select_step, and log its metrics."""
        method = self.ict_run_method()
        if mode != "train":
            method = dataclasses.replace(method, dense_warmup_steps=0)
        order, stats, valid, advantages, tokens = self._ict_in_order(chunks)
        sizes = [c["completion_ids"].size(0) for c in chunks]
        where = {}
        if method.scope == "micro_batch":  # TRL's micro-batches, shuffled: one id per row
            ids = torch.repeat_interleave(torch.arange(len(chunks)), torch.tensor(sizes))
            where["micro_batch_ids"] = ids.to(valid.device)[order]
        selection = select_step(
            method, self.args, StepInputs(valid, stats, advantages, tokens),
            step=self.ict_rollout_batch(), seed=self.args.seed, **where,
        )  # fmt: skip
        back = torch.argsort(order)
        for c, s in zip(chunks, selection.selected[back].split(sizes), strict=True):
            c["ict_selected"] = s
        self._ict_set_normalisers(chunks, method, mode)
        self._ict_log(mode, stats, valid, selection)

    def _ict_set_normalisers(self, chunks, method, mode, selected=None):
        """Per optimizer step (the `gradient_accumulation_steps` consecutive micro-batches of the
        generation batch that one update sums), all processes: the number of loss-normaliser
        tokens (selected, or valid for normalize_by="valid") and of responses with a selected
        token. TRL's token-count losses divide by num_items_in_batch / P * GA / spg, so it is set
        to count * spg / GA; the "grpo" loss rescales advantages (`_ict_seq_mean_scale`). Either
        way each update is normalised over exactly its own rows, as the native trainer's
        mini-batch is. `selected`: per micro-batch, a [B, C] mask with the selection's per-row
        counts (default: its `ict_selected`; the normalisers depend on those counts only)."""
        ga = self.args.gradient_accumulation_steps if mode == "train" else len(chunks)
        spg = self.args.steps_per_generation if mode == "train" else len(chunks)
        window = [j // ga for j in range(len(chunks))]
        loss_config = self.ict_loss_config(method)
        counts = torch.zeros(max(window) + 1, 3, device=chunks[0]["completion_ids"].device)
        if selected is None:
            selected = [c["ict_selected"] for c in chunks]
        for j, c in enumerate(chunks):
            valid = self._valid_mask(c)
            kept, norm, _, _ = loss_masks(valid, selected[j], normalize_by=method.normalize_by)
            counts[window[j], 0] += norm.sum()
            counts[window[j], 1] += kept.any(dim=1).sum()
            if loss_config is not None:  # ict's loss: its own normaliser, LossConfig.denominator
                counts[window[j], 2] += loss_config.count(valid, selected[j])
        counts = self.accelerator.reduce(counts, reduction="sum")
        keep_trl = method.selector == "every" and (spg % ga or self.loss_type not in (
            *_TOKEN_COUNT_LOSSES, "grpo"))  # fmt: skip
        for j, c in enumerate(chunks):
            tokens, rows, ict_count = counts[window[j]]
            if self.loss_type in _TOKEN_COUNT_LOSSES and not keep_trl:
                c["num_items_in_batch"] = tokens * spg / ga
            c["ict_rows_selected"] = None if keep_trl else rows
            # DDP averages the ranks' gradients: each rank divides by global count / processes
            c["ict_loss_denominator"] = (
                None
                if loss_config is None
                else ict_count.clamp(min=1.0) / self.accelerator.num_processes
            )

    def _ict_gather(self, x: torch.Tensor) -> torch.Tensor:
        """[B, C] of this process -> [sum B, max C] of every process (rank order, 0-padded)."""
        if self.accelerator.num_processes == 1:
            return x
        return self.accelerator.gather(self.accelerator.pad_across_processes(x, dim=1))

    def _ict_log(self, mode, stats, valid, selection):
        """ict.methods.step_metrics over every process's batch: the native trainer's keys."""
        fields = {
            f: getattr(stats, f) for f in (*_STAT_FIELDS, "kl") if getattr(stats, f) is not None
        }
        every = TokenStats(**{f: self._ict_gather(v.float()) for f, v in fields.items()})
        valid = self._ict_gather(valid.long()).bool()
        metrics = step_metrics(every, valid, gathered(selection, self._ict_gather))
        for key, value in metrics.items():
            if value == value:  # NaN (an empty set) is left out of TRL's running means
                self._metrics[mode][key].append(float(value))

    # ---- 3. TRL's loss on the selected tokens ----------------------------------------------------
    def ict_loss_config(self, method: Method) -> LossConfig | None:
        """The ict.loss.LossConfig of ict's own loss for `method` (a resolved Method), or None when
        TRL's loss computes the method (`ict_computes_loss`). TRL's clip settings (`epsilon`,
        `epsilon_high`, `delta`, which equals ict's dual clip), the method's aggregation, loss mode
        and entropy bonus, the config's loss-mode settings; Dr. GRPO's constant is TRL's
        `max_completion_length`."""
        if not ict_computes_loss(method):
            return None
        return LossConfig(
            eps_low=self.epsilon_low, eps_high=self.epsilon_high, dual_clip=self.args.delta,
            loss_agg=method.loss_agg, normalize_by=method.normalize_by,
            max_response_length=self.max_completion_length, entropy_coef=method.entropy_coef,
            loss_mode=method.loss_mode, **{k: getattr(self.args, k) for k in COVARIANCE_FIELDS},
            kl_coef=self.beta, kl_estimator="k3", kl_on="selected",  # TRL's KL term, as TRL's loss
        )  # fmt: skip

    def _compute_loss(self, model, inputs):
        if inputs.get("ict_one_forward") and self.model.training:
            inputs = self._ict_one_forward_inputs(model, inputs)
        if "ict_selected" not in inputs:
            raise RuntimeError(
                "ICTGRPOTrainer: batch has no token selection (was _prepare_inputs bypassed?)"
            )
        inputs = self._ict_on_policy(inputs)
        loss_config = self.ict_method_loss()
        if loss_config is not None:
            return self._ict_compute_loss(model, inputs, loss_config)
        keep = inputs["ict_selected"].to(inputs["completion_mask"].dtype)
        tool_mask = inputs.get("tool_mask")
        inputs = {**inputs, "tool_mask": keep if tool_mask is None else tool_mask * keep}
        if self.loss_type == "grpo" and inputs.get("ict_rows_selected") is not None:
            inputs["advantages"] = inputs["advantages"] * self._ict_seq_mean_scale(inputs)
        logged = self._metrics["train" if self.model.training else "eval"]
        before = len(logged.get("clip_ratio/region_mean", ()))  # .get: no empty key for TRL's log
        loss = super()._compute_loss(model, inputs)
        region = logged.get("clip_ratio/region_mean", ())
        if len(region) > before:  # ict's key for TRL's own clip fraction (the same tokens)
            logged["clip_fraction"].append(region[-1])
        return loss

    def _ict_on_policy(self, inputs):
        """The first optimizer step of a generation batch runs on the weights that generated it:
        TRL's stored old log-probs then equal the current ones up to the rounding of two passes.
        Without them (None) TRL's loss and ict's use the current log-probs, detached, so the
        importance ratio is exactly 1 there, as on the native trainer and verl (METHOD.md,
        "Clip-Cov and KL-Cov"). TRL's `_step` counts micro-batches; a generation batch feeds
        steps_per_generation x num_iterations of them, the first gradient_accumulation_steps
        being its first optimizer step."""
        if not self.model.training or inputs.get("old_per_token_logps") is None:
            return inputs
        generate_every = self.args.steps_per_generation * self.num_iterations
        if self._step % generate_every < self.args.gradient_accumulation_steps:
            return {**inputs, "old_per_token_logps": None}
        return inputs

    def _ict_compute_loss(self, model, inputs, loss_config: LossConfig) -> torch.Tensor:
        """ict's loss on one micro-batch: `ict.loss.policy_loss` (the native trainer's) on TRL's own
        log-probs and entropies (`_get_per_token_logps_and_entropies`, as TRL's `_compute_loss`
        gets them), the old log-probs TRL kept (or the detached current ones when TRL has none:
        one update per generation batch), the selected tokens, and the per-optimizer-step
        normaliser of `_ict_set_normalisers`: the losses of an optimizer step's micro-batches sum
        to the native mini-batch loss. The loss mode's covariance and token counts are those of
        this micro-batch (one loss call, as natively and in verl); Clip-Cov draws from torch's
        global generator. The MoE auxiliary loss is added as TRL adds it."""
        prompt_ids, prompt_mask = inputs["prompt_ids"], inputs["prompt_mask"]
        completion_ids, completion_mask = inputs["completion_ids"], inputs["completion_mask"]
        input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
        attention_mask = torch.cat([prompt_mask, completion_mask], dim=1)
        per_token_logps, entropies, aux_loss = self._get_per_token_logps_and_entropies(
            model, input_ids, attention_mask, completion_ids.size(1), compute_entropy=True,
            compute_aux_loss=self.aux_loss_enabled,
            **{k: inputs.get(k) for k in _TRL_MODEL_KWARGS},
        )  # fmt: skip
        old = inputs.get("old_per_token_logps")
        old = per_token_logps.detach() if old is None else old
        valid = self._valid_mask(inputs)
        loss, metrics = policy_loss(
            per_token_logps, old, inputs["advantages"], valid, inputs["ict_selected"],
            loss_config, entropy=entropies, denominator=inputs["ict_loss_denominator"],
            ref_logprob=inputs.get("ref_per_token_logps") if loss_config.kl_coef else None,
        )  # fmt: skip
        mode = "train" if self.model.training else "eval"
        if self.aux_loss_enabled:
            normalizer = self.current_gradient_accumulation_steps if mode == "train" else 1.0
            loss = loss + self.router_aux_loss_coef * aux_loss / normalizer
            self._metrics[mode]["aux_loss"].append(
                self.accelerator.gather_for_metrics(aux_loss).mean().item()
            )
        tokens = int((valid & inputs["ict_selected"].bool()).sum())
        self._ict_log_loss(mode, metrics, tokens)
        if loss_config.loss_mode != "vanilla":
            self._ict_count_loss_mode(mode, metrics, tokens, loss_config)
        return loss

    def _ict_log_loss(self, mode, metrics: dict, tokens: int) -> None:
        """ict's loss metrics (fractions and means over this micro-batch's loss tokens) under
        TRL's names (`_ICT_LOSS_METRICS`; the clip fraction also as ict's `clip_fraction`),
        averaged over every process's loss tokens, and TRL's `policy_loss` (the loss without the
        entropy bonus), averaged over processes."""
        keys = [k for k in _ICT_LOSS_METRICS if k in metrics]
        device = self.accelerator.device
        # the policy term (TRL's `policy_loss`): this micro-batch's share of the optimizer step's,
        # times the accumulation steps, so that TRL's running mean over them is the step's value
        steps = self.current_gradient_accumulation_steps if mode == "train" else 1
        values = [metrics[k] * tokens for k in keys] + [tokens, metrics["pg_loss"] * steps]
        totals = self.accelerator.reduce(
            torch.tensor(values, device=device, dtype=torch.float32), reduction="sum"
        )
        self._metrics[mode]["policy_loss"].append(
            float(totals[-1]) / self.accelerator.num_processes
        )
        if mode == "train" and self.accelerator.sync_gradients and self.args.entropy_coef:
            # ict's bonus coefficient, logged once per optimizer step as TRL logs its own
            self._metrics[mode]["entropy_coef"].append(float(self.args.entropy_coef))
        if float(totals[-2]) > 0:
            for key, total in zip(keys, totals[:-2].tolist(), strict=True):
                self._metrics[mode][_ICT_LOSS_METRICS[key]].append(total / float(totals[-2]))
                if key == "clip_fraction":
                    self._metrics[mode]["clip_fraction"].append(total / float(totals[-2]))

    def _ict_count_loss_mode(self, mode, metrics: dict, tokens: int, loss_config) -> None:
        """The loss mode's counts (tokens it changed, loss tokens |M|), summed over the optimizer
        step's micro-batches (train: the accumulation steps; eval: one call) and every process,
        then logged once per optimizer step as ict.loss.modes.loss_mode_metrics
        (`loss_mode/changed_tokens`, `loss_mode/changed_rate`, `loss_mode/nominal_rate`)."""
        counts = self._ict_mode_counts.setdefault(mode, [0, 0, 0])  # changed, tokens, calls
        counts[0] += int(metrics["loss_mode/changed_tokens"])
        counts[1] += tokens
        counts[2] += 1
        if counts[2] < (self.current_gradient_accumulation_steps if mode == "train" else 1):
            return
        del self._ict_mode_counts[mode]
        totals = self.accelerator.reduce(
            torch.tensor(counts[:2], device=self.accelerator.device, dtype=torch.float64),
            reduction="sum",
        )
        changed, loss_tokens = (int(x) for x in totals.tolist())
        step = loss_mode_metrics(
            loss_config.loss_mode, loss_config.covariance, changed, loss_tokens
        )
        for key, value in step.items():
            self._metrics[mode][key].append(value)

    def _ict_seq_mean_scale(self, inputs) -> torch.Tensor:
        """seq_mean_token_mean: TRL's "grpo" loss averages over every response (B per micro-batch,
        / gradient accumulation, averaged over ranks); METHOD.md (and verl) over the responses with
        at least one selected token. The clipped loss is positively homogeneous in A, so scaling A
        by (responses TRL divides by) / (responses with a selected token, all ranks) gives the
        METHOD.md value and leaves the KL term, entropy bonus and clip metrics as TRL has them."""
        accumulation = self.current_gradient_accumulation_steps if self.model.training else 1
        rows = inputs["completion_ids"].size(0) * accumulation * self.accelerator.num_processes
        return rows / inputs["ict_rows_selected"].clamp(min=1.0)


__all__ = [
    "ICTGRPOConfig",
    "ICTGRPOTrainer",
    "LOSS_AGG_TO_TRL",
    "check_trl_version",
    "ict_computes_loss",
    "check_whole_groups",
]
