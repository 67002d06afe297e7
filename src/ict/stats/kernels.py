"""Row-block math for the token statistics: one block of n positions x V vocabulary entries.

Every function takes temperature-scaled logits `z` ([n, V], float32 or float64) and caller-owned
scratch buffers of the same shape, works in place where it can (no other [n, V] temporaries), and
returns [n] vectors. Conventions: nats, 0 log 0 = 0, -inf logits are vocabulary entries with p = 0.

    H(p)  = -sum_v p_v log p_v = log S - sum_v p_v u_v  (u = z - max z, S = sum exp u: one exp)
    H2(p) = -log sum_v p_v^2 = -logsumexp(2 log p)  (computed as -2 log ||p||_2, same value)
    JS(p, r) = H(m) - H(p)/2 - H(r)/2,  m = (p + r)/2,  clamped to [0, log 2]
    H(m) = log 2 - 1/2 sum_v s_v log s_v  with s = p + r = 2m (saves one pass over the block)
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

LOG2 = math.log(2.0)


def _finite_floor(x: Tensor) -> float:
    return torch.finfo(x.dtype).min


def policy_block_(z: Tensor, tokens: Tensor | None, p_out: Tensor, logp_buf: Tensor):
    """Entropy, Rényi-2 entropy and sampled-token log-probability of one block.

    z: [n, V] temperature-scaled logits (read only); tokens: [n] long or None (then logprob is None);
    p_out: [n, V] buffer that receives p = softmax(z); logp_buf: [n, V] scratch (clobbered).
    Returns (entropy [n], renyi2 [n], logprob [n] or None). A row with NaN/+inf logits, or with every
    logit -inf, gives a NaN entropy (the caller turns that into an error).

    One exp per entry: with u = z - max(z) and S = sum exp(u), p = exp(u) / S, log p = u - log S and
    H = log S - sum p u (the logsumexp form of -sum p log p), so p and log p come from one sweep
    instead of a softmax and a log_softmax (two exps per entry).
    """
    u = torch.sub(z, z.amax(dim=-1, keepdim=True), out=logp_buf)  # <= 0; -inf entries stay -inf
    torch.exp(u, out=p_out)
    total = p_out.sum(dim=-1, keepdim=True)
    log_total = total.log().squeeze(1)
    logprob = None
    if tokens is not None:  # before the clamp below: a -inf logit's token keeps log p = -inf
        logprob = u.gather(1, tokens[:, None]).squeeze(1).sub_(log_total)
    p_out.div_(total)
    renyi2 = torch.linalg.vector_norm(p_out, dim=-1).log_().mul_(-2.0)
    # sum p u with 0 * -inf = 0: a -inf entry (masked, p = 0) becomes the finite floor first.
    cross = u.clamp_(min=_finite_floor(u)).mul_(p_out).sum(dim=-1)
    entropy = log_total.sub_(cross)
    return entropy, renyi2, logprob


def mixture_entropy_(s: Tensor, scratch: Tensor) -> Tensor:
    """H(m) for m = s / 2, where s = p + r is given ([n, V], each row sums to 2); `scratch` [n, V]
    is clobbered. Returns [n]: log 2 - 1/2 sum_v s_v log s_v (0 log 0 = 0)."""
    torch.log(s, out=scratch)
    scratch.clamp_(min=_finite_floor(scratch)).mul_(s)
    return scratch.sum(dim=-1).mul_(-0.5).add_(LOG2)


def js_from_entropies(h_mix: Tensor, h_p: Tensor, h_r: Tensor) -> Tensor:
    """JS = H(m) - H(p)/2 - H(r)/2, clamped to [0, log 2] (rounding can step just outside)."""
    return (h_mix - 0.5 * h_p - 0.5 * h_r).clamp_(0.0, LOG2)


def distribution_entropy(r: Tensor, block_rows: int) -> Tensor:
    """Shannon entropy of the rows of a probability table r [K, V] (or [V] -> 0-dim), in blocks of
    `block_rows` rows so that only one [block_rows, V] temporary exists."""
    rows = r.reshape(-1, r.shape[-1])
    out = torch.empty(rows.shape[0], dtype=r.dtype, device=r.device)
    scratch = torch.empty(
        min(block_rows, rows.shape[0]), rows.shape[1], dtype=r.dtype, device=r.device
    )
    for s in range(0, rows.shape[0], block_rows):
        blk = rows[s : s + block_rows]
        buf = scratch[: blk.shape[0]]
        torch.log(blk, out=buf)
        out[s : s + blk.shape[0]] = buf.clamp_(min=_finite_floor(buf)).mul_(blk).sum(dim=-1).neg_()
    return out.reshape(r.shape[:-1])
