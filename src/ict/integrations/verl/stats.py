"""Per-token statistics of the old policy, computed from the logits verl already materialises.

verl 0.9.1 packs a micro-batch without padding: the logits are `[N, V]` rows (or `[B, L, V]` when
`use_remove_padding=False`), row `cu[b] + t` predicting token `t + 1` of sequence `b`. Only the
rows that predict a valid response token are scored. Everything here is pure and works in chunks of
`chunk_size` rows, so at most `chunk_size x V` float32 values exist at once (never `[N, V]`).

Math (METHOD.md), by ict.stats' kernels: p = softmax(z / T) in float32; H = -sum p log p;
H2 = -log sum p^2; JS(p, r) = H((p + r) / 2) - H(p) / 2 - H(r) / 2, all in nats. The paper's
`group_position` score goes through `ict.stats.token_stats` itself (`group_position_stats`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class ResponseRows:
    """Where the valid response positions of a packed micro-batch sit.

    flat:   LongTensor[n]  row of the flattened logits `[rows, V]` that predicts the token
    packed: LongTensor[n]  the same position in verl's packed (nested) layout, `cu[b] + t`
    batch:  LongTensor[n]  sequence index b
    column: LongTensor[n]  response column j (0-based), for the padded `[B, R]` layout
    """

    flat: Tensor
    packed: Tensor
    batch: Tensor
    column: Tensor


def response_rows(
    seq_lens: Tensor,
    response_lens: Tensor,
    response_mask: Tensor,
    *,
    padded_width: int | None = None,
) -> ResponseRows:
    """Rows that predict valid response tokens, without a Python loop over tokens.

    seq_lens:      LongTensor[B] prompt + response length of each (unpadded) sequence.
    response_lens: LongTensor[B] response length of each sequence.
    response_mask: Tensor[B, R]  1 on valid response tokens (verl's padded `response_mask`).
    padded_width:  None for packed logits `[N, V]`; L for padded logits `[B, L, V]`.
    Response token j of sequence b is predicted at position t = seq_len - resp_len - 1 + j,
    the same slice verl's `no_padding_2_padding` takes.
    """
    seq_lens = seq_lens.long()
    response_lens = response_lens.long().to(seq_lens.device)
    mask = response_mask.to(seq_lens.device).bool()
    width = mask.shape[1]
    offsets = torch.cumsum(seq_lens, 0) - seq_lens  # cu[b]
    first = seq_lens - response_lens - 1  # position predicting response token 0
    if bool((first < 0).any()):
        raise ValueError("every sequence needs a prompt of at least one token before its response")
    cols = torch.arange(width, device=seq_lens.device)
    valid = mask & (cols[None, :] < response_lens[:, None])
    b, j = valid.nonzero(as_tuple=True)
    t = first[b] + j
    packed = offsets[b] + t
    flat = packed if padded_width is None else b * padded_width + t
    return ResponseRows(flat=flat, packed=packed, batch=b, column=j)


def chunked_token_stats(
    logits: Tensor,
    rows: Tensor,
    temperature: Tensor,
    *,
    reference: Tensor | None = None,
    chunk_size: int = 1024,
) -> dict[str, Tensor]:
    """H, H2 and (with `reference`) JS for selected rows, plus the sum of p over them: the two
    passes of the batch-mean reference across verl's micro-batches and ranks. The per-block math is
    ict.stats' own kernels (`ict.stats.kernels`), the formulas of every engine.

    logits:      Tensor[N, V] any float dtype (rows of the flattened logits, unscaled).
    rows:        LongTensor[n] which rows to score.
    temperature: Tensor[n] sampling temperature of each scored row.
    reference:   Tensor[V] float32 distribution r (sums to 1) or None.
    Returns float32 tensors: entropy [n], renyi2 [n], prob_sum [V] (sum of p over the rows),
    and js [n] when a reference is given (nats, clamped to [0, log 2]).
    """
    from ict.stats.kernels import (
        distribution_entropy,
        js_from_entropies,
        mixture_entropy_,
        policy_block_,
    )

    n, vocab = rows.numel(), logits.shape[-1]
    dev = logits.device
    entropy = torch.zeros(n, dtype=torch.float32, device=dev)
    renyi2 = torch.zeros(n, dtype=torch.float32, device=dev)
    prob_sum = torch.zeros(vocab, dtype=torch.float32, device=dev)
    js = torch.zeros(n, dtype=torch.float32, device=dev) if reference is not None else None
    if reference is not None:
        reference = reference.to(device=dev, dtype=torch.float32)
        h_ref = distribution_entropy(reference, 1)
    temperature = temperature.to(device=dev, dtype=torch.float32)
    block = max(1, min(chunk_size, n))
    p_buf, scratch = (torch.empty(block, vocab, dtype=torch.float32, device=dev) for _ in range(2))
    with torch.no_grad():
        for start in range(0, n, chunk_size):
            idx = rows[start : start + chunk_size].to(dev)
            m, out = idx.numel(), slice(start, start + idx.numel())
            z = logits[idx].float() / temperature[out, None].clamp_min(1e-8)
            p = p_buf[:m]
            entropy[out], renyi2[out], _ = policy_block_(z, None, p, scratch[:m])
            prob_sum += p.sum(0)
            if js is not None:
                h_mix = mixture_entropy_(p.add_(reference), scratch[:m])
                js[out] = js_from_entropies(h_mix, entropy[out], h_ref)
    out = {"entropy": entropy, "renyi2": renyi2.clamp_min(0.0), "prob_sum": prob_sum}
    if js is not None:
        out["js"] = js
    return out


def scatter_packed(values: Tensor, rows: ResponseRows, total: int) -> Tensor:
    """Place per-row values [n] into a packed vector [total] (0 elsewhere), verl's nested layout."""
    out = torch.zeros(total, dtype=values.dtype, device=values.device)
    out[rows.packed.to(values.device)] = values
    return out


def group_position_stats(
    logits: Tensor,
    rows: ResponseRows,
    tokens: Tensor,
    group_ids: Tensor,
    temperature: float,
    *,
    chunk_size: int | None = None,
    process_group=None,
    divergence: str = "js",
) -> dict[str, Tensor]:
    """The paper's score (reference "group_position") of one micro-batch by `ict.stats.token_stats`.

    logits: [N, V] the flattened rows (packed [nnz, V] or padded [B * L, V]), unscaled.
    rows: the response positions (`response_rows`); tokens: LongTensor[N] the token each row
    predicts; group_ids: LongTensor[b] prompt index of each sequence (every rollout of a prompt in
    this micro-batch, checked by the caller). Returns float32 [n] entropy, renyi2, js (and kl).

    verl's layout reaches ict.stats without a copy of the logits: a [b, N, V] view with stride 0
    over the sequences, where sequence i's valid positions are the rows predicting its response
    tokens, so `token_stats` aligns position k of every rollout of a prompt as it does natively.
    Only a [b, N] mask and token grid are built.
    """
    from ict.stats import token_stats

    b = int(group_ids.numel())
    n_rows, vocab = logits.shape
    view = logits.unsqueeze(0).expand(b, n_rows, vocab)
    mask = torch.zeros(b, n_rows, dtype=torch.bool, device=logits.device)
    mask[rows.batch, rows.flat] = True
    grid = torch.zeros(b, n_rows, dtype=torch.long, device=logits.device)
    grid[rows.batch, rows.flat] = tokens[rows.flat].to(logits.device)
    stats = token_stats(
        view, grid, mask, temperature=temperature, reference="group_position",
        group_ids=group_ids.to(logits.device), chunk_size=chunk_size,
        process_group=process_group, divergence=divergence,
    )  # fmt: skip
    out = {f: getattr(stats, f)[rows.batch, rows.flat] for f in ("entropy", "renyi2", "js")}
    if stats.kl is not None:
        out["kl"] = stats.kl[rows.batch, rows.flat]
    return out
