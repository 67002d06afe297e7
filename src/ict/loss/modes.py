"""The per-token policy losses ("loss modes", verl's word): the clipped surrogate and the two
covariance-based entropy controls of "The Entropy Mechanism of Reinforcement Learning for Reasoning
Language Models" (Cui et al., arXiv 2505.22617), as verl's `core_algos` implements them.

With rho = exp(log pi - log pi_old), A the advantage, M the loss mask, and the centred covariance
of each token in M (means over M; the log-prob is the current policy's, detached):

    cov_t = (A_t - mean_M A) * (log pi(y_t) - mean_M log pi)

    vanilla   l_t = max(-A rho, -A clip(rho, 1 - eps_low, 1 + eps_high))   (+ optional dual clip)
    clip_cov  the ratio-clipped surrogate (no dual clip), except that max(1, int(clip_cov_ratio
              |M|)) tokens drawn at random among those with clip_cov_lb < cov_t < clip_cov_ub and
              not already clipped by the ratio clip get l_t = 0 (their gradient is cut).
    kl_cov    l_t = -A rho (no ratio clip) on every token, plus kl_cov_coef |log pi - log pi_old|
              on the max(1, int(kl_cov_ratio |M|)) tokens with the largest cov_t.

Neither mode has a dual clip (verl's functions have none; `LossConfig` refuses `dual_clip` with a
mode). The count max(1, int(r |M|)) (`mode_count`) is at least one token per loss call: below
|M| = 1 / r tokens per call the floor, not r, sets how many tokens a mode changes
(`loss_mode_metrics` reports the realised count and rate, METHOD.md says when it dominates).

The covariance and the counts are over the tokens of one loss call (a micro-batch on every
engine, as in verl and the paper's code). Clip-Cov's draw uses `generator` (None: torch's global
generator, as verl's `torch.randperm`), so a seeded engine reproduces it. Defaults are the
paper's published recipes (PRIME-RL/Entropy-Mechanism-of-RL, recipe/entropy/7b_clip_cov.sh and
7b_kl_cov.sh): clip_cov_ratio 2e-4 with bounds (1, 5); kl_cov_ratio 2e-3 with coefficient 1.
(verl's `PolicyLossConfig` defaults to kl_cov_ratio 2e-4 and ppo_kl_coef 0.1; the verl plugin
passes ict's values, so every engine runs the same ones.)
"""

from __future__ import annotations

import torch
from torch import Tensor

from ict.loss.options import LOSS_MODE_KEYS, LOSS_MODES, NOMINAL_RATE_FIELD, CovarianceOptions

__all__ = [
    "LOSS_MODES", "LOSS_MODE_KEYS", "CovarianceOptions", "apply_loss_mode", "clip_cov_cut",
    "kl_cov_picked", "loss_mode_metrics", "mode_count", "token_covariance",
]  # fmt: skip


def mode_count(ratio: float, tokens: int) -> int:
    """The tokens a mode changes in one loss call of `tokens` loss tokens: max(1, int(ratio x
    tokens)) (verl's and the authors' rule; the floor of one dominates below 1 / ratio tokens)."""
    return max(1, int(ratio * tokens))


def loss_mode_metrics(
    mode: str, options: CovarianceOptions, changed: int, tokens: int
) -> dict[str, float]:
    """The loss mode's metrics (LOSS_MODE_KEYS) from counts summed over loss calls: `changed`
    tokens the mode altered among `tokens` loss tokens (|M|). {} for vanilla; the rate is NaN
    when there were no loss tokens."""
    if mode == "vanilla":
        return {}
    return {
        "loss_mode/changed_tokens": int(changed),
        "loss_mode/changed_rate": changed / tokens if tokens else float("nan"),
        "loss_mode/nominal_rate": float(getattr(options, NOMINAL_RATE_FIELD[mode])),
    }


