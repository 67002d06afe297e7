"""Exact top-k primitives shared by every ratio selector (pure functions, no Python loops over tokens).

Rules (METHOD.md, "ICT score and selection"):
- a group of n candidates keeps k = ceil(ratio * n) of them, at least 1 when n > 0;
- ties are broken by position in the input: the lower index wins (a stable sort on -score);
- never a `>= threshold` test, which would keep every tied candidate.

`ratio * n` is rounded to 6 decimals before the ceiling, so 0.1 * 30 keeps 3 (not 4 through the
floating-point error 0.1 * 30 = 3.0000000000000004).
"""

from __future__ import annotations

import torch
from torch import Tensor


def keep_count(n: Tensor, ratio: float) -> Tensor:
    """How many of `n` candidates a group keeps: ceil(ratio * n), at least 1 when n > 0, at most n.

    n: LongTensor[G] group sizes. Returns LongTensor[G].
    """
    raw = torch.round(n.to(torch.float64) * ratio * 1e6) / 1e6
    k = torch.ceil(raw).to(torch.long)
    return torch.minimum(k.clamp(min=1), n) * (n > 0)


def count_rule_mask(valid: Tensor, ratio: float) -> Tensor:
    """bool [B, T]: each row's first keep_count(n, ratio) valid tokens (n: the row's valid count).

    A per-row top-`ratio` keeps exactly keep_count(n, ratio) tokens of every row whatever its
    scores, and the loss normalisers (ict.loss.policy.loss_masks, LossConfig.count) are
    functions of the per-row counts only, so this mask gives the normalisers of such a selection
    before its scores exist (the one-forward step on every engine)."""
    valid = valid.bool()
    k = keep_count(valid.sum(dim=1), ratio)
    return valid & (valid.long().cumsum(dim=1) <= k[:, None])


def topk_per_group(scores: Tensor, ratio: float, groups: Tensor | None = None) -> Tensor:
    """Keep the top `ratio` of candidates by score inside each group.

    scores: float[N] (finite). groups: LongTensor[N] of non-negative group ids, or None for one
    group. Ties: lower index in `scores` first. Returns BoolTensor[N] with exactly
    keep_count(|group|, ratio) True entries per group.
    """
    n = scores.numel()
    if n == 0:
        return torch.zeros(0, dtype=torch.bool, device=scores.device)
    order = torch.argsort(-scores, stable=True)  # best first; equal scores keep index order
    if groups is None:
        groups = torch.zeros(n, dtype=torch.long, device=scores.device)
    order = order[torch.argsort(groups[order], stable=True)]  # group-major, score order inside
    sizes = torch.bincount(groups)
    starts = torch.cumsum(sizes, 0) - sizes
    sorted_groups = groups[order]
    rank_in_group = torch.arange(n, device=scores.device) - starts[sorted_groups]
    keep_sorted = rank_in_group < keep_count(sizes, ratio)[sorted_groups]
    keep = torch.empty(n, dtype=torch.bool, device=scores.device)
    keep[order] = keep_sorted
    return keep


def topk_token_ids(
    scores: Tensor, token_ids: Tensor, ratio: float, groups: Tensor | None = None
) -> Tensor:
    """`token_id` granularity: average the score per vocabulary id (inside each group), keep the
    top `ratio` of distinct ids (ceil; ties: lower id first) and every candidate holding one.

    scores: float[N]; token_ids: LongTensor[N] (>= 0); groups: LongTensor[N] or None.
    Returns BoolTensor[N].
    """
    if scores.numel() == 0:
        return torch.zeros(0, dtype=torch.bool, device=scores.device)
    if groups is None:
        groups = torch.zeros_like(token_ids)
    vocab = int(token_ids.max()) + 1
    units, inverse = torch.unique(groups * vocab + token_ids, return_inverse=True)  # sorted
    sums = torch.zeros(units.numel(), dtype=torch.float64, device=scores.device)
    sums.index_add_(0, inverse, scores.to(torch.float64))
    mean = sums / torch.bincount(inverse, minlength=units.numel())
    # units are sorted by (group, id), so the stable tie-break keeps the lower id first
    keep_unit = topk_per_group(mean, ratio, units // vocab)
    return keep_unit[inverse]


def quantile_linear(values: Tensor, q: float) -> Tensor:
    """The q-quantile of a 1-D tensor with linear interpolation (numpy's default method).

    values: float[N], N > 0. Returns a 0-d float tensor. Works for any N (torch.quantile caps N).
    """
    v = torch.sort(values.to(torch.float64)).values
    pos = q * (v.numel() - 1)
    lo = int(pos)
    hi = min(lo + 1, v.numel() - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)
