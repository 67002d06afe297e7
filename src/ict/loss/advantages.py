"""Outcome advantages (METHOD.md, "Advantages"), verl core_algos style.

Every response i has an outcome reward R_i and the id of its prompt (its group). An estimator is a
pure function `fn(rewards[N], groups: GroupStats, *, eps) -> advantages[N]` in
`ADVANTAGE_ESTIMATORS`; `compute_advantages` is the entry point.

    grpo, dr_grpo          group-relative: (R - mean) / (std + eps), and R - mean
    psr, nsr, w_reinforce  Zhu et al., "The Surprising Effectiveness of Negative Reinforcement in
                           LLM Reasoning" (arXiv 2506.01347; code TianHongZXY/RLVR-Decomposed,
                           `compute_psr_nsr_outcome_advantage`): no baseline, rewards 0/1.
                           PSR: A = R (+1 on correct, 0 on incorrect); NSR: A = R - 1 (-1 on
                           incorrect, 0 on correct); W-REINFORCE: lambda on correct, -1 on
                           incorrect, lambda = W_REINFORCE_LAMBDA = 0.1 (their README's value).
    passk                  Pass@k Training's analytic advantage (Chen et al., arXiv 2508.10751;
                           code RUCAIBox/Passk_Training, `code/passk_adv.py`), rewards 0/1: with
                           N responses, c correct, rho = 1 - C(N - c, k) / C(N, k) and
                           sigma = sqrt(rho (1 - rho)), A = (1 - rho) / (sigma + 1e-6) on correct
                           responses and (1 - rho - C(N - c - 1, k - 1) / C(N - 1, k - 1)) /
                           (sigma + 1e-6) on incorrect ones; k = PASSK_K.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from ict.errors import ConfigError, DataError


@dataclass
class GroupStats:
    """Per-response view of its group's reward statistics (all [N])."""

    mean: Tensor
    std: Tensor  # sample (unbiased) or population std, see group_stats; 0 for a group of one
    zero_variance: Tensor  # bool: every reward in the group is equal
    num_groups: int
    size: Tensor | None = None  # long: the number of responses in the group


def group_stats(rewards: Tensor, group_ids: Tensor, *, std_unbiased: bool = True) -> GroupStats:
    """Mean and standard deviation of each response's group (vectorised over groups).

    rewards: float[N]; group_ids: long[N] (any integer ids, need not be contiguous).
    std_unbiased=True divides by n - 1 like torch.std and TRL's GRPOTrainer; False divides by n.
    """
    ids, inverse = torch.unique(group_ids, return_inverse=True)
    num_groups = ids.numel()
    count = torch.bincount(inverse, minlength=num_groups).to(rewards.dtype)
    mean = torch.zeros(num_groups, dtype=rewards.dtype, device=rewards.device)
    mean = mean.index_add(0, inverse, rewards) / count
    sq = torch.zeros_like(mean).index_add(0, inverse, (rewards - mean[inverse]) ** 2)
    dof = (count - 1) if std_unbiased else count
    std = torch.sqrt(sq / dof.clamp(min=1))  # a group of one has sq = 0 -> std 0
    rmax = torch.full_like(mean, -torch.inf).scatter_reduce(0, inverse, rewards, "amax")
    rmin = torch.full_like(mean, torch.inf).scatter_reduce(0, inverse, rewards, "amin")
    zero_var = rmax == rmin
    return GroupStats(
        mean[inverse], std[inverse], zero_var[inverse], num_groups, count.long()[inverse]
    )


ADVANTAGE_ESTIMATORS: dict[str, Callable[..., Tensor]] = {}
DEFAULT_ADVANTAGE = "grpo"  # what a method that fixes none runs
# W-REINFORCE's weight of the positive samples: the lambda of arXiv 2506.01347, "recommended value
# is 0.1" (TianHongZXY/RLVR-Decomposed README, `algorithm.positive_advantage_weight`)
W_REINFORCE_LAMBDA = 0.1
# Pass@k Training's k: their code takes it as an argument (`compute_advantage(..., K)`) and neither
# it nor the paper's setup (arXiv 2508.10751, App. A.2) states one default; 4 is this project's
# choice (docs/METHOD.md), fixed for now: every group needs >= k responses
PASSK_K = 4
# the engines' own estimators `ict` exposes without rewriting them: name -> the engine that runs it
# (`advantage=grpo_passk` is verl's `algorithm.adv_estimator=grpo_passk`; refused elsewhere)
ENGINE_ADVANTAGES = {"grpo_passk": "verl"}