def token_covariance(logprob: Tensor, advantages: Tensor, loss_mask: Tensor) -> Tensor:
    """[B, T] float: cov_t over the tokens of `loss_mask` (module docstring); 0 off the mask.

    logprob: [B, T] current log pi(y_t) (detached here); advantages: [B, T]; loss_mask: bool."""
    n = loss_mask.sum().clamp_min(1)
    lp = torch.where(loss_mask, logprob.detach(), 0.0)
    adv = torch.where(loss_mask, advantages.detach(), 0.0)
    cov = (adv - adv.sum() / n) * (lp - lp.sum() / n)
    return torch.where(loss_mask, cov, 0.0)


def clip_cov_cut(
    logprob: Tensor,
    advantages: Tensor,
    loss_mask: Tensor,
    ratio_clipped: Tensor,
    options: CovarianceOptions,
    *,
    generator: torch.Generator | None = None,
) -> Tensor:
    """bool [B, T]: the tokens whose loss Clip-Cov sets to 0.

    ratio_clipped: bool [B, T], tokens where the ratio clip is already active (they are not
    candidates). Draws `max(1, int(clip_cov_ratio * |M|))` of the candidates uniformly (a random
    permutation of the candidates in row-major order, first ones kept, as verl)."""
    cov = token_covariance(logprob, advantages, loss_mask)
    candidate = (
        loss_mask & ~ratio_clipped & (cov > options.clip_cov_lb) & (cov < options.clip_cov_ub)
    )
    cut = torch.zeros_like(loss_mask)
    index = torch.nonzero(candidate)
    if len(index) == 0:
        return cut
    count = mode_count(options.clip_cov_ratio, int(loss_mask.sum()))
    order = torch.randperm(len(index), generator=generator)
    index = index[order[: min(count, len(index))].to(index.device)]
    cut[index[:, 0], index[:, 1]] = True
    return cut


def kl_cov_picked(
    logprob: Tensor, advantages: Tensor, loss_mask: Tensor, options: CovarianceOptions
) -> Tensor:
    """bool [B, T]: the `max(1, int(kl_cov_ratio * |M|))` tokens of M with the largest cov_t
    (torch.topk over M's tokens in row-major order, as verl); none when M is empty."""
    picked = torch.zeros_like(loss_mask)
    flat = loss_mask.reshape(-1).nonzero(as_tuple=True)[0]
    if len(flat) == 0:
        return picked
    adv = advantages.detach().reshape(-1)[flat].cpu()
    lp = logprob.detach().reshape(-1)[flat].cpu()
    cov = (adv - adv.mean()) * (lp - lp.mean())
    count = mode_count(options.kl_cov_ratio, len(cov))
    top = flat[torch.topk(cov, count, largest=True).indices.to(flat.device)]
    picked.view(-1)[top] = True
    return picked


def apply_loss_mode(
    mode: str,
    per_token: Tensor,
    *,
    logprob: Tensor,
    old_logprob: Tensor,
    ratio: Tensor,
    advantages: Tensor,
    loss_mask: Tensor,
    options: CovarianceOptions,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """The loss mode's per-token loss from the vanilla one. Returns (per_token [B, T], changed:
    bool [B, T], the tokens the mode altered: cut by Clip-Cov, penalised by KL-Cov).

    per_token: [B, T] the clipped surrogate (ict.loss.clipped_token_loss); ratio: its rho [B, T];
    advantages: [B, T] with 0 off the mask."""
    if mode == "vanilla":
        return per_token, torch.zeros_like(loss_mask)
    A = torch.where(loss_mask, advantages.detach().to(per_token.dtype), 0.0)
    if mode == "clip_cov":
        unclipped = -A * ratio
        ratio_clipped = loss_mask & (per_token.detach() > unclipped.detach())
        cut = clip_cov_cut(logprob, A, loss_mask, ratio_clipped, options, generator=generator)
        return torch.where(cut, per_token * 0.0, per_token), cut
    if mode == "kl_cov":
        picked = kl_cov_picked(logprob, A, loss_mask, options)
        log_ratio = torch.where(loss_mask, logprob - old_logprob.detach(), 0.0)
        unclipped = torch.where(loss_mask, -A * ratio, 0.0)
        penalty = options.kl_cov_coef * log_ratio.abs()
        return torch.where(picked, unclipped + penalty, unclipped), picked
    raise ValueError(f"unknown loss mode {mode!r}; choose from {LOSS_MODES}")
