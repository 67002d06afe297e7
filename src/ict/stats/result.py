"""The per-token statistics container and a masked mean helper."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

REFERENCES = (
    "batch_mean",
    "group_mean",
    "sequence_mean",
    "previous_token",
    "reference_policy",
    "group_position",
)
DIVERGENCES = ("js", "kl")
# references computed over a prompt's group of completions: they need group_ids, and a batch of
# whole groups (on several processes, each process's rows)
GROUP_REFERENCES = ("group_mean", "group_position")


@dataclass
class TokenStats:
    """Per-token statistics of the policy distribution p_t, every field [B, T] float32, 0 where mask is False.

    entropy: Shannon entropy H(p_t), nats.
    renyi2:  Rényi-2 (collision) entropy -log sum_v p_t(v)^2, nats; 0 <= renyi2 <= entropy <= log V.
    logprob: log p_t(tokens[:, t]) (-inf only if the sampled token had a -inf logit).
    js:      Jensen-Shannon divergence JS(p_t, r_t) to the chosen reference r_t, nats, in [0, log 2].
    kl:      KL(p_t || r_t) to the same reference, nats, >= 0 (<= log G for group_position); None
             unless token_stats ran with divergence="kl".
    """

    entropy: Tensor
    renyi2: Tensor
    logprob: Tensor
    js: Tensor
    mask: Tensor | None = None  # [B, T] bool, the valid positions (set by token_stats)
    kl: Tensor | None = None

    @property
    def prob(self) -> Tensor:
        """Sampled-token probability exp(logprob), [B, T] float32, 0 where mask is False."""
        prob = self.logprob.exp()
        return prob if self.mask is None else prob.masked_fill_(~self.mask, 0.0)


# TokenStats' per-token statistic fields (every field but the mask; kl only with divergence="kl")
STAT_FIELDS = ("entropy", "renyi2", "logprob", "js", "kl")


def masked_mean(x: Tensor, mask: Tensor, empty: float = float("nan")) -> Tensor:
    """Mean of `x` over the positions where `mask` is True, in float32 (0-dim tensor).

    x: [...] any float tensor; mask: same shape, bool (or 0/1). Returns `empty` (default NaN) when
    the mask selects nothing.
    """
    if x.shape != mask.shape:
        raise ValueError(
            f"masked_mean: x has shape {tuple(x.shape)} but mask has {tuple(mask.shape)}; pass tensors of the same shape"
        )
    m = mask.bool()
    count = m.sum()
    total = torch.where(m, x.float(), torch.zeros((), dtype=torch.float32, device=x.device)).sum()
    return torch.where(
        count > 0, total / count.clamp(min=1), torch.full((), empty, device=x.device)
    )
