"""ict's advantage estimators in verl's registry, so `algorithm.adv_estimator=NAME` runs ict's.

verl 0.9.1 computes advantages on the driver (`ray_trainer.compute_advantage`) with the function
its registry holds under `algorithm.adv_estimator`, called with the token-level rewards [B, T], the
response mask [B, T], the prompt uids [B] and the algorithm config. `register_advantages` adds every
estimator of ict.loss.ADVANTAGE_ESTIMATORS whose name verl's registry lacks (w_reinforce, nsr, psr,
dr_grpo, passk; verl keeps its own grpo and grpo_passk), each a wrapper of `ict.loss.compute_advantages`: the outcome
reward is the row's summed token rewards, as verl's outcome estimators read it. A method that fixes
its estimator (ict.methods: w_reinforce, nsr, psr) must name it in `algorithm.adv_estimator`
(config.validate says so in one line).
"""

from __future__ import annotations

import functools

import numpy as np
import torch

_REGISTERED: dict[str, object] = {}  # name -> the wrapper verl holds (one per name: idempotent)


def verl_advantages(
    name: str,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index=None,
    config=None,
    **_,
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl's estimator signature over ict's estimator `name`: (advantages, returns), both
    [B, T] = the row's advantage on its response tokens, 0 elsewhere. index: [B] prompt uids
    (one group each; every row its own group when verl passes none)."""
    from ict.loss import compute_advantages

    rewards = token_level_rewards.sum(dim=-1)
    if index is None:
        groups = torch.arange(rewards.numel())
    else:
        groups = torch.as_tensor(np.unique(np.asarray(index), return_inverse=True)[1].reshape(-1))
    with torch.no_grad():
        advantages, _ = compute_advantages(rewards, groups.to(rewards.device), mode=name)
    advantages = advantages.to(token_level_rewards.dtype)[:, None] * response_mask
    return advantages, advantages


def register_advantages() -> list[str]:
    """Register ict's estimators that verl lacks (idempotent). Returns the names ict's run."""
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, register_adv_est

    from ict.loss import ADVANTAGE_ESTIMATORS

    for name in ADVANTAGE_ESTIMATORS:
        if name in ADV_ESTIMATOR_REGISTRY and name not in _REGISTERED:
            continue  # verl's own (grpo)
        fn = _REGISTERED.setdefault(name, functools.partial(verl_advantages, name))
        register_adv_est(name)(fn)
    return list(_REGISTERED)
