"""token_stats / token_stats_from_hidden: per-token H, H2, log p(y) and JS to a reference.

Only valid positions are computed. They are flattened to N rows in (row, position) order and
processed in chunks of `chunk_size` rows (one LM-head matmul per chunk on the hidden path), each
chunk in blocks of rows that fit the CPU cache (on GPU a block is the whole chunk). Working memory:
one [chunk_size, V] logits buffer (two for `reference_policy`) plus two [block, V] scratch buffers,
all in the compute dtype (float32; float64 for float64 inputs), and on the hidden path a float32
copy of a bf16/fp16 [V, D] head weight (cast once per call, so the matmul accumulates in float32).
The full [N, V] tensor never exists.
The default chunk takes 1/16 of the full logits' bytes (N/16 rows), within 32..128 MiB.
Precision: JS is a difference of entropies, so its absolute error in float32 is ~1e-6 nats.

References r_t (docs/METHOD.md):
  batch_mean      mean of p over all valid positions (all ranks: sum and count are all-reduced).
                  Two passes: pass 1 computes H, H2, log p(y) and sums p; pass 2 recomputes p for JS.
  group_mean      mean over the valid positions of the rows with the same group_ids[b] (this rank).
  sequence_mean   mean over the valid positions of the same row. Group/sequence means hold a
                  [K, V] table (K groups or rows): that memory is the reference itself.
  previous_token  r_t = p at index t-1 of the same row of the [B, T] layout, whatever the mask says
                  there: with the full prompt+response sequence, the first response token is compared
                  to the distribution at the last prompt position. At t = 0 there is no previous
                  distribution: r = p, JS = 0. One pass (rows t-1 are computed alongside).
  reference_policy  r_t = softmax(reference logits / T) at the same position. One pass.
  group_position  the paper's score: r = mean of p over the rows of the same group_ids[b] at the same
                  aligned position k (k = index of the position among its row's valid positions, so
                  rows whose responses start at different columns align), over the rows that reach
                  k. A (group, k) cell with one row scores exactly 0. One pass, chunked by whole
                  cells: a chunk holds consecutive cells in (group, k) order, at most chunk_size
                  rows, or a single cell when that cell alone has more rows than chunk_size (the
                  bound is then max(chunk_size, G)); blocks inside it likewise hold whole cells, so
                  a cell's mean and its rows' JS are computed while its p is in cache. Working
                  memory: one [chunk, V] logits buffer (a block's cell means overwrite its logits)
                  plus three [block, V] buffers - O(G x block x V), never groups x T x V. Default
                  chunk as above (on GPU, where block = chunk, the three buffers count towards the
                  1/16). Under torch.distributed every group's rows must sit on one rank (checked).

divergence="kl" (group_position only) also returns KL(p || r) = sum p log p - sum p log r in
TokenStats.kl; r > 0 wherever p > 0 since r includes p / G.
"""

from __future__ import annotations

import bisect
import math

import torch
import torch.distributed as dist
from torch import Tensor

from ict.errors import ConfigError, DataError
from ict.head import LogitHead
from ict.stats.kernels import (
    distribution_entropy,
    js_from_entropies,
    mixture_entropy_,
    policy_block_,
)
from ict.stats.logit_sources import HiddenSource, LogitsSource, elementwise_on_one_thread
from ict.stats.result import DIVERGENCES, GROUP_REFERENCES, REFERENCES, TokenStats

MIN_CHUNK_BYTES = 32 << 20  # default chunk: 1/16 of the full logits' bytes, within 32..128 MiB
MAX_CHUNK_BYTES = 128 << 20  # (N/16 rows, 55..220 rows at V = 151936 for float32 inputs)
CPU_BLOCK_BYTES = 4 << 20  # elementwise blocks on CPU stay in cache (6 rows at V = 151936)


