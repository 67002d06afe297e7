"""Step 5 of a training step: the old policy's token statistics and log-probs (no gradient).

Statistics (no gradient): the final hidden states of every rollout (prompt computed once per group
when `share_prompt`), then `ict.stats.token_stats_from_hidden` (H, H2, the method's JS or KL score,
chunked: the [tokens x V] logits are never built) and the old log-probs from
`ict.train.logprobs.token_logprobs_from_hidden`, the kernel the update's new log-probs come from,
so the first ratio is 1 by construction.

The selection that follows (step 6) is `ict.methods.select_step`, the same on every engine.
"""

from __future__ import annotations

import torch

from ict.head import logit_head
from ict.stats import token_stats_from_hidden
from ict.train.logprobs import (
    batch_plan,
    column_span,
    final_hidden,
    shared_prompt_hidden,
    shifted_hidden,
    token_logprobs_from_hidden,
)


@torch.no_grad()
def rollout_hidden(model, rollout, config, device, autocast) -> torch.Tensor:
    """Shifted final hidden states [N, T, D] of the rollout under `model` (no gradient).

    hidden[:, t] predicts input_ids[:, t]; rows are micro-batched like the update (whole groups of
    G rows when prompts are shared), each micro-batch on the columns its rows use."""
    ids, attn = rollout.input_ids.to(device), rollout.attention_mask.to(device)
    group, step_rows = batch_plan(ids.shape[0], config)
    model.eval()
    out = None
    for start in range(0, ids.shape[0], step_rows):
        rows = slice(start, start + step_rows)
        cols = column_span(attn[rows])
        with autocast():
            if group > 1:
                prompt_cols = rollout.prompt_length - cols.start
                h = shared_prompt_hidden(
                    model, ids[rows, cols], attn[rows, cols], prompt_cols, group
                )
            else:
                h = final_hidden(model, ids[rows, cols], attn[rows, cols])
        if out is None:
            out = h.new_zeros(ids.shape + (h.shape[-1],))
        out[rows, cols] = h
    return shifted_hidden(out)


@torch.no_grad()
def sampled_logprobs(model, rollout, config, device, autocast, hidden=None) -> torch.Tensor:
    """[N, T] float32 log-probs of the rollout's tokens under `model`, 0 off the response.

    hidden: the model's shifted hidden states if already computed (`rollout_hidden`)."""
    ids = rollout.input_ids.to(device)
    mask = rollout.response_mask.to(device).bool()
    if hidden is None:
        hidden = rollout_hidden(model, rollout, config, device, autocast)
    head = logit_head(model)  # the logits the model samples from (soft-cap, scale: ict.head)
    logprob, _ = token_logprobs_from_hidden(
        hidden, head.weight, ids, mask, **head_options(head), temperature=config.temperature,
        chunk_size=config.stats_chunk_size,
    )  # fmt: skip
    return logprob


def head_options(head) -> dict:
    """The keyword arguments of the statistics and log-prob kernels that carry a LogitHead's
    bias and transform (ict.head)."""
    return {"lm_head_bias": head.bias, "logit_scale": head.scale, "logit_softcap": head.softcap}


@torch.no_grad()
def old_policy_pass(model, ref_model, rollout, config, method, device, autocast):
    """Token statistics and old log-probs of the rollout (and the reference model's log-probs).

    method: the resolved ict.methods.Method (its reference and whether it scores by KL).
    Returns (stats: TokenStats [N, T] fields, old_logprob [N, T], ref_logprob [N, T] or None).
    """
    ids = rollout.input_ids.to(device)
    mask = rollout.response_mask.to(device).bool()
    hidden = rollout_hidden(model, rollout, config, device, autocast)
    head = logit_head(model)
    extra = {}
    if method.reference == "reference_policy":
        ref = logit_head(ref_model)
        extra = dict(
            reference_hidden=rollout_hidden(ref_model, rollout, config, device, autocast),
            reference_lm_head_weight=ref.weight,
            reference_lm_head_bias=ref.bias,
            reference_logit_scale=ref.scale,
            reference_logit_softcap=ref.softcap,
        )
    if "kl" in method.needs():
        extra["divergence"] = "kl"
    stats = token_stats_from_hidden(
        hidden,
        head.weight,
        ids,
        mask,
        **head_options(head),
        temperature=config.temperature,
        reference=method.reference,
        group_ids=rollout.prompt_index.to(device),
        chunk_size=config.stats_chunk_size,
        **extra,
    )
    old_logprob = sampled_logprobs(model, rollout, config, device, autocast, hidden=hidden)
    ref_logprob = None
    if config.kl_coef > 0:
        ref_logprob = sampled_logprobs(ref_model, rollout, config, device, autocast)
    return stats, old_logprob, ref_logprob
