"""Advantages and the clipped policy loss on selected tokens.

from ict.loss import compute_advantages, policy_loss
adv, info = compute_advantages(rewards, group_ids)                  # [N], GRPO
loss, metrics = policy_loss(logprob, old_logprob, adv, mask, selected)
"""

from ict.loss.advantages import (
    ADVANTAGE_ESTIMATORS,
    GroupStats,
    compute_advantages,
    group_stats,
    register_advantage_estimator,
    zero_variance_rows,
)
from ict.loss.modes import LOSS_MODES, CovarianceOptions
from ict.loss.policy import (
    KL_ESTIMATORS,
    LOSS_AGGREGATIONS,
    LossConfig,
    clipped_token_loss,
    policy_loss,
)

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "GroupStats",
    "KL_ESTIMATORS",
    "LOSS_AGGREGATIONS",
    "LOSS_MODES",
    "CovarianceOptions",
    "LossConfig",
    "clipped_token_loss",
    "compute_advantages",
    "group_stats",
    "policy_loss",
    "register_advantage_estimator",
    "zero_variance_rows",
]