def token_stats(
    logits: Tensor,
    tokens: Tensor,
    mask: Tensor,
    *,
    temperature: float = 1.0,
    reference: str = "batch_mean",
    group_ids: Tensor | None = None,
    reference_logits: Tensor | None = None,
    chunk_size: int | None = None,
    process_group=None,
    divergence: str = "js",
) -> TokenStats:
    """Token statistics from materialised logits.

    logits: [B, T, V] any float dtype, logits[:, t] predicts tokens[:, t] (already shifted);
    tokens: [B, T] long; mask: [B, T] bool, True on response tokens. temperature: the rollout's
    sampling temperature (p = softmax(logits / temperature)). reference: one of REFERENCES.
    group_ids: [B] long prompt index of each row, global across ranks (for "group_mean" and
    "group_position"). reference_logits: [B, T, V] (for "reference_policy"). chunk_size: rows of
    [*, V] logits materialised at once (default: 1/16 of the full float32 logits' bytes - N/16 rows -
    within 32..128 MiB; group_position: see the module docstring). process_group: under
    torch.distributed, "batch_mean" all-reduces its sum and count over it and "group_position"
    checks that no group is split across its ranks (default: the world group if initialised).
    divergence: "js" (default) or "kl" (group_position only: TokenStats.kl is filled too, js stays
    JS). Returns TokenStats, fields [B, T] float32 and 0 where mask is False. No gradient.
    """
    if logits.dim() != 3:
        raise DataError(
            f"logits must be [B, T, V], got shape {tuple(logits.shape)}; pass one distribution per (row, position)"
        )
    tokens, mask = _check_common(
        logits.shape[:2], tokens, mask, temperature, reference, group_ids, logits.device, divergence
    )
    policy = LogitsSource(logits, temperature)
    ref = None
    if reference == "reference_policy":
        if reference_logits is None:
            raise ConfigError(
                'reference="reference_policy" needs reference_logits=[B, T, V] (the reference model\'s logits at the same positions)'
            )
        if reference_logits.shape != logits.shape:
            raise DataError(
                f"reference_logits has shape {tuple(reference_logits.shape)} but logits has {tuple(logits.shape)}; they must match"
            )
        ref = LogitsSource(reference_logits.to(logits.device), temperature)
    elif reference_logits is not None:
        raise ConfigError(
            f'reference_logits is only used with reference="reference_policy", not "{reference}"; drop it or change the reference'
        )
    with elementwise_on_one_thread(policy.device):
        return _token_stats(
            policy, ref, tokens, mask, reference, group_ids, chunk_size, process_group, divergence
        )


def token_stats_from_hidden(
    hidden: Tensor,
    head: LogitHead,
    tokens: Tensor,
    mask: Tensor,
    *,
    temperature: float = 1.0,
    reference: str = "batch_mean",
    group_ids: Tensor | None = None,
    reference_hidden: Tensor | None = None,
    reference_head: LogitHead | None = None,
    chunk_size: int | None = None,
    process_group=None,
    divergence: str = "js",
) -> TokenStats:
    """Token statistics from final hidden states and the logit head, never building [N, V] logits.

    hidden: [B, T, D] (hidden[:, t] is the state whose logits predict tokens[:, t]); head: the
    model's ict.head.LogitHead (weight [V, D], bias [V] or None, its logit scale and soft cap:
    `ict.head.logit_head(model)`), so the logits are the ones the model samples from. The matmul
    and the statistics accumulate in float32 (float64 for a float64 weight) whatever the weight's
    dtype. reference_hidden [B, T, D'] with reference_head (a [V, D'] LogitHead; None: `head`)
    give the "reference_policy" distribution. Other arguments and the result as in `token_stats`.
    """
    if not isinstance(hidden, Tensor):
        raise DataError(
            f"hidden must be a tensor (the model's final hidden states), got {type(hidden).__name__}"
        )
    if not isinstance(head, LogitHead):
        raise DataError(
            "head must be an ict.head.LogitHead (ict.head.logit_head(model), or "
            f"LogitHead(model.lm_head.weight)), got {type(head).__name__}"
        )
    if hidden.dim() != 3:
        raise DataError(f"hidden must be [B, T, D], got shape {tuple(hidden.shape)}")
    if head.weight.dim() != 2 or head.weight.shape[1] != hidden.shape[-1]:
        raise DataError(
            f"the head's weight must be [V, D] with D = {hidden.shape[-1]} (hidden's last dim), got {tuple(head.weight.shape)}"
        )
    _check_bias(head.bias, head.weight, "the head's bias")
    tokens, mask = _check_common(
        hidden.shape[:2], tokens, mask, temperature, reference, group_ids, hidden.device, divergence
    )
    policy = HiddenSource(hidden, head, temperature)
    ref = None
    if reference == "reference_policy":
        if reference_hidden is None:
            raise ConfigError(
                'reference="reference_policy" needs reference_hidden=[B, T, D] (and reference_head if the reference head differs)'
            )
        ref_head = head if reference_head is None else reference_head
        if (
            reference_hidden.shape[:2] != hidden.shape[:2]
            or ref_head.weight.dim() != 2
            or ref_head.weight.shape[1] != reference_hidden.shape[-1]
        ):
            raise DataError(
                f"reference_hidden {tuple(reference_hidden.shape)} / reference head {tuple(ref_head.weight.shape)} do not fit: need [B, T, D'] with B, T as hidden and a [V, D'] head"
            )
        if ref_head.weight.shape[0] != head.weight.shape[0]:
            raise DataError(
                f"the reference head has V = {ref_head.weight.shape[0]} but the policy head has V = {head.weight.shape[0]}; both must share the vocabulary"
            )
        _check_bias(ref_head.bias, ref_head.weight, "the reference head's bias")
        ref = HiddenSource(reference_hidden.to(hidden.device), ref_head, temperature)
    elif reference_hidden is not None or reference_head is not None:
        raise ConfigError(
            f'reference_hidden / reference_head are only used with reference="reference_policy", not "{reference}"'
        )
    with elementwise_on_one_thread(policy.device):
        return _token_stats(
            policy, ref, tokens, mask, reference, group_ids, chunk_size, process_group, divergence
        )


