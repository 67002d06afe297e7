"""Step 5 of a training step: the old policy's token statistics and log-probs (no gradient).

Statistics (no gradient): the final hidden states of every rollout (prompt computed once per group
when `share_prompt`), then `ict.stats.token_stats_from_hidden` (H, H2, the method's JS or KL score,
chunked: the [tokens x V] logits are never built) and the old log-probs from
`ict.train.logprobs.token_logprobs_from_hidden`, the kernel the update's new log-probs come from,
so the first ratio is 1 by construction.

The selection that follows (step 6) is `ict.step.select_step`, the same on every engine.
"""

from __future__ import annotations

import torch

from ict.stats import TokenStats, token_stats_from_hidden
from ict.train.logprobs import (
    column_span,
    final_hidden,
    shared_prompt_hidden,
    shifted_hidden,
    token_logprobs_from_hidden,
)


@torch.no_grad()
def rollout_hidden(model, rollout, plan, policy) -> torch.Tensor:
    """Shifted final hidden states [N, T, D] of the rollout under `model` (no gradient).

    hidden[:, t] predicts input_ids[:, t]; rows are micro-batched like the update (whole groups of
    G rows when prompts are shared, plan.batch), each micro-batch on the columns its rows use.
    policy: the PolicyContext (device, precision)."""
    ids, attn = rollout.input_ids.to(policy.device), rollout.attention_mask.to(policy.device)
    group, step_rows = plan.batch.rows(ids.shape[0])
    model.eval()
    out = None
    for start in range(0, ids.shape[0], step_rows):
        rows = slice(start, start + step_rows)
        cols = column_span(attn[rows])
        with policy.autocast():
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
def sampled_logprobs(model, head, rollout, plan, policy, hidden=None) -> torch.Tensor:
    """[N, T] float32 log-probs of the rollout's tokens under `model` with its LogitHead `head`
    (ict.head), 0 off the response. hidden: its shifted hidden states if already computed."""
    ids = rollout.input_ids.to(policy.device)
    mask = rollout.response_mask.to(policy.device).bool()
    if hidden is None:
        hidden = rollout_hidden(model, rollout, plan, policy)
    cfg = plan.config
    logprob, _ = token_logprobs_from_hidden(
        hidden, head, ids, mask, temperature=cfg.temperature, chunk_size=cfg.stats_chunk_size
    )
    return logprob


@torch.no_grad()
def rollout_stats(policy, rollout, plan, hidden, rows=None, cols=slice(None)) -> TokenStats:
    """Token statistics (TokenStats, [n, t] float32 fields) of the rollout's rows `rows` (None:
    all) and columns `cols` from the policy's shifted hidden states `hidden` [n, t, D] there:
    the method's reference (the reference model's own forward for "reference_policy") and
    divergence, the plan's temperature and chunking. Rows must be whole groups for the
    "group_position" reference, and every row for "batch_mean"."""
    cfg, method = plan.config, plan.method
    rows = slice(None) if rows is None else rows
    ids = rollout.input_ids.to(policy.device)[rows, cols]
    mask = rollout.response_mask.to(policy.device).bool()[rows, cols]
    extra = {}
    if method.reference == "reference_policy":
        extra = dict(
            reference_hidden=rollout_hidden(policy.ref_model, rollout, plan, policy)[rows, cols],
            reference_head=policy.ref_head,
        )
    if "kl" in method.needs():
        extra["divergence"] = "kl"
    return token_stats_from_hidden(
        hidden,
        policy.head,
        ids,
        mask,
        temperature=cfg.temperature,
        reference=method.reference,
        group_ids=rollout.prompt_index.to(policy.device)[rows],
        chunk_size=cfg.stats_chunk_size,
        **extra,
    )


@torch.no_grad()
def old_policy_pass(policy, rollout, plan):
    """Token statistics and old log-probs of the rollout (and the reference model's log-probs).

    policy: the PolicyContext (model, ref_model, their heads, device, precision); plan: the
    RunPlan (its method's reference and whether it scores by KL, temperature, chunking).
    Returns (stats: TokenStats [N, T] fields, old_logprob [N, T], ref_logprob [N, T] or None).
    """
    hidden = rollout_hidden(policy.model, rollout, plan, policy)
    stats = rollout_stats(policy, rollout, plan, hidden)
    old_logprob = sampled_logprobs(policy.model, policy.head, rollout, plan, policy, hidden=hidden)
    return stats, old_logprob, reference_logprobs(policy, rollout, plan)


@torch.no_grad()
def reference_logprobs(policy, rollout, plan) -> torch.Tensor | None:
    """[N, T] log-probs of the rollout's tokens under the frozen reference model, for the KL
    term (None without one: kl_coef 0)."""
    if plan.config.kl_coef <= 0:
        return None
    return sampled_logprobs(policy.ref_model, policy.ref_head, rollout, plan, policy)
