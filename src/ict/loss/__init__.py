"""Advantages and the clipped policy loss on selected tokens.

from ict.loss import compute_advantages, policy_loss
adv, info = compute_advantages(rewards, group_ids)                  # [N], GRPO
loss, metrics = policy_loss(logprob, old_logprob, adv, mask, selected)

Names are imported on first use (module `__getattr__`), so that `ict.loss.options` (the loss
modes' settings, which configs read) stays torch-free.
"""

import importlib

_LAZY = {
    **dict.fromkeys(
        ("ADVANTAGE_ESTIMATORS", "GroupStats", "compute_advantages", "group_stats",
         "register_advantage_estimator", "zero_variance_rows"),
        "ict.loss.advantages",
    ),
    **dict.fromkeys(("LOSS_MODES", "CovarianceOptions"), "ict.loss.options"),
    **dict.fromkeys(
        ("KL_ESTIMATORS", "LOSS_AGGREGATIONS", "LossConfig", "clipped_token_loss", "policy_loss"),
        "ict.loss.policy",
    ),
}  # fmt: skip

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
