"""The registered policy losses: ICT selection + METHOD.md's clipped loss through verl's agg_loss.

verl 0.9.1 calls a registered policy loss with log-probs, advantages and the response mask only.
The selection mask travels with the batch (`ict_selected`, chosen on the driver from the old
policy's statistics); the engine hook puts the current micro-batch's mask here (`micro_batch`)
just before verl calls the loss, and the loss reads it back.

Per token (METHOD.md): rho = exp(logp - logp_old), l = -min(rho A, clip(rho, 1-eps_low,
1+eps_high) A) with verl's `clip_ratio_low` / `clip_ratio_high`, dual clip for A < 0:
l = min(l, -c A) (verl's `clip_ratio_c`, default 3) in the vanilla loss only: verl's own
`compute_policy_loss_clip_cov` / `_kl_cov` have no dual clip, and neither have ict's loss modes.
Loss mask M = valid * selected. `normalize_by=selected`: verl's agg_loss over M with the global
number of selected tokens as `batch_num_tokens`; `normalize_by=valid`: agg_loss over the valid
mask of l * selected (denominator = valid tokens, as verl counts them).

The method's loss mode (clip_cov, kl_cov: `ict.loss.modes.apply_loss_mode`, the one definition,
on this micro-batch's loss tokens M, as verl's own `compute_policy_loss_clip_cov/kl_cov` and the
native trainer; Clip-Cov draws from torch's global generator, as verl) changes l before the
aggregation. Its counts (tokens changed, |M|) and the ratio-clipped tokens add up over the loss
calls of the current thread until `take_step_counts()` (metrics.wrap_train_batch's, after the
step's last update, summed over ranks), which turns them into `clip_fraction` and the
`loss_mode/*` metrics (ict.loss.modes.loss_mode_metrics): verl averages whatever a loss returns,
so a per-call count would not add up to the step's. Within
`on_policy()` (the step's first update) the old log-probs are the current ones, detached.

The entropy bonus is computed here too, `- entropy_coef * agg(H on M)` with the same
aggregation and normalisers as the policy term (ict.loss.policy_loss's), on the entropy verl
computed in this micro-batch's forward (the engine hook turns on `calculate_entropy` and hands it
over). verl's own `actor.entropy_coeff` term is not used (config.validate keeps it at 0): it
aggregates over every valid token with verl's loss_agg_mode, which equals ict's only for some
methods.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ict.errors import ConfigError
from ict.loss import CovarianceOptions, clipped_token_loss
from ict.loss.modes import apply_loss_mode, loss_mode_metrics
from ict.loss.options import COVARIANCE_FIELDS
from ict.loss.policy import loss_masks, shape_advantages

SELECTED_KEY = "ict_selected"  # bool [B, R] in the batch: the selection of each response token
ROW_COUNTS_KEY = "ict_row_counts"  # float [B, 2] in the batch: each row's normaliser counts
NUM_SELECTED_KEY = "ict_num_selected"  # int, global (all DP ranks) normaliser tokens, mini-batch
NUM_ROWS_KEY = "ict_num_rows"  # int, global count of responses with a non-empty denominator
NORMALIZE_KEY = "ict_normalize_by"  # "selected" | "valid"
LOSS_AGG_KEY = "ict_loss_agg"  # an ict.loss aggregation, or None: verl's actor.loss_agg_mode
LOSS_SETTINGS_KEY = "ict_loss_settings"  # dict: IctVerlConfig.loss_settings (loss mode, bonus)


@dataclass
class MicroBatchSelection:
    """The current micro-batch's selection, as the loss needs it.

    selected:     BoolTensor[b, R] (padded like verl's response_mask)
    normalize_by: "selected" or "valid"
    num_selected: global (mini-batch, all DP ranks) count of the normaliser's tokens (selected
                  valid tokens for normalize_by="selected"; read for that only)
    num_rows:     global count of responses whose denominator is not empty (>= 1 selected token
                  for normalize_by="selected", >= 1 valid token for "valid")
    Both are sums of the driver's per-row counts (`ROW_COUNTS_KEY`, the step run's); the engine
    hook sets them. None: a ConfigError (the hook was not applied).
    loss_agg:     an ict.loss aggregation (the method's), or None for verl's loss_agg_mode
    loss_mode:    ict.loss.modes mode (the method's): vanilla, clip_cov, kl_cov
    entropy_coef: the method's entropy bonus (0: none)
    entropy_advantage: alpha of the method's entropy-based advantage shaping (0: none)
    covariance:   Clip-Cov's and KL-Cov's settings (the `ict:` section's)
    entropy:      FloatTensor[b, R], the current policy's entropy (padded like response_mask;
                  the engine hook sets it when `needs_entropy`)
    """

    selected: Tensor
    normalize_by: str = "selected"
    num_selected: int | None = None
    num_rows: int | None = None
    loss_agg: str | None = None
    loss_mode: str = "vanilla"
    entropy_coef: float = 0.0
    covariance: CovarianceOptions = CovarianceOptions()
    entropy: Tensor | None = None
    entropy_advantage: float = 0.0

    @property
    def needs_entropy(self) -> bool:
        """Whether the loss reads verl's entropy: the entropy bonus or the shaping."""
        return self.entropy_coef != 0.0 or self.entropy_advantage != 0.0


def settings_fields(settings: dict | None) -> dict[str, Any]:
    """MicroBatchSelection keyword fields from the driver's `LOSS_SETTINGS_KEY` meta-data
    (IctVerlConfig.loss_settings); {} for none (vanilla, no bonus)."""
    if not settings:
        return {}
    return {
        "loss_mode": settings.get("loss_mode", "vanilla"),
        "entropy_coef": float(settings.get("entropy_coef", 0.0)),
        "entropy_advantage": float(settings.get("entropy_advantage", 0.0)),
        "covariance": CovarianceOptions(
            **{k: float(settings[k]) for k in COVARIANCE_FIELDS if k in settings}
        ),
    }


def counts_column(counts) -> Tensor:
    """float [B, 2]: each row's normaliser tokens and whether it has one (an ict.loss.RowCounts,
    the step run's `counts`), the column the driver ships as `ROW_COUNTS_KEY`."""
    return torch.stack([counts.tokens.float(), counts.rows.float()], dim=-1)


# verl 0.9.1 calls a registered policy loss with log-probs, advantages, the mask, the agg mode and
# the actor config only: nothing of the micro-batch reaches it. The engine hook, which does see the
# micro-batch, leaves its selection here for the loss call that follows on the same thread; this is
# the one piece of state verl's data path cannot carry.
_local = threading.local()


@contextlib.contextmanager
def micro_batch(selection: MicroBatchSelection | None):
    """Make `selection` the one the next loss call reads (used by the engine hook and tests)."""
    previous = getattr(_local, "selection", None)
    _local.selection = selection
    try:
        yield
    finally:
        _local.selection = previous


def set_current(selection: MicroBatchSelection | None) -> None:
    """Set the current micro-batch selection until the next call (the engine hook's form)."""
    _local.selection = selection


def current() -> MicroBatchSelection | None:
    return getattr(_local, "selection", None)


@contextlib.contextmanager
def on_policy():
    """Within: the loss calls belong to the step's first update, whose weights are the old
    policy's; the losses use the current log-probs, detached, as the old ones (rho exactly 1, not
    1 up to the rounding of verl's separate old-log-prob pass; METHOD.md "Clip-Cov and
    KL-Cov")."""
    _local.on_policy = True
    try:
        yield
    finally:
        _local.on_policy = False


def _add_step_counts(selection: MicroBatchSelection, clipped: int, changed: int, tokens: int):
    counts = getattr(_local, "step_counts", None)
    if counts is None:
        counts = _local.step_counts = {
            "mode": selection.loss_mode, "covariance": selection.covariance, "n": [0, 0, 0],
        }  # fmt: skip
    for i, n in enumerate((clipped, changed, tokens)):
        counts["n"][i] += n


def take_step_counts(reduce=None) -> dict[str, float]:
    """The step metrics counted over the loss calls of this thread since the last call, and reset:
    `clip_fraction` (ratio-clipped loss tokens / loss tokens M) and the loss mode's
    (ict.loss.modes.loss_mode_metrics); {} when no loss call ran. `reduce` sums a float64 [3]
    tensor (clipped, changed, |M|) over data-parallel ranks (metrics.wrap_train_batch passes its
    all-reduce)."""
    counts = getattr(_local, "step_counts", None)
    _local.step_counts = None
    if counts is None:
        return {}
    totals = torch.tensor(counts["n"], dtype=torch.float64)
    if reduce is not None:
        totals = reduce(totals)
    clipped, changed, tokens = (int(x) for x in totals.tolist())
    out = {"clip_fraction": clipped / tokens if tokens else float("nan")}
    out.update(loss_mode_metrics(counts["mode"], counts["covariance"], changed, tokens))
    return out


def _masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    return (x * mask).sum() / mask.sum().clamp_min(1)


def ict_policy_loss(
    old_log_prob: Tensor,
    log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    loss_agg_mode: str = "token-mean",
    config: Any = None,
    rollout_is_weights: Tensor | None = None,
) -> tuple[Tensor, dict[str, Any]]:
    """verl PolicyLossFn: the clipped loss on the selected tokens only. Tensors are [B, R]."""
    from verl.trainer.ppo.core_algos import agg_loss

    if config is None:
        raise ConfigError(
            "the ict policy losses need verl's actor config (clip ratios, batch info)"
        )
    selection = current()
    if selection is None:
        raise ConfigError(
            "the ict policy loss found no token selection for this micro-batch: the batch has no "
            f"'{SELECTED_KEY}' field. Load the plugin in every process (ict installed in the verl "
            "environment, or VERL_USE_EXTERNAL_MODULES=ict.integrations.verl) and keep "
            "algorithm.rollout_correction.bypass_mode=false"
        )
    if getattr(_local, "on_policy", False):  # the step's first update (metrics.wrap_train_batch)
        old_log_prob = log_prob.detach()
    valid = response_mask.bool()
    selected = selection.selected.to(device=valid.device).bool()
    if selected.shape != valid.shape:
        raise ValueError(
            f"ict selection shape {tuple(selected.shape)} != response mask {tuple(valid.shape)}"
        )
    mask, denominator_mask, _, _ = loss_masks(valid, selected, normalize_by=selection.normalize_by)

    eps = config.clip_ratio
    eps_low = config.clip_ratio_low if config.clip_ratio_low is not None else eps
    eps_high = config.clip_ratio_high if config.clip_ratio_high is not None else eps
    # the dual clip is the vanilla loss's only (verl's clip_cov / kl_cov have none)
    clip_c = config.get("clip_ratio_c", 3.0) if selection.loss_mode == "vanilla" else None
    if selection.needs_entropy and selection.entropy is None:
        raise ConfigError(
            "the ict loss reads the policy's entropy (ict.entropy_coef or ict.entropy_advantage) "
            "but none reached it: the engine hook was not applied (load the plugin in every verl "
            "process)"
        )
    if selection.entropy_advantage != 0.0:  # ict.loss.shape_advantages, as natively
        entropy = selection.entropy.to(device=advantages.device)
        advantages = shape_advantages(
            advantages, torch.where(valid, entropy, 0.0), selection.entropy_advantage
        )
    # the one per-token clipped surrogate (ict.loss), as verl's vanilla loss (log-ratio clamp 20)
    token_loss, ratio, clipped_loss = clipped_token_loss(
        log_prob, old_log_prob, advantages, valid, eps_low=eps_low, eps_high=eps_high,
        dual_clip=clip_c,
    )  # fmt: skip
    A = torch.where(valid, advantages, 0.0)
    clipped = -A * ratio.clamp(1.0 - eps_low, 1.0 + eps_high) > -A * ratio
    dual = (A < 0) & (clipped_loss > -A * clip_c) if clip_c is not None else torch.zeros_like(valid)
    # the method's loss mode on this micro-batch's loss tokens (ict.loss.modes, as natively)
    token_loss, changed = apply_loss_mode(
        selection.loss_mode, token_loss, logprob=log_prob.to(token_loss.dtype),
        old_logprob=old_log_prob, ratio=ratio, advantages=A, loss_mask=mask,
        options=selection.covariance,
    )  # fmt: skip
    if selection.loss_agg is not None:
        from .config import LOSS_AGG_TO_VERL

        loss_agg_mode = LOSS_AGG_TO_VERL[selection.loss_agg]
    if rollout_is_weights is not None:
        token_loss = token_loss * rollout_is_weights

    if selection.normalize_by not in ("selected", "valid"):
        raise ConfigError(f"ict.normalize_by={selection.normalize_by!r}: use 'selected' or 'valid'")
    # verl's agg_loss with METHOD.md's normalisers: the global number of selected (or valid)
    # tokens for token-mean, of responses with a non-empty denominator for seq-mean-token-mean;
    # seq-mean-token-sum-norm keeps verl's (global responses x horizon).
    batch_info = dict(config.global_batch_info)
    num_selected, num_rows = selection.num_selected, selection.num_rows
    if num_selected is None or num_rows is None:
        raise ConfigError(
            "ict: the mini-batch's normaliser counts are missing (engine hook not applied): load "
            "the plugin in every process (VERL_USE_EXTERNAL_MODULES=ict.integrations.verl)"
        )
    if loss_agg_mode == "token-mean" and selection.normalize_by == "selected":
        batch_info["batch_num_tokens"] = max(int(num_selected), 1)
    elif loss_agg_mode == "seq-mean-token-mean":
        batch_info["global_batch_size"] = max(int(num_rows), 1)
    loss = agg_loss(
        loss_mat=torch.where(mask, token_loss, 0.0),
        loss_mask=denominator_mask,
        loss_agg_mode=loss_agg_mode,
        **batch_info,
    )
    maskf = mask.float()
    metrics = {}
    if selection.entropy_coef != 0.0:  # ict's bonus: the policy term's tokens and normalisers
        entropy = selection.entropy.to(device=token_loss.device, dtype=token_loss.dtype)
        bonus = agg_loss(
            loss_mat=torch.where(mask, entropy, 0.0),
            loss_mask=denominator_mask,
            loss_agg_mode=loss_agg_mode,
            **batch_info,
        )
        loss = loss - selection.entropy_coef * bonus
        metrics["ict/entropy"] = _masked_mean(entropy.detach(), maskf).item()
    # counted over the step's calls (take_step_counts): clipped, changed by the mode, |M|
    _add_step_counts(
        selection, int((clipped & mask).sum()), int((changed & mask).sum()), int(mask.sum())
    )

    metrics.update({
        "actor/pg_clipfrac": _masked_mean(clipped.float(), maskf).item(),
        "actor/pg_clipfrac_lower": _masked_mean(dual.float(), maskf).item(),
        "actor/ppo_kl": _masked_mean(-(log_prob - old_log_prob).detach(), maskf).item(),
        "ict/selected_fraction": (maskf.sum() / valid.sum().clamp_min(1)).item(),
    })  # fmt: skip
    return loss, metrics


def register_losses() -> list[str]:
    """Register every name in config.LOSS_MODES with verl's policy-loss registry (idempotent)."""
    from verl.trainer.ppo.core_algos import register_policy_loss

    from .config import LOSS_MODES

    for name in LOSS_MODES:
        register_policy_loss(name)(ict_policy_loss)
    return list(LOSS_MODES)