def register_advantage_estimator(name: str):
    def decorate(fn):
        ADVANTAGE_ESTIMATORS[name] = fn
        return fn

    return decorate


@register_advantage_estimator("grpo")
def grpo_advantages(rewards: Tensor, groups: GroupStats, *, eps: float) -> Tensor:
    """A_i = (R_i - mean_group) / (std_group + eps); exactly 0 in zero-variance groups."""
    adv = (rewards - groups.mean) / (groups.std + eps)
    return torch.where(groups.zero_variance, torch.zeros_like(adv), adv)


@register_advantage_estimator("dr_grpo")
def dr_grpo_advantages(rewards: Tensor, groups: GroupStats, *, eps: float) -> Tensor:
    """Dr. GRPO: A_i = R_i - mean_group (no std division); exactly 0 in zero-variance groups."""
    adv = rewards - groups.mean
    return torch.where(groups.zero_variance, torch.zeros_like(adv), adv)


def _binary(rewards: Tensor, name: str) -> None:
    """The PSR / NSR / W-REINFORCE estimators are defined on 0/1 rewards (their authors' trainer
    asserts it): DataError naming the first other value."""
    other = rewards[(rewards != 0) & (rewards != 1)]
    if other.numel():
        raise DataError(
            f"advantage {name!r} needs 0/1 rewards (correct / incorrect, as arXiv 2506.01347 "
            f"defines it), got {float(other[0])!r}: use a 0/1 reward function or advantage grpo"
        )


@register_advantage_estimator("psr")
def psr_advantages(rewards: Tensor, groups: GroupStats, *, eps: float) -> Tensor:
    """Positive-sample reinforcement: A_i = R_i (1 on correct responses, 0 on incorrect ones)."""
    _binary(rewards, "psr")
    return rewards.clone()


@register_advantage_estimator("nsr")
def nsr_advantages(rewards: Tensor, groups: GroupStats, *, eps: float) -> Tensor:
    """Negative-sample reinforcement: A_i = R_i - 1 (-1 on incorrect responses, 0 on correct)."""
    _binary(rewards, "nsr")
    return rewards - 1


@register_advantage_estimator("w_reinforce")
def w_reinforce_advantages(
    rewards: Tensor, groups: GroupStats, *, eps: float, weight: float = W_REINFORCE_LAMBDA
) -> Tensor:
    """Weighted REINFORCE: A_i = weight (lambda) on correct responses, -1 on incorrect ones."""
    _binary(rewards, "w_reinforce")
    return torch.where(rewards == 1, weight * rewards, rewards - 1)


def _comb(n: int, r: int) -> int:
    """C(n, r), 0 when n < 0 (no such subset; scipy.special.comb's value, which the authors use)."""
    return math.comb(n, r) if n >= 0 else 0


@register_advantage_estimator("passk")
def passk_advantages(
    rewards: Tensor, groups: GroupStats, *, eps: float, k: int = PASSK_K
) -> Tensor:
    """Pass@k Training's analytic advantage (module docstring): each group's expected pass@k
    reward over its k-subsets, normalised like GRPO's. Needs every group to hold >= k responses.
    The 1e-6 is the authors' (`sigma + 1e-6`), whatever `eps`."""
    _binary(rewards, "passk")
    size = groups.size.to(torch.long)
    if int(size.min()) < k:
        raise DataError(
            f"advantage 'passk' needs at least k = {k} responses per prompt, got a group of "
            f"{int(size.min())}: raise num_generations (rollout.n) to >= {k}"
        )
    correct = torch.round(groups.mean.double() * size).long()
    out = torch.empty_like(rewards, dtype=torch.float64)
    pairs = torch.stack([size, correct], dim=1)
    for n, c in torch.unique(pairs, dim=0).tolist():
        rho = 1 - _comb(n - c, k) / _comb(n, k)
        sigma = math.sqrt(rho * (1 - rho))
        positive = (1 - rho) / (sigma + 1e-6)
        negative = (1 - rho - _comb(n - c - 1, k - 1) / _comb(n - 1, k - 1)) / (sigma + 1e-6)
        rows = (size == n) & (correct == c)
        values = out.new_tensor([negative, positive])
        out[rows] = values[(rewards[rows] == 1).long()]
    return out.to(rewards.dtype)


