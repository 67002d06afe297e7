"""Policy forward for the update: final hidden states -> log p(sampled token), chunked.

The full `[B, T, V]` logits are never built. Only valid (response) positions go through the LM
head, `chunk_size` rows at a time, each chunk under activation checkpointing, so the backward pass
also holds one chunk of vocabulary-wide activations at a time. The head is the model's own
(`ict.head.LogitHead`: its soft cap / logit scale applied) and runs in float32 (autocast off) so
that the statistics pass and the update pass compute identical log-probs.
"""

from __future__ import annotations

import inspect

import torch
from torch.utils.checkpoint import checkpoint

from ict.head import LogitHead, logit_head


def position_ids_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """[B, T] positions that skip left padding (as `generate` uses): cumsum(mask) - 1, >= 0."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def final_hidden(model, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Final (normed) hidden states `[B, T, D]` of a causal LM, without computing logits.

    `hidden[:, t]` is the state at position t, which predicts token t + 1; callers shift.
    """
    base = model.base_model if model.base_model is not model else None
    kwargs = dict(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids_from_mask(attention_mask),
        use_cache=False,
    )
    if base is not None:
        return base(**kwargs).last_hidden_state
    return model(**kwargs, output_hidden_states=True).hidden_states[-1]


def shared_prompt_hidden(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    prompt_length: int,
    group_size: int,
) -> torch.Tensor:
    """Final hidden states `[N, T, D]` of G-sample groups that share their prompt, prompt computed once.

    Rows g*G .. g*G + G - 1 must hold the same (left-padded) prompt in columns [0, prompt_length).
    The prompt runs once per group (batch N / G); its key/value cache is repeated G times and the
    responses run on top of it. Gradients flow back through the cache, so values and gradients are
    those of the plain forward (`final_hidden`) at about (P + G R) / (G (P + R)) of its cost.
    """
    from transformers import DynamicCache

    n, width = input_ids.shape
    if n % group_size or prompt_length >= width:
        return final_hidden(model, input_ids, attention_mask)
    base = model.base_model if model.base_model is not model else None
    if base is None:
        return final_hidden(model, input_ids, attention_mask)
    positions = position_ids_from_mask(attention_mask)
    heads = slice(None, None, group_size)
    cache_arg = (
        "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"
    )
    cache = DynamicCache(config=model.config)
    prompt = base(
        input_ids=input_ids[heads, :prompt_length],
        attention_mask=attention_mask[heads, :prompt_length],
        position_ids=positions[heads, :prompt_length],
        use_cache=True,
        **{cache_arg: cache},
    )
    cache.batch_repeat_interleave(group_size)
    response = base(
        input_ids=input_ids[:, prompt_length:],
        attention_mask=attention_mask,
        position_ids=positions[:, prompt_length:],
        use_cache=True,
        **{cache_arg: cache},
    )
    return torch.cat(
        [prompt.last_hidden_state.repeat_interleave(group_size, dim=0), response.last_hidden_state],
        dim=1,
    )


def shifted_hidden(hidden: torch.Tensor) -> torch.Tensor:
    """Align hidden states with the contract layout: out[:, t] predicts tokens[:, t] (`[B, T, D]`).

    out[:, 0] is zero (nothing predicts the first token; it is never a response token).
    """
    return torch.cat([torch.zeros_like(hidden[:, :1]), hidden[:, :-1]], dim=1)


def _chunk_logprob_entropy(
    h: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    tokens: torch.Tensor,
    temperature: float,
    want_entropy: bool,
    scale: float = 1.0,
    softcap: float | None = None,
):
    logits = LogitHead(weight, bias, scale, softcap).logits(h, temperature)
    logp = torch.log_softmax(logits, dim=-1)
    chosen = logp.gather(-1, tokens[:, None]).squeeze(-1)
    if not want_entropy:
        return chosen, torch.zeros_like(chosen)
    return chosen, -(logp.exp() * logp).sum(-1)


