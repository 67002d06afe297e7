"""A training step's token metrics, one implementation for the native trainer, TRL and verl (the
evaluations' pass@k is ict.eval.metrics).

    token_metrics(stats, mask, selected, selections) -> {"valid/entropy": ..., "selected/js": ...,
        "selected_fraction": ..., "by_selector/ict/fraction": ..., "paper/collapse_share": ..., ...}

Keys follow docs/ARCHITECTURE.md ("metrics.jsonl keys"). The paper's diagnostics (METHOD.md,
"Analysis"): a selected token with p(y_t) > beta_t = exp(-H2_t) pushes the Rényi-2 entropy down
when reinforced (the collapse regime), one with p(y_t) < beta_t pushes it up (the explosion
regime); and the ratio of high- to low-entropy tokens among the selected, split at the median
entropy of the step's valid tokens.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def masked_mean_float(values: Tensor, where: Tensor) -> float:
    """Mean of `values` over `where` (bool, same shape) as a float; NaN when `where` is empty."""
    n = int(where.sum())
    return float(torch.where(where, values.float(), 0.0).sum() / n) if n else math.nan


def regime_metrics(stats, selected: Tensor, mask: Tensor) -> dict[str, float]:
    """The paper's collapse/explosion split and high/low-entropy ratio of the selected tokens.

    stats: TokenStats-like with entropy, renyi2, logprob [B, T]; selected, mask: bool [B, T].
    Returns paper/collapse_share (share of selected tokens with p(y) > exp(-H2)),
    paper/explosion_share (p(y) < exp(-H2)), paper/high_low_entropy_ratio (selected tokens with
    H above the median H of the valid tokens, over those at or below it; NaN if none below),
    paper/entropy_split (that median, nats).
    """
    sel = selected & mask
    n_sel = int(sel.sum())
    out = {
        "paper/collapse_share": math.nan,
        "paper/explosion_share": math.nan,
        "paper/high_low_entropy_ratio": math.nan,
        "paper/entropy_split": math.nan,
    }
    if n_sel == 0:
        return out
    prob = stats.logprob.exp()
    beta = torch.exp(-stats.renyi2)
    out["paper/collapse_share"] = int((sel & (prob > beta)).sum()) / n_sel
    out["paper/explosion_share"] = int((sel & (prob < beta)).sum()) / n_sel
    split = float(stats.entropy[mask].float().median())
    high = int((sel & (stats.entropy > split)).sum())
    out["paper/entropy_split"] = split
    out["paper/high_low_entropy_ratio"] = high / (n_sel - high) if n_sel > high else math.nan
    return out


def token_metrics(
    stats, mask: Tensor, selected: Tensor, selections: dict[str, Tensor] | None = None
) -> dict[str, float]:
    """Means of H, H2, JS and p(y) over valid and selected tokens, the selected fraction, the
    paper's regime diagnostics and, per named selection (e.g. ict, entropy, stapo on the same
    batch), its fraction and means.

    stats: TokenStats-like ([B, T] entropy, renyi2, js, logprob; optional kl); mask, selected and
    each selection: bool [B, T]. Values are python floats (NaN where a set is empty).
    """
    prob = stats.logprob.exp()
    fields = {"entropy": stats.entropy, "renyi2": stats.renyi2, "js": stats.js, "prob": prob}
    if getattr(stats, "kl", None) is not None:
        fields["kl"] = stats.kl
    selected = selected & mask
    n_valid = int(mask.sum())
    out: dict[str, float] = {}
    for where_name, where in (("valid", mask), ("selected", selected)):
        for key, values in fields.items():
            out[f"{where_name}/{key}"] = masked_mean_float(values, where)
    out["selected_fraction"] = int(selected.sum()) / max(1, n_valid)
    out["valid_tokens"] = n_valid
    out.update(regime_metrics(stats, selected, mask))
    for name, sel in (selections or {}).items():
        sel = sel & mask
        out[f"by_selector/{name}/fraction"] = int(sel.sum()) / max(1, n_valid)
        for key, values in fields.items():
            out[f"by_selector/{name}/{key}"] = masked_mean_float(values, sel)
    return out


class ParamChange:
    """`update/param_change_rel` = ||theta_after - theta_before|| / ||theta_before||: how far a
    step's updates moved the weights, relative to their size (one engine-independent key).

    One snapshot of the trainable parameters when built (`ParamChange(params)`, before the step's
    first update), one pass over them in `sums()` after its last: the cost of one parameter copy
    per step, nothing per micro-batch. Norms accumulate in float64 over every tensor.

        change = ParamChange(model.parameters())
        ...  # the step's optimizer updates
        rel = change.relative()

    Sharded parameters (FSDP, one shard per process): pass `reduce`, a function that sums a
    float64 tensor over processes; replicated parameters (DDP) may be summed too (the ratio is
    unchanged). Shards of size 0 (ZeRO-3 placeholders) contribute nothing."""

    def __init__(self, params):
        self.params = [p for p in params if p.requires_grad]
        self.before = [p.detach().clone() for p in self.params]

    @torch.no_grad()
    def sums(self) -> Tensor:
        """float64 [2]: (sum of ||theta - theta_before||^2, sum of ||theta_before||^2), this
        process's tensors."""
        device = self.params[0].device if self.params else "cpu"
        out = torch.zeros(2, dtype=torch.float64, device=device)
        for p, b in zip(self.params, self.before, strict=True):
            if b.numel() == 0:
                continue
            out[0] += torch.linalg.vector_norm((p.detach() - b).double()).square()
            out[1] += torch.linalg.vector_norm(b.double()).square()
        return out

    def relative(self, reduce=None) -> float:
        """The relative change (0.0 for parameters of norm 0); frees the snapshot."""
        sums = self.sums()
        if reduce is not None:
            sums = reduce(sums)
        self.before = []
        return float(sums[0].sqrt() / sums[1].sqrt()) if float(sums[1]) > 0 else 0.0


def sorted_score_curve(scores: Tensor, mask: Tensor, points: int = 101) -> list[float]:
    """The paper's sorted-score curve: the valid scores sorted in decreasing order, sampled at
    `points` evenly spaced quantiles of rank (index 0 = the highest score; the 10% mark is at
    index (points - 1) // 10). scores, mask: [B, T]. Empty -> []."""
    values = scores[mask].float().sort(descending=True).values
    if values.numel() == 0:
        return []
    idx = torch.linspace(0, values.numel() - 1, points).round().long()
    return [round(float(v), 6) for v in values[idx]]
