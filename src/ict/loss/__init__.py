"""Advantages and the clipped policy loss on selected tokens.

from ict.loss import compute_advantages, policy_loss
adv, info = compute_advantages(rewards, group_ids)                  # [N], GRPO
loss, metrics = policy_loss(logprob, old_logprob, adv, mask, selected)
counts = row_counts(mask, selected, loss=LossConfig())   # per-row normaliser counts (the one ladder)

Names are imported on first use (module `__getattr__`), so that `ict.loss.options` (the loss
modes' settings, which configs read) stays torch-free.
"""

from ict.lazy import lazy_exports

_LAZY = {
    **dict.fromkeys(
        ("ADVANTAGE_ESTIMATORS", "DEFAULT_ADVANTAGE", "ENGINE_ADVANTAGES", "GroupStats", "PASSK_K", "W_REINFORCE_LAMBDA",
         "compute_advantages", "group_stats", "register_advantage_estimator",
         "zero_variance_rows", "zero_variance_share"),
        "ict.loss.advantages",
    ),
    **dict.fromkeys(("LOSS_MODES", "CovarianceOptions"), "ict.loss.options"),
    **dict.fromkeys(("LOSS_MODE_KEYS", "loss_mode_metrics"), "ict.loss.modes"),
    **dict.fromkeys(
        ("RowCounts", "loss_masks", "normaliser_shares", "row_counts"), "ict.loss.normaliser"
    ),
    **dict.fromkeys(
        ("ENTROPY_ADVANTAGE_ALPHA", "ENTROPY_ADVANTAGE_KAPPA", "KL_ESTIMATORS",
         "LOSS_AGGREGATIONS", "LossConfig", "clipped_token_loss", "policy_loss",
         "shape_advantages"),
        "ict.loss.policy",
    ),
}  # fmt: skip

__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
