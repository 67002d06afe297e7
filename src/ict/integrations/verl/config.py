"""The `ict:` section of a verl config, read on the driver, and the loss-mode -> method map.

A verl run opts in with `actor_rollout_ref.actor.policy_loss.loss_mode=ict` (or one of the other
names in LOSS_MODES). Everything else is optional; a setting left null is the method's
(ict.methods), an explicit value overrides it:

    ict:
      method: null            # ict.methods name or ict.select selector ("ict+stapo", a registered
                              # one); null: from loss_mode (ict -> the paper's ICT)
      ratio: null             # the method's (ict 0.10, entropy 0.20, random 0.10)
      scope: null             # global (whole rollout batch, all ranks) or sequence; method's
      granularity: position   # position or token_id
      reference: null         # score reference: group_position (the paper's) or batch_mean
      loss_agg: null          # ict.loss aggregation; null: the method's, else actor.loss_agg_mode
      normalize_by: null      # selected or valid (the loss denominator); the method's
      dense_warmup_steps: null  # rollout batches (verl steps) that update every valid token;
                              # null: the method's, at most half of total_training_steps
      stapo_prob_below: 0.01  # STAPO's thresholds
      stapo_entropy_quantile: 0.05
      seed: 0                 # the run's seed (ict.step.SeedStreams derive the step's)
      chunk_size: 1024        # rows of [rows x vocab] float32 scored at once on each GPU
      selector_options: {}    # e.g. {prob_below: 0.01, entropy_quantile: 0.05} for stapo
      loss_mode: null         # vanilla, clip_cov or kl_cov (Cui et al.); null: the method's
      entropy_coef: null      # ict's entropy bonus; null: the method's (entropy_bonus: 0.01)
      entropy_advantage: null # alpha of the entropy-based advantage; the method's (0.4 for
                              # entropy_advantage, else 0)
      advantage: null         # the method's estimator (w_reinforce, nsr, psr fix theirs), which
                              # algorithm.adv_estimator must then name (advantages.py)
      clip_cov_ratio: 2e-4    # the loss modes' settings (the paper's recipe); these, not verl's
      clip_cov_lb: 1.0        #   actor.policy_loss.clip_cov_* / kl_cov_ratio / ppo_kl_coef,
      clip_cov_ub: 5.0        #   reach the ict losses
      kl_cov_ratio: 2e-3
      kl_cov_coef: 1.0

The ict losses compute the method's loss mode (ict.loss.modes.apply_loss_mode) and its entropy
bonus (ict's aggregation over the method's tokens, with the entropy verl computes in the update
pass) themselves; verl's own `actor.entropy_coeff` must stay 0 (refused otherwise: it would add a
second bonus, over every valid token with verl's loss_agg_mode).

The paper's ICT scores by JS to the position-aligned group mean (`group_position`): the mean of the
G = rollout.n rollouts' distributions at each aligned position. The plugin computes it with
`ict.stats.token_stats` on each old-policy micro-batch, so every rollout of a prompt must be in the
same micro-batch of the same data-parallel rank. The driver checks that the batch holds each
prompt's rollouts in consecutive rows and that each rank's shard holds whole groups (else a
ConfigError naming `trainer.balance_batch=False`, which reorders single rollouts, or the batch
size); the workers keep groups whole in micro-batches (verl's `force_group_size` with dynamic batch
sizes, else `log_prob_micro_batch_size_per_gpu` must be a multiple of rollout.n). Scores then equal
the single-process ones. `batch_mean` (all-reduced over ranks, two forwards) is the other
reference; the rest are refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ict.errors import ConfigError
from ict.loss.options import COVARIANCE_FIELDS
from ict.methods import MethodOptions, resolve_method, validate_method_options
from ict.step import StepLayout, StepPlan

# verl loss_mode -> ict.methods method
LOSS_MODES: dict[str, str] = {
    "ict": "ict",
    "ict_entropy": "entropy",
    "ict_stapo": "stapo",
    "ict_random": "random",
    "ict_grpo": "grpo",
    "ict_clip_cov": "clip_cov",
    "ict_kl_cov": "kl_cov",
    "ict_entropy_bonus": "entropy_bonus",
    "ict_w_reinforce": "w_reinforce",
    "ict_nsr": "nsr",
    "ict_psr": "psr",
    "ict_entropy_advantage": "entropy_advantage",
    "ict_passk": "passk",
}
# What the verl old-policy pass computes (a subset of ict.stats.REFERENCES / ict.select SCOPES):
VERL_REFERENCES = ("group_position", "batch_mean")  # others need more than verl gives the hook
VERL_SCOPES = ("global", "sequence")  # verl's micro-batches are not the selection's
# verl's v1 trainer (`trainer.use_v1=true`, its default) moves every batch through TransferQueue,
# reorders rollouts across ranks unconditionally and never calls the legacy RayPPOTrainer methods
# the driver hooks wrap: refused at start-up (hooks._wrap_validate_config), docs/engines/verl.md.
V1_REFUSAL = (
    "the ict losses run on verl's legacy trainer only (their driver step hooks RayPPOTrainer, which "
    "verl's v1 trainer does not use): set trainer.use_v1=false"
)
# DAPO's dynamic sampling: verl 0.9 implements `algorithm.filter_groups` only in its v1 trainer's
# replay buffer (above: refused); the legacy RayPPOTrainer the ict losses hook never reads it, so
# the run would silently train on unfiltered batches. Refused rather than re-implemented.
FILTER_GROUPS_REFUSAL = (
    "algorithm.filter_groups (DAPO's dynamic sampling) runs only in verl's v1 trainer, which the "
    "ict losses cannot use, and the legacy trainer ignores it: set "
    "algorithm.filter_groups.enable=false, or refill batches with `ict train --dynamic-sampling`"
)
LOSS_AGG_TO_VERL = {  # ict.loss aggregation -> verl loss_agg_mode
    "token_mean": "token-mean",
    "seq_mean_token_mean": "seq-mean-token-mean",
    "seq_mean_token_sum_norm": "seq-mean-token-sum-norm",
}


@dataclass
class IctVerlConfig(MethodOptions):
    """The `ict:` section (see the module docstring): the method options every engine shares
    (`ict.methods.MethodOptions`; None settings are the method's) plus verl's own `seed` and
    `chunk_size`."""

    seed: int = 0
    chunk_size: int = 1024

    def resolved(self):
        """The ict.methods.Method with this section's non-None settings (ConfigError if unknown)."""
        return resolve_method(self)

    def plan(self, total_steps: int | None) -> StepPlan:
        """The method's step in a run of `total_steps` rollout batches (verl's
        total_training_steps), resolved once (ict.step.StepPlan: the warm-up fitted to the run,
        the seed streams of `seed`); verl runs no single forward."""
        return StepPlan.resolve(self, StepLayout(total_batches=total_steps), seed=self.seed)

    def run_method(self, total_steps: int | None):
        """The method that runs in a run of `total_steps` rollout batches (`plan`'s)."""
        return self.plan(total_steps).method

    @property
    def selector(self) -> str:
        return self.resolved().selector

    @property
    def needs_js(self) -> bool:
        """Whether the selector reads the ICT score, JS or KL (ict.select facts): then the workers
        compute it (batch_mean: a second forward; group_position: the same one)."""
        needs = self.resolved().needs()
        return "js" in needs or "kl" in needs

    def loss_settings(self, method=None) -> dict[str, Any]:
        """What the loss needs beyond the selection (sent as batch meta-data, read into
        loss.MicroBatchSelection): the method's loss mode and entropy bonus, the loss modes'
        settings. method: the resolved Method that runs (default: this section's)."""
        method = method or self.resolved()
        return {
            "loss_mode": method.loss_mode,
            "entropy_coef": float(method.entropy_coef),
            "entropy_advantage": float(method.entropy_advantage),
            **{k: float(getattr(self, k)) for k in COVARIANCE_FIELDS},
        }

    def stats_request(self) -> dict[str, Any]:
        """What the workers compute during the old-policy forward (sent as batch meta-data)."""
        method = self.resolved()
        return {
            "reference": method.reference if self.needs_js else None,
            "chunk_size": self.chunk_size,
            "divergence": "kl" if "kl" in method.needs() else "js",
        }


def _get(cfg: Any, dotted: str, default: Any = None) -> Any:
    node = cfg
    for key in dotted.split("."):
        if node is None:
            return default
        node = node.get(key, None) if hasattr(node, "get") else getattr(node, key, None)
    return default if node is None else node


def from_verl_config(cfg: Any) -> IctVerlConfig | None:
    """Read the run's config (OmegaConf or dict). None when the loss mode is not an ict one."""
    loss_mode = _get(cfg, "actor_rollout_ref.actor.policy_loss.loss_mode", "vanilla")
    if loss_mode not in LOSS_MODES:
        return None
    section = _get(cfg, "ict", {}) or {}
    section = dict(section.items()) if hasattr(section, "items") else {}
    if "selector" in section:  # the earlier name of `method` (any selector is a method)
        selector = section.pop("selector")
        if selector is not None and section.get("method") not in (None, selector):
            raise ConfigError("set ict.method or ict.selector (its earlier name), not both")
        section.setdefault("method", selector)
    unknown = set(section) - set(IctVerlConfig.__dataclass_fields__)
    if unknown:
        raise ConfigError(
            f"unknown key(s) {sorted(unknown)} in the `ict:` section of the verl config; "
            f"allowed: {sorted(IctVerlConfig.__dataclass_fields__)}"
        )
    if section.get("method") is None:
        section["method"] = LOSS_MODES[loss_mode]
    section["selector_options"] = dict(section.get("selector_options") or {})
    out = IctVerlConfig(**section)
    validate(out, cfg)
    return out


def validate(spec: IctVerlConfig, cfg: Any = None) -> None:
    """Clear errors for unknown settings (checked against the ict registries) and for settings
    the verl integration does not support."""
    from ict.select.core import selector_facts

    validate_method_options(spec, prefix="ict.")
    method = spec.resolved()
    facts = selector_facts(method.selector)
    if "kl" in facts["needs"] and method.reference != "group_position":
        raise ConfigError(
            f"ict.method={spec.method!r} scores by KL to the group-position mean: "
            f"ict.reference={method.reference!r} is not supported with it; drop ict.reference"
        )
    if spec.needs_js and method.reference not in VERL_REFERENCES:
        raise ConfigError(
            f"ict.reference={method.reference!r} (the method's unless set) is not supported on "
            f"verl (supported: {list(VERL_REFERENCES)}): set ict.reference to one of them, or use "
            "the native trainer (`ict train`) or TRL for the other references"
        )
    if method.scope not in VERL_SCOPES:
        raise ConfigError(
            f"ict.scope={method.scope!r} is not supported on verl (supported: {list(VERL_SCOPES)})"
        )
    if int(spec.chunk_size) < 1:
        raise ConfigError(f"ict.chunk_size={spec.chunk_size!r} must be a positive integer")
    if cfg is None:
        return
    if _get(cfg, "trainer.use_v1", False):
        raise ConfigError(V1_REFUSAL)
    if _get(cfg, "algorithm.filter_groups.enable", False):
        raise ConfigError(FILTER_GROUPS_REFUSAL)
    actor = _get(cfg, "actor_rollout_ref.actor", {})
    if _get(actor, "fsdp_config.ulysses_sequence_parallel_size", 1) not in (1, None) or _get(
        actor, "ulysses_sequence_parallel_size", 1
    ) not in (1, None):
        raise ConfigError(
            "the ict losses need the old-policy logits of whole sequences on one GPU: "
            "set actor_rollout_ref.actor.ulysses_sequence_parallel_size=1"
        )
    if _get(actor, "use_fused_kernels", False) or _get(
        cfg, "actor_rollout_ref.model.use_fused_kernels", False
    ):
        raise ConfigError(
            "the ict losses need the logits, which fused kernels never build: "
            "set actor_rollout_ref.model.use_fused_kernels=False"
        )
    if _get(cfg, "algorithm.rollout_correction.bypass_mode", False):
        raise ConfigError(
            "the ict losses score tokens during the old-log-prob recomputation, which bypass mode "
            "skips: set algorithm.rollout_correction.bypass_mode=false"
        )
    entropy_coeff = _get(actor, "entropy_coeff", 0.0)
    if entropy_coeff not in (0, 0.0, None):
        raise ConfigError(
            f"actor_rollout_ref.actor.entropy_coeff={entropy_coeff!r} is verl's own entropy bonus "
            "(over every valid token), which would add to the ict loss's: set it to 0 and use "
            f"ict.entropy_coef={entropy_coeff!r} (the bonus over the method's tokens, with its "
            "aggregation)"
        )
    _check_clip_range_and_kl(spec, method, actor)
    estimator = _get(cfg, "algorithm.adv_estimator", "gae")
    estimator = getattr(estimator, "value", estimator)
    if method.advantage != "grpo" and estimator != method.advantage:
        raise ConfigError(
            f"ict.method={spec.method!r} runs the advantage {method.advantage!r} (ict.advantage), "
            f"but algorithm.adv_estimator={estimator!r}: set "
            f"algorithm.adv_estimator={method.advantage} (the plugin registers ict's estimator)"
        )
    strategy = _get(actor, "strategy", "fsdp")
    if strategy not in ("fsdp", "fsdp2"):
        raise ConfigError(
            f"actor strategy {strategy!r} is not supported by the ict losses on verl: use fsdp or fsdp2"
        )


def _check_clip_range_and_kl(spec: IctVerlConfig, method, actor) -> None:
    """A method that fixes its clip range (ict.methods: clip_cov's 1/1) runs it on
    verl too: verl's `clip_ratio_low` / `clip_ratio_high` must say so (verl's config has no
    "unset"). verl's own KL loss (`use_kl_loss`, over every valid token) is aggregated with
    `actor.loss_agg_mode`, which must then be the method's aggregation."""
    from ict.methods import get_method

    if get_method(spec.method).fixes_clip_range():
        clip = _get(actor, "clip_ratio", 0.2)
        low, high = _get(actor, "clip_ratio_low", clip), _get(actor, "clip_ratio_high", clip)
        if (float(low), float(high)) != (method.eps_low, method.eps_high):
            raise ConfigError(
                f"ict.method={spec.method!r} runs its authors' clip range {method.eps_low:g} / "
                f"{method.eps_high:g}, but the actor's is {low!r} / {high!r}: set "
                f"actor_rollout_ref.actor.clip_ratio_low={method.eps_low:g} and "
                f"clip_ratio_high={method.eps_high:g}"
            )
    if _get(actor, "use_kl_loss", False):
        agg = _get(actor, "loss_agg_mode", "token-mean")
        if agg != LOSS_AGG_TO_VERL[method.loss_agg]:
            raise ConfigError(
                f"use_kl_loss aggregates verl's KL term with actor.loss_agg_mode={agg!r}, but "
                f"ict.method={spec.method!r} aggregates its loss with {method.loss_agg!r}: set "
                f"actor_rollout_ref.actor.loss_agg_mode={LOSS_AGG_TO_VERL[method.loss_agg]}"
            )