# ---------------------------------------------------------------------------------------------
# Validation


def _check_bias(bias, weight, name):
    if bias is not None and bias.shape != (weight.shape[0],):
        raise DataError(f"{name} must be [V] = [{weight.shape[0]}], got {tuple(bias.shape)}")


def _check_common(bt, tokens, mask, temperature, reference, group_ids, device, divergence):
    if reference not in REFERENCES:
        raise ConfigError(f"unknown reference {reference!r}; choose one of {', '.join(REFERENCES)}")
    if divergence not in DIVERGENCES:
        raise ConfigError(
            f"unknown divergence {divergence!r}; choose one of {', '.join(DIVERGENCES)}"
        )
    if divergence == "kl" and reference != "group_position":
        raise ConfigError(
            f'divergence="kl" is implemented for reference="group_position" only, not "{reference}"; '
            'use reference="group_position" or divergence="js"'
        )
    if not (
        isinstance(temperature, (int, float)) and math.isfinite(temperature) and temperature > 0
    ):
        raise ConfigError(
            f"temperature must be a finite number > 0 (the rollout's sampling temperature), got {temperature!r}"
        )
    if tuple(tokens.shape) != tuple(bt) or tuple(mask.shape) != tuple(bt):
        raise DataError(
            f"tokens {tuple(tokens.shape)} and mask {tuple(mask.shape)} must both be [B, T] = {tuple(bt)}"
        )
    if tokens.dtype.is_floating_point or tokens.dtype == torch.bool:
        raise DataError(f"tokens must be an integer tensor (token ids), got {tokens.dtype}")
    if reference in GROUP_REFERENCES:
        if group_ids is None:
            raise ConfigError(
                f'reference="{reference}" needs group_ids=[B] (the prompt index of each row)'
            )
        if not isinstance(group_ids, Tensor):
            raise DataError(
                f"group_ids must be an integer tensor [B], got {type(group_ids).__name__} "
                "(wrap it: torch.tensor(group_ids))"
            )
        if tuple(group_ids.shape) != (bt[0],) or group_ids.dtype.is_floating_point:
            raise DataError(
                f"group_ids must be an integer tensor of shape [B] = [{bt[0]}], got {tuple(group_ids.shape)} {group_ids.dtype}"
            )
    return tokens.to(device=device, dtype=torch.long), mask.to(device=device, dtype=torch.bool)


