"""The built-in selectors (METHOD.md, "ICT score and selection" and "Baseline selectors").

Each is one small function of a `SelectionContext` (see `core.py`); scores are [B, T] floats
(higher = kept first), keep-masks are [B, T] bools. Selector names say what a selector keeps;
method names (ict.methods: ict, entropy, stapo, ...) say which paper's recipe runs. A method names
its selector: the paper's ICT is the selector `js_top` with the paper's reference, scope, loss and
warm-up. A selector's name also names a method (ict.methods.get_method: the selector with its own
facts and the common defaults); a method's name is no selector (`select_tokens("ict")` names the
unknown selector and the choices).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ict.errors import ConfigError
from ict.seeds import rank_seed
from ict.select.core import SelectionContext, register_selector
from ict.select.topk import quantile_linear


@register_selector("every")
def every(ctx: SelectionContext) -> Tensor:
    """Every valid token (plain GRPO)."""
    return ctx.mask


@register_selector(
    "js_top", default_ratio=0.10, default_scope="sequence", needs=("js",), row_local=True
)
def js_top(ctx: SelectionContext) -> Tensor:
    """The top of each response by the ICT score (arXiv 2606.19771): JS divergence of the position's distribution to the
    reference (stats.js); the paper keeps the top 10% of each response (scope "sequence")."""
    return ctx.require_stats("js_top", "js").js


@register_selector(
    "kl_top", default_ratio=0.10, default_scope="sequence", needs=("kl",), row_local=True
)
def kl_top(ctx: SelectionContext) -> Tensor:
    """The paper's ablation: score = KL(p || reference) (stats.kl) in place of JS."""
    return ctx.require_stats("kl_top", "kl").kl


@register_selector(
    "js_next_top", default_ratio=0.10, default_scope="sequence", needs=("js",), row_local=True
)
def js_next_top(ctx: SelectionContext) -> Tensor:
    """This project's branch-attributed variant (not the paper's): the token at t is scored by
    the JS score of the next valid position of its response, i.e. credited for making the
    group's contexts differ there (the paper's score is 0 where all rollouts still share the
    context, and high only after a branch). The last valid token of a response scores 0."""
    return next_valid(ctx.require_stats("js_next_top", "js").js, ctx.mask)


def next_valid(values: Tensor, mask: Tensor) -> Tensor:
    """[B, T]: at each valid position, `values` at the next valid position of the same row (0 at
    a row's last valid position and off the mask). Valid positions need not be contiguous."""
    rows, cols = torch.nonzero(mask, as_tuple=True)  # row-major: a row's positions in order
    out = torch.zeros_like(values)
    same_row = rows[1:] == rows[:-1]
    out[rows[:-1][same_row], cols[:-1][same_row]] = values[rows[1:][same_row], cols[1:][same_row]]
    return out


@register_selector(
    "js_bottom", default_ratio=0.90, default_scope="sequence", needs=("js",), row_local=True
)
def js_bottom(ctx: SelectionContext) -> Tensor:
    """The paper's "90%-frequent" ablation: the bottom 90% of each response by JS (score -JS)."""
    return -ctx.require_stats("js_bottom", "js").js


@register_selector("entropy_top", default_ratio=0.20, needs=("entropy",), row_local=True)
def entropy_top(ctx: SelectionContext) -> Tensor:
    """20-Entropy (arXiv 2506.01939): score = Shannon entropy of the position (stats.entropy)."""
    return ctx.require_stats("entropy_top", "entropy").entropy


@register_selector("uniform", default_ratio=0.10)
def uniform(ctx: SelectionContext) -> Tensor:
    """Control: i.i.d. uniform scores from a generator seeded by (seed, rank), so the top `ratio`
    is a uniform random subset of exactly k valid positions, reproducible for a given seed. Each
    process draws its own: ict.seeds.rank_seed(seed, rank)."""
    generator = torch.Generator().manual_seed(rank_seed(ctx.seed, ctx.rank))
    return torch.rand(ctx.mask.shape, generator=generator).to(ctx.mask.device)


@register_selector("not_spurious", needs=("entropy", "logprob", "advantages"))
def not_spurious(
    ctx: SelectionContext, *, prob_below: float = 0.01, entropy_quantile: float = 0.05
) -> Tensor:
    """STAPO (arXiv 2602.15620): keep every valid token except the spurious ones, those with
    advantage > 0, sampled probability exp(stats.logprob) < prob_below and stats.entropy strictly
    below the `entropy_quantile` quantile (linear interpolation) of the batch's valid entropies
    (over all ranks under torch.distributed, whatever the scope). Defaults come from a secondary
    source, not the paper."""
    if not 0 < prob_below <= 1:
        raise ConfigError(f"stapo prob_below must be in (0, 1], got {prob_below!r}")
    if not 0 <= entropy_quantile <= 1:
        raise ConfigError(f"stapo entropy_quantile must be in [0, 1], got {entropy_quantile!r}")
    stats = ctx.require_stats("not_spurious", "entropy", "logprob")
    advantages = ctx.require_advantages("not_spurious")
    return ~stapo_spurious(ctx, stats, advantages, prob_below, entropy_quantile)


@register_selector("nonzero_advantage", needs=("advantages",))
def nonzero_advantage(ctx: SelectionContext) -> Tensor:
    """Every valid token whose advantage is not 0: the responses PSR and NSR train on (arXiv
    2506.01347; their trainer drops the others from the batch, so a loss normalised by the
    selected tokens has the authors' denominator)."""
    return ctx.mask & (ctx.require_advantages("nonzero_advantage") != 0)


def stapo_spurious(ctx, stats, advantages, prob_below, entropy_quantile) -> Tensor:
    """bool[B, T]: the valid positions STAPO silences."""
    entropies = ctx.valid_values(stats.entropy)
    if entropies.numel() == 0:
        return torch.zeros_like(ctx.mask)
    threshold = quantile_linear(entropies, entropy_quantile)
    low_entropy = stats.entropy.to(torch.float64) < threshold
    return ctx.mask & (advantages > 0) & (torch.exp(stats.logprob) < prob_below) & low_entropy
