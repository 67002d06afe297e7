"""Sampling whose random numbers belong to the row, not to the batch: counter-based uniforms.

`torch.multinomial` draws from one generator for the whole batch, so a sample depends on which
other rows shared its batch and on the batch's shape (the chunked evaluation fixes both by fixing
its chunks). Here every row carries a 32-bit key and the uniform it uses at decoding step t is a
hash of (key, t): `uniforms(keys, step)` [N] float64 in [0, 1). A token is then drawn by inverse
CDF, `sample_rows(logits, u, ...)`: the first token whose cumulative probability exceeds u x the
total. So a row's tokens depend only on its key, the model and its own prefix: any batch size,
row order or removal of finished rows gives the same samples (up to float rounding of the
logits, which a batch's shape can change in the last bit on some kernels).

`row_keys(problem_seeds, n)`: the keys of n samples of each problem, [U * n], problem-major.
The hash is Chris Wellons' "lowbias32" finaliser, computed in int64 with products split so that
none overflows; two rounds give each uniform 53 random bits.
"""

from __future__ import annotations

import torch

_M32 = 0xFFFFFFFF


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """(x * c) mod 2^32 for x in [0, 2^32) (int64), without int64 overflow."""
    lo, hi = c & 0xFFFF, c >> 16
    return (x * lo + (((x * hi) & 0xFFFF) << 16)) & _M32


def mix32(x: torch.Tensor) -> torch.Tensor:
    """lowbias32: a bijective 32-bit hash of x (int64 tensor, taken mod 2^32)."""
    x = x & _M32
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def row_keys(problem_seeds: torch.Tensor, n: int) -> torch.Tensor:
    """[U * n] int64 keys of samples j = 0..n-1 of each problem (problem-major), from each
    problem's 31-bit seed [U]."""
    seeds = problem_seeds.long().repeat_interleave(n)
    j = torch.arange(n, dtype=torch.long).repeat(problem_seeds.shape[0])
    return mix32(mix32(seeds) ^ mix32(j + 0x9E3779B9))


def uniforms(keys: torch.Tensor, step: int) -> torch.Tensor:
    """[N] float64 uniforms in [0, 1) of decoding step `step` for rows with `keys` [N]."""
    h1 = mix32(keys ^ mix32(torch.full_like(keys, step) + 0x632BE5AB))
    h2 = mix32(h1 ^ 0x5851F42D)
    return ((h1 << 21) | (h2 >> 11)).double() / float(2**53)


def top_p_mask(scores: torch.Tensor, top_p: float) -> torch.Tensor:
    """HF's TopPLogitsWarper (min_tokens_to_keep = 1): -inf outside the top-p nucleus."""
    sorted_logits, sorted_indices = torch.sort(scores, descending=False)
    cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    remove = cumulative <= (1 - top_p)
    remove[..., -1:] = 0
    remove = remove.scatter(1, sorted_indices, remove)
    return scores.masked_fill(remove, -float("inf"))


def sample_rows(
    logits: torch.Tensor, u: torch.Tensor, *, temperature: float, top_p: float
) -> torch.Tensor:
    """[N] long: one token per row of `logits` [N, V] (float32), drawn by inverse CDF with the
    row's uniform `u` [N] from softmax(logits / temperature) after top-p (greedy when the
    temperature is 0)."""
    if temperature <= 0:
        return torch.argmax(logits, dim=-1)
    if temperature != 1.0:
        logits = logits / temperature
    if top_p < 1.0:
        logits = top_p_mask(logits, top_p)
    cdf = torch.softmax(logits, dim=-1).cumsum(dim=-1)
    total = cdf[:, -1]
    # below the total even after rounding to float32, so that some token's cdf exceeds it
    target = torch.minimum((u * total.double()).to(cdf.dtype), torch.nextafter(total, 0 * total))
    target = target[:, None]
    # the first token whose cumulative probability exceeds the target (a token of zero
    # probability never does, since its cdf equals its predecessor's)
    index = torch.searchsorted(cdf, target, right=True).squeeze(1)
    return index.clamp_(max=logits.shape[-1] - 1)