def _plan(chunk_size, vocab, dtype, device, gathers_rows, n_rows, temp_row_bytes=0):
    """(rows per fill, rows per elementwise block).

    Default chunk: its buffers (the logits chunk plus any matmul temporary, `temp_row_bytes` per row)
    take 1/16 of what the full [N, V] logits would, clamped to MIN_CHUNK_BYTES..MAX_CHUNK_BYTES:
    few LM-head matmuls (each streams the whole [V, D] weight), bounded memory whatever N is.
    """
    row_bytes = vocab * torch.finfo(dtype).bits // 8
    if chunk_size is None:
        chunk_row_bytes = row_bytes + temp_row_bytes
        lo, hi = (max(1, b // chunk_row_bytes) for b in (MIN_CHUNK_BYTES, MAX_CHUNK_BYTES))
        chunk_size = min(hi, max(lo, -(-n_rows * row_bytes // (16 * chunk_row_bytes))))
    elif isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ConfigError(
            f"chunk_size must be a positive int (rows of [*, V] logits at once), got {chunk_size!r}"
        )
    on_cpu = device.type == "cpu"
    block = max(1, min(chunk_size, CPU_BLOCK_BYTES // row_bytes)) if on_cpu else chunk_size
    return (block if gathers_rows else chunk_size), block


def _blocks(source, rows, positions, plan, zbuf):
    """Yield (offset, z block [n, V]) over the given positions, filling `zbuf` chunk by chunk."""
    fill_rows, block = plan
    for s in range(0, rows.numel(), fill_rows):
        z = source.fill(rows[s : s + fill_rows], positions[s : s + fill_rows], zbuf)
        for o in range(0, z.shape[0], block):
            yield s + o, z[o : o + block]


def _raise_if_bad(entropy, rows, positions, what="logits"):
    bad = ~torch.isfinite(entropy)
    if bool(bad.any()):
        i = int(bad.nonzero()[0, 0])
        raise DataError(
            f"{what} at (row {int(rows[i])}, position {int(positions[i])}) contain NaN or +inf, or are all -inf; "
            "check the model output (fp16 overflow?) and any vocabulary masking"
        )


def _reduce_group(process_group):
    if process_group is not None:
        return process_group
    if dist.is_available() and dist.is_initialized():
        return dist.group.WORLD
    return None


# ---------------------------------------------------------------------------------------------
# Driver


@torch.no_grad()
def _token_stats(
    policy, ref, tokens, mask, reference, group_ids, chunk_size, process_group, divergence="js"
) -> TokenStats:
    B, T = mask.shape
    V, dt, dev = policy.vocab, policy.dtype, policy.device
    if reference == "group_position":  # first: every rank joins the check before any local error
        group_ids = group_ids.to(dev)
        _check_groups_rank_local(group_ids, mask, _reduce_group(process_group))
    n_valid = int(mask.sum())
    plan = _plan(chunk_size, V, dt, dev, policy.gathers_rows, n_valid, policy.temp_row_bytes)
    b, t = mask.nonzero(as_tuple=True)
    tok = tokens[b, t]
    bad_tok = (tok < 0) | (tok >= V)
    if bool(bad_tok.any()):
        i = int(bad_tok.nonzero()[0, 0])
        raise DataError(
            f"token id {int(tok[i])} at (row {int(b[i])}, position {int(t[i])}) is outside the vocabulary [0, {V}); check the tokenizer/model pairing and the mask"
        )

    kl = None
    if reference == "previous_token":
        ent, ren, lp, js = _previous_token(policy, b, t, tok, T, plan)
    elif reference == "group_position":
        k = (mask.long().cumsum(1) - 1)[b, t]  # aligned position: index among the row's valid ones
        _, seg = torch.unique(group_ids[b], return_inverse=True)
        ent, ren, lp, js, kl = _group_position(
            policy, b, t, tok, seg, k, T, chunk_size, divergence == "kl"
        )
    elif reference == "reference_policy":
        ent, ren, lp, js = _reference_policy(policy, ref, b, t, tok, plan)
    else:
        if reference == "batch_mean":
            seg, K = torch.zeros_like(b), 1
        else:
            keys = group_ids.to(dev)[b] if reference == "group_mean" else b
            uniq, seg = torch.unique(keys, return_inverse=True)
            K = uniq.numel()
        group = _reduce_group(process_group) if reference == "batch_mean" else None
        ent, ren, lp, js = _mean_reference(policy, b, t, tok, seg, K, plan, group)

    ent = ent.clamp(0.0, math.log(V))
    ren = torch.minimum(ren.clamp(min=0.0), ent)

    def grid(x):
        out = torch.zeros(B, T, dtype=torch.float32, device=dev)
        out[b, t] = x.to(torch.float32)
        return out

    return TokenStats(
        entropy=grid(ent),
        renyi2=grid(ren),
        logprob=grid(lp),
        js=grid(js),
        mask=mask,
        kl=None if kl is None else grid(kl),
    )


def _buffers(n, V, dt, dev, k):
    return [torch.empty(n, V, dtype=dt, device=dev) for _ in range(k)]


def _mean_reference(policy, b, t, tok, seg, K, plan, group):
    """batch/group/sequence mean: pass 1 stats + sum of p per segment, pass 2 JS to the mean."""
    N, V, dt, dev = b.numel(), policy.vocab, policy.dtype, policy.device
    ent, ren, lp, js = (torch.empty(N, dtype=dt, device=dev) for _ in range(4))
    zbuf = torch.empty(min(plan[0], max(N, 1)), V, dtype=dt, device=dev)
    P, L = _buffers(min(plan[1], max(N, 1)), V, dt, dev, 2)
    # batch mean: a float64 [V] sum (cheap, and equal on every rank); group/sequence: [K, V] table.
    acc = torch.zeros(K, V, dtype=torch.float64 if K == 1 else dt, device=dev)
    for o, z in _blocks(policy, b, t, plan, zbuf):
        n = z.shape[0]
        p = P[:n]
        ent[o : o + n], ren[o : o + n], lp[o : o + n] = policy_block_(z, tok[o : o + n], p, L[:n])
        if K == 1:
            acc[0] += p.sum(dim=0)
        else:
            acc.index_add_(0, seg[o : o + n], p)
    count = torch.bincount(seg, minlength=K).to(torch.float64)
    if group is not None:  # every rank joins, even with no valid positions or bad logits
        packed = torch.cat([acc.view(-1), count])
        dist.all_reduce(packed, op=dist.ReduceOp.SUM, group=group)
        acc, count = packed[:-K].view(K, V), packed[-K:]
    _raise_if_bad(ent, b, t)
    if N == 0:
        return ent, ren, lp, js
    r = (acc / count.clamp(min=1)[:, None]).to(dt)
    if not bool(torch.isfinite(r).all()):
        raise DataError(
            "the batch-mean reference distribution is not finite: another rank's logits contain NaN or +inf"
        )
    h_r = distribution_entropy(r, plan[1])
    for o, z in _blocks(policy, b, t, plan, zbuf):
        n = z.shape[0]
        s = torch.softmax(z, dim=-1, out=P[:n])
        if K == 1:
            s.add_(r[0])
        else:
            s.add_(torch.index_select(r, 0, seg[o : o + n], out=L[:n]))
        js[o : o + n] = js_from_entropies(
            mixture_entropy_(s, L[:n]), ent[o : o + n], h_r[seg[o : o + n]]
        )
    return ent, ren, lp, js


def _previous_token(policy, b, t, tok, T, plan):
    """r_t = p_{t-1} of the same row: compute the union of positions t and t-1 in flat order, so the
    reference of each needed row is the row just before it (carried across blocks)."""
    V, dt, dev = policy.vocab, policy.dtype, policy.device
    flat = b * T + t
    needed = torch.unique(torch.cat([flat, (flat - 1)[t > 0]]))  # sorted
    M = needed.numel()
    nb, nt = needed // T, needed % T
    where = torch.searchsorted(needed, flat)
    ntok = torch.zeros(M, dtype=torch.long, device=dev)
    ntok[where] = tok
    ent, ren, lp, h_mix = (torch.empty(M, dtype=dt, device=dev) for _ in range(4))
    zbuf = torch.empty(min(plan[0], max(M, 1)), V, dtype=dt, device=dev)
    P, L = _buffers(min(plan[1], max(M, 1)), V, dt, dev, 2)
    carry = torch.zeros(V, dtype=dt, device=dev)  # p of the row before the block
    for o, z in _blocks(policy, nb, nt, plan, zbuf):
        n = z.shape[0]
        p, s = P[:n], L[:n]
        ent[o : o + n], ren[o : o + n], lp[o : o + n] = policy_block_(z, ntok[o : o + n], p, s)
        torch.add(carry, p[0], out=s[0])
        torch.add(p[:-1], p[1:], out=s[1:])
        carry.copy_(p[-1])
        h_mix[o : o + n] = mixture_entropy_(s, p)
    _raise_if_bad(ent, nb, nt)
    h_prev = torch.cat([ent[:1], ent[:-1]])
    js = js_from_entropies(h_mix, ent, h_prev)[where]
    js = torch.where(t > 0, js, torch.zeros_like(js))
    return ent[where], ren[where], lp[where], js


def _reference_policy(policy, ref, b, t, tok, plan):
    """r_t = the reference model's distribution at the same position: one pass over both."""
    N, V, dt, dev = b.numel(), policy.vocab, policy.dtype, policy.device
    if ref.dtype != dt:  # compute both in the wider dtype's buffers
        raise DataError(
            f"reference inputs are {ref.dtype}-computed but the policy's are {dt}; pass both in float64 or neither"
        )
    ent, ren, lp, h_ref, js = (torch.empty(N, dtype=dt, device=dev) for _ in range(5))
    zbuf, zref = _buffers(min(plan[0], max(N, 1)), V, dt, dev, 2)
    P, L = _buffers(min(plan[1], max(N, 1)), V, dt, dev, 2)
    pairs = zip(_blocks(policy, b, t, plan, zbuf), _blocks(ref, b, t, plan, zref), strict=True)
    for (o, z), (_, zr) in pairs:
        n = z.shape[0]
        p = P[:n]
        ent[o : o + n], ren[o : o + n], lp[o : o + n] = policy_block_(z, tok[o : o + n], p, L[:n])
        h_ref[o : o + n] = policy_block_(zr, None, z, L[:n])[0]  # q into z (no longer needed)
        js[o : o + n] = js_from_entropies(
            mixture_entropy_(p.add_(z), L[:n]), ent[o : o + n], h_ref[o : o + n]
        )
    _raise_if_bad(ent, b, t)
    _raise_if_bad(h_ref, b, t, what="reference logits")
    return ent, ren, lp, js


def _check_groups_rank_local(group_ids, mask, group):
    """group_position under torch.distributed: every group's rows (those with a valid position) must
    sit on one rank, else the position means would need other ranks' [*, V] distributions. All ranks
    gather every rank's set of group ids and raise the same ConfigError if one is on two ranks."""
    if group is None or dist.get_world_size(group) == 1:
        return
    local = torch.unique(group_ids[mask.any(dim=1)]).tolist()
    gathered = [None] * dist.get_world_size(group)
    dist.all_gather_object(gathered, local, group=group)
    owner, split = {}, {}
    for rank, ids in enumerate(gathered):
        for g in ids:
            if g in owner:
                split.setdefault(g, [owner[g]]).append(rank)
            else:
                owner[g] = rank
    if split:
        shown = "; ".join(f"group {g} on ranks {r}" for g, r in sorted(split.items())[:5])
        raise ConfigError(
            f'reference="group_position" needs every prompt\'s G rollouts on one rank, but {len(split)} '
            f"group(s) are split ({shown}). Keep each prompt's G rollouts on one rank: make the "
            "per-rank batch a multiple of G and shard whole groups (contiguous rows of a prompt) "
            "across data-parallel ranks, or score before splitting the batch. group_ids must be "
            "global prompt ids (equal ids on two ranks mean the same prompt)."
        )


def _pack(ends, limit):
    """Greedy runs of whole units: `ends` are the cumulative row ends of consecutive units (cells or
    blocks); returns [(first unit, end unit)], each run at most `limit` rows or a single unit."""
    runs, u0, s = [], 0, 0
    while u0 < len(ends):
        u1 = max(bisect.bisect_right(ends, s + limit), u0 + 1)
        runs.append((u0, u1))
        u0, s = u1, ends[u1 - 1]
    return runs


def _group_position(policy, b, t, tok, seg, k, T, chunk_size, want_kl):
    """The paper's reference: r = mean of p over the rows of the same group at the same aligned
    position k. b, t, tok, seg (dense group index), k: [N] long, the valid positions in flat order.

    Positions are sorted by (group, k, row), so each (group, k) cell is contiguous. Cells are packed
    into blocks (cache-sized on CPU, whole chunks on GPU) and blocks into chunks (one LM-head matmul
    each), a run holding one unit when that unit alone is larger than the limit. Per block, while its
    p is hot: H, H2, log p(y) and p; the cell means (written over the block's logits, no longer
    needed) and their entropies; JS (and KL) of each row against its cell mean. Returns ent, ren,
    lp, js, kl ([N], compute dtype, flat order; kl None unless want_kl); cells with one row get
    js = kl = 0 exactly.
    """
    N, V, dt, dev = b.numel(), policy.vocab, policy.dtype, policy.device
    ent, ren, lp, js = (torch.zeros(N, dtype=dt, device=dev) for _ in range(4))
    kl = torch.zeros(N, dtype=dt, device=dev) if want_kl else None
    if N == 0:
        return ent, ren, lp, js, kl
    # off CPU a block is a whole chunk: its three scratch buffers count towards the default chunk
    row_bytes = V * torch.finfo(dt).bits // 8
    scratch_bytes = 0 if dev.type == "cpu" else 3 * row_bytes
    fill, block = _plan(
        chunk_size, V, dt, dev, policy.gathers_rows, N, policy.temp_row_bytes + scratch_bytes
    )
    key = seg * T + k
    order = torch.argsort(key, stable=True)  # stable: rows ascending inside a cell
    b, t, tok = b[order], t[order], tok[order]
    _, counts = torch.unique_consecutive(key[order], return_counts=True)
    cell = torch.repeat_interleave(torch.arange(counts.numel(), device=dev), counts)
    cell_ends = counts.cumsum(0).tolist()
    cell_starts = [0] + cell_ends[:-1]
    # blocks: (first row, end row, first cell, end cell); chunks: (first row, end row, blocks)
    blocks = [(cell_starts[c0], cell_ends[c1 - 1], c0, c1) for c0, c1 in _pack(cell_ends, block)]
    chunks = [
        (blocks[i][0], blocks[j - 1][1], blocks[i:j])
        for i, j in _pack([bl[1] for bl in blocks], fill)
    ]
    zbuf = torch.empty(max(e - s for s, e, _ in chunks), V, dtype=dt, device=dev)
    P, S, L = _buffers(max(e - o for o, e, _, _ in blocks), V, dt, dev, 3)
    floor = torch.finfo(dt).min
    cnt = counts.to(dt)
    for s, e, in_chunk in chunks:
        z = policy.fill(b[s:e], t[s:e], zbuf)
        for o, oe, c0, c1 in in_chunk:
            m, c, i = oe - o, c1 - c0, slice(o, oe)
            zb, p, local = z[o - s : oe - s], P[:m], cell[i] - c0
            ent[i], ren[i], lp[i] = policy_block_(zb, tok[i], p, L[:m])
            r = zb[:c].zero_().index_add_(0, local, p).div_(cnt[c0:c1, None])
            h_r = torch.log(r, out=L[:c]).clamp_(min=floor).mul_(r).sum(-1).neg_()
            rb = torch.index_select(r, 0, local, out=S[:m])
            if want_kl:  # KL = -H(p) - sum p log r (0 log 0 = 0; r > 0 wherever p > 0)
                cross = torch.log(rb, out=L[:m]).clamp_(min=floor).mul_(p).sum(-1)
                kl[i] = cross.add_(ent[i]).neg_().clamp_(min=0.0)
            js[i] = js_from_entropies(mixture_entropy_(p.add_(rb), L[:m]), ent[i], h_r[local])
    _raise_if_bad(ent, b, t)
    alone = counts[cell] == 1  # a position only one row reaches: r = p, score exactly 0
    js.masked_fill_(alone, 0.0)
    if want_kl:
        kl.masked_fill_(alone, 0.0)
    unsort = torch.empty_like(order)
    unsort[order] = torch.arange(N, device=dev)
    return (
        ent[unsort],
        ren[unsort],
        lp[unsort],
        js[unsort],
        None if kl is None else kl[unsort],
    )