def token_logprobs_from_hidden(
    hidden: torch.Tensor,
    head: LogitHead,
    tokens: torch.Tensor,
    mask: torch.Tensor,
    *,
    temperature: float = 1.0,
    chunk_size: int = 1024,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log p(tokens) (and optionally the entropy H) at valid positions, differentiable, chunked.

    Args:
        hidden: `[B, T, D]` already shifted (hidden[:, t] predicts tokens[:, t]), any float dtype.
        head: the model's ict.head.LogitHead (weight [V, D], bias [V] or None, its logit scale and
            soft cap: `ict.head.logit_head(model)`): logits = softcap(scale * (hidden @ W.T + b)),
            computed in float32 (float64 weights: float64), exactly as `token_stats_from_hidden`
            computes them.
        tokens: `[B, T]` long; mask: `[B, T]` bool, True on response tokens.
        temperature: p = softmax(logits / temperature), as in the rollout.
        chunk_size: valid positions per LM-head chunk (bounds memory to chunk_size x V floats).
    Returns:
        (logprob, entropy): `[B, T]` float32, 0 where mask is False; entropy (nats) is None unless
        `with_entropy`.
    """
    flat_mask = mask.reshape(-1)
    rows = hidden.reshape(-1, hidden.shape[-1])[flat_mask]
    targets = tokens.reshape(-1)[flat_mask]
    outs_lp, outs_h = [], []
    for start in range(0, rows.shape[0], chunk_size):
        args = (
            rows[start : start + chunk_size],
            head.weight,
            head.bias,
            targets[start : start + chunk_size],
            temperature,
            with_entropy,
            head.scale,
            head.softcap,
        )
        with torch.autocast(device_type=rows.device.type, enabled=False):
            if torch.is_grad_enabled() and rows.requires_grad:
                lp, ent = checkpoint(_chunk_logprob_entropy, *args, use_reentrant=False)
            else:
                lp, ent = _chunk_logprob_entropy(*args)
        outs_lp.append(lp)
        outs_h.append(ent)
    logprob = hidden.new_zeros(tokens.shape, dtype=torch.float32)
    flat = logprob.reshape(-1)
    if outs_lp:
        flat = flat.masked_scatter(flat_mask, torch.cat(outs_lp).float())
    logprob = flat.reshape(tokens.shape)
    entropy = None
    if with_entropy:
        ent_flat = hidden.new_zeros(flat_mask.shape, dtype=torch.float32)
        if outs_h:
            ent_flat = ent_flat.masked_scatter(flat_mask, torch.cat(outs_h).float())
        entropy = ent_flat.reshape(tokens.shape)
    return logprob, entropy


def policy_hidden(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    prompt_length: int | None = None,
    group_size: int = 1,
) -> torch.Tensor:
    """Shifted final hidden states `[B, T, D]` (out[:, t] predicts input_ids[:, t]) of the update's
    forward: groups of `group_size` rows share their prompt's computation when `prompt_length` is
    given and `group_size` > 1 (`shared_prompt_hidden`), else the plain forward."""
    if prompt_length is not None and group_size > 1:
        hidden = shared_prompt_hidden(model, input_ids, attention_mask, prompt_length, group_size)
    else:
        hidden = final_hidden(model, input_ids, attention_mask)
    return shifted_hidden(hidden)


def policy_logprobs(
    model,
    input_ids,
    attention_mask,
    response_mask,
    *,
    temperature=1.0,
    chunk_size=1024,
    with_entropy=False,
    prompt_length: int | None = None,
    group_size: int = 1,
    head: LogitHead | None = None,
):
    """Forward pass -> (`[B, T]` log p(input_ids[:, t]) on response positions, entropy or None).

    The logits are the model's own (`ict.head.logit_head(model)`: its soft cap / logit scale);
    `head`: that LogitHead when the caller holds it already (the step's PolicyContext).

    With `prompt_length` and `group_size` > 1, groups of G rows share their prompt computation
    (see `shared_prompt_hidden`).
    """
    hidden = policy_hidden(
        model, input_ids, attention_mask, prompt_length=prompt_length, group_size=group_size
    )
    return token_logprobs_from_hidden(
        hidden,
        head or logit_head(model),
        input_ids,
        response_mask,
        temperature=temperature,
        chunk_size=chunk_size,
        with_entropy=with_entropy,
    )


def column_span(attention_mask: torch.Tensor, stop: int | None = None) -> slice:
    """Columns that hold any real token in these rows (trims shared left/right padding).

    attention_mask: [B, T]. stop: an exclusive upper bound on the columns (e.g. one past the last
    column any loss reads: causal attention means later columns cannot change earlier ones)."""
    cols = torch.nonzero(attention_mask.any(0)).flatten()
    if not cols.numel():
        return slice(0, 1)
    end = int(cols[-1]) + 1 if stop is None else min(int(cols[-1]) + 1, stop)
    return slice(int(cols[0]), max(end, int(cols[0]) + 1))
