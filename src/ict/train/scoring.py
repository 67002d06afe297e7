"""Steps 5-6 of a training step: the old policy's token statistics, then the token selection.

Statistics (no gradient): the final hidden states of every rollout (prompt computed once per group
when `share_prompt`), then `ict.stats.token_stats_from_hidden` (H, H2, the method's JS or KL score,
chunked: the [tokens x V] logits are never built) and the old log-probs from
`ict.train.logprobs.token_logprobs_from_hidden`, the kernel the update's new log-probs come from,
so the first ratio is 1 by construction.

Selection: the method's selector (`ict.methods`), dense for the first `dense_warmup_steps` steps;
the ICT, 20-Entropy and STAPO selections on the same batch for the diagnostics.
"""

from __future__ import annotations

import torch

from ict.train.logprobs import (
    batch_plan,
    column_span,
    final_hidden,
    lm_head_params,
    shared_prompt_hidden,
    shifted_hidden,
    token_logprobs_from_hidden,
)

DIAGNOSTIC_METHODS = ("ict", "entropy", "stapo")


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
    weight, bias = lm_head_params(model)
    logprob, _ = token_logprobs_from_hidden(
        hidden,
        weight,
        ids,
        mask,
        lm_head_bias=bias,
        temperature=config.temperature,
        chunk_size=config.stats_chunk_size,
    )
    return logprob


@torch.no_grad()
def old_policy_pass(model, ref_model, rollout, config, method, device, autocast):
    """Token statistics and old log-probs of the rollout (and the reference model's log-probs).

    method: the resolved ict.methods.Method (its reference and whether it scores by KL).
    Returns (stats: TokenStats [N, T] fields, old_logprob [N, T], ref_logprob [N, T] or None).
    """
    from ict.stats import token_stats_from_hidden

    ids = rollout.input_ids.to(device)
    mask = rollout.response_mask.to(device).bool()
    hidden = rollout_hidden(model, rollout, config, device, autocast)
    weight, bias = lm_head_params(model)
    extra = {}
    if method.reference == "reference_policy":
        ref_weight, ref_bias = lm_head_params(ref_model)
        extra = dict(
            reference_hidden=rollout_hidden(ref_model, rollout, config, device, autocast),
            reference_lm_head_weight=ref_weight,
            reference_lm_head_bias=ref_bias,
        )
    if "kl" in method.needs():
        extra["divergence"] = "kl"
    stats = token_stats_from_hidden(
        hidden,
        weight,
        ids,
        mask,
        lm_head_bias=bias,
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


def select_for_method(method, config, mask, stats, advantages, tokens, *, seed: int, dense=False):
    """bool [N, T]: the tokens `method` (a resolved Method) updates; every valid token if `dense`.

    config supplies the selector options (stapo thresholds, selector_options), the granularity and
    the micro-batch size for scope "micro_batch"."""
    from ict.select import select_tokens
    from ict.select.core import selector_facts

    if dense:
        return mask.clone()
    facts = selector_facts(method.selector)
    options = {
        "prob_below": config.stapo_prob_below,
        "entropy_quantile": config.stapo_entropy_quantile,
    }
    options.update(config.selector_options)
    options = {k: v for k, v in options.items() if k in facts["options"]}
    return select_tokens(
        method.selector,
        mask,
        stats=stats,
        advantages=advantages,
        tokens=tokens,
        ratio=method.ratio if facts["takes_ratio"] else None,
        scope=method.scope,
        granularity=config.granularity,
        micro_batch_size=batch_plan(mask.shape[0], config)[1],
        seed=seed,
        **options,
    )


def select_step(method, config, mask, stats, advantages, tokens, *, step: int):
    """Step 6: (selected [N, T] for the update, selections by name for the diagnostics).

    The update's selection is dense while step <= dense_warmup_steps; `selections[method.name]`
    always holds the method's own selection, so its statistics are logged during the warm-up too.
    Diagnostics use each method's own settings (ICT: the run's reference scores, per response).
    """
    from ict.methods import get_method

    seed = config.seed * 1_000_003 + step
    own = select_for_method(method, config, mask, stats, advantages, tokens, seed=seed)
    selections = {}
    for name in DIAGNOSTIC_METHODS:
        if name == method.name:
            continue
        diag = get_method(name).resolved()
        if "kl" in diag.needs() and getattr(stats, "kl", None) is None:
            continue
        selections[name] = select_for_method(
            diag, config, mask, stats, advantages, tokens, seed=seed
        )
    selections[method.name] = own
    dense = step <= method.dense_warmup_steps
    return (mask.clone() if dense else own), selections