def compute_advantages(
    rewards: Tensor,
    group_ids: Tensor,
    mode: str = DEFAULT_ADVANTAGE,
    eps: float = 1e-6,
    *,
    std_unbiased: bool = True,
) -> tuple[Tensor, dict]:
    """Advantages of N responses from their rewards and prompt groups.

    rewards: [N] (any real dtype; computed in float32, or float64 if given). group_ids: [N] ints.
    mode: a key of ADVANTAGE_ESTIMATORS ("grpo" default; module docstring). std_unbiased: sample std
    (n - 1, TRL's behaviour, default) or population std (n).
    Returns (advantages float[N], info) with info["zero_variance_groups"] (groups whose rewards
    are all equal; their advantages are 0) and info["num_groups"], both ints, and
    info["zero_variance_share"] (their ratio, the `zero_variance_share` step metric). Only grpo
    and dr_grpo give such groups advantage 0; psr, nsr and w_reinforce have no baseline, so
    info["no_signal_share"] is the share of groups whose advantages are all exactly 0 (what
    carries no gradient whatever the estimator; the `no_signal_share` step metric and the
    learning-signal health check).
    """
    if mode not in ADVANTAGE_ESTIMATORS:
        raise ConfigError(
            f"unknown advantage estimator {mode!r}; choose from {sorted(ADVANTAGE_ESTIMATORS)}"
        )
    if not eps > 0:
        raise ConfigError(f"eps must be > 0 (it keeps the std division finite), got {eps!r}")
    rewards, group_ids = _check(rewards, group_ids)
    groups = group_stats(rewards, group_ids, std_unbiased=std_unbiased)
    adv = ADVANTAGE_ESTIMATORS[mode](rewards, groups, eps=eps)
    zero_groups = int(torch.unique(group_ids[groups.zero_variance]).numel())
    signal = torch.unique(group_ids[adv != 0])
    silent = groups.num_groups - int(signal.numel())
    share = max(groups.num_groups, 1)
    info = {"zero_variance_groups": zero_groups, "num_groups": groups.num_groups}
    return adv, {
        **info, "zero_variance_share": zero_groups / share, "no_signal_share": silent / share,
    }  # fmt: skip


def zero_variance_share(rewards: Tensor, group_ids: Tensor) -> float:
    """The share of prompt groups whose rewards are all equal (the `zero_variance_share` step
    metric on every engine). rewards: [N]; group_ids: [N] ints."""
    return compute_advantages(rewards, group_ids)[1]["zero_variance_share"]


def zero_variance_rows(rewards: Tensor, group_ids: Tensor) -> Tensor:
    """bool[N]: responses whose group has all-equal rewards (what dynamic sampling drops)."""
    rewards, group_ids = _check(rewards, group_ids)
    return group_stats(rewards, group_ids).zero_variance


def _check(rewards, group_ids) -> tuple[Tensor, Tensor]:
    rewards = torch.as_tensor(rewards)
    group_ids = torch.as_tensor(group_ids, device=rewards.device)
    if rewards.dim() != 1 or group_ids.shape != rewards.shape:
        raise DataError(
            f"rewards and group_ids must both be 1-D of the same length [N], got "
            f"{tuple(rewards.shape)} and {tuple(group_ids.shape)}"
        )
    if group_ids.is_floating_point() or group_ids.dtype == torch.bool:
        raise DataError("group_ids must be integer prompt indices (one per response)")
    if rewards.dtype != torch.float64:
        rewards = rewards.to(torch.float32)
    if not torch.isfinite(rewards).all():
        raise DataError("rewards contain NaN or infinity; check the reward function's output")
    return rewards, group_ids.to(torch.long)
