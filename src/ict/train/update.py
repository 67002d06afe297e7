"""Step 7 of a training step: the policy update, costing what it learns from.

`num_epochs` passes over mini-batches; one AdamW step per mini-batch, gradient accumulated over
micro-batches. The normaliser of the loss is computed once per mini-batch by the loss module
(`LossConfig.denominator`), so each micro-batch's loss is an exact share of the mini-batch's and
rows can be left out without changing the gradient:

1. rows that cannot contribute are skipped (`skip_rows`): advantage exactly 0 with no KL or entropy
   term, or no loss token at all (their per-token loss is 0, and so is their gradient); with shared
   prompts a group is kept whole if any of its rows contributes;
2. the LM head and log-softmax run only at the positions the loss reads (`head_on_loss_only`): the
   selected tokens, plus every valid token when the KL runs over valid tokens;
3. each micro-batch's forward and backward stop at the last column any of its rows needs
   (`stop_at_last`): with causal attention, later columns cannot change earlier ones.
Each switch is on by default and exists so that tests and benchmarks can compare against the plain
update (same gradients within float tolerance, tests/train/test_update.py).
"""

from __future__ import annotations

import numpy as np
import torch

from ict.loss import LossConfig, policy_loss
from ict.methods import selection_seed
from ict.train.logprobs import batch_plan, column_span, policy_logprobs

SUMMED_METRICS = ("loss", "pg_loss")  # partial sums over micro-batches; the rest are averages


def loss_positions(mask, selected, loss_config: LossConfig):
    """bool [N, T]: where the loss reads log-probs (selected; all valid for a KL over valid)."""
    M = mask & selected
    if loss_config.kl_coef != 0 and loss_config.kl_on == "valid":
        return mask.clone()
    return M


def contributing_rows(rows, advantages, positions, loss_config: LossConfig, group: int):
    """The rows of `rows` (LongTensor [n], whole groups of `group` rows) whose loss can be nonzero.

    advantages: [N]; positions: bool [N, T] (`loss_positions`)."""
    has_tokens = positions[rows].any(-1)
    if loss_config.reads_every_valid_token:
        useful = has_tokens
    else:
        useful = has_tokens & (advantages[rows] != 0)
    if group > 1:  # keep whole groups: the shared-prompt forward needs all G rows of a prompt
        useful = useful.view(-1, group).any(-1).repeat_interleave(group)
    return rows[useful.to(rows.device)]


def update_policy(
    model,
    optimizer,
    scheduler,
    rollout,
    old_logprob,
    advantages,
    selected,
    ref_logprob,
    config,
    loss_config: LossConfig,
    *,
    step: int,
    device,
    autocast,
    skip_rows: bool | None = None,
    head_on_loss_only: bool = True,
    stop_at_last: bool = True,
) -> dict:
    """Run the update on one rollout batch; returns loss metrics averaged over mini-batches.

    rollout: ict.generation.Rollout; old_logprob, ref_logprob: [N, T] float32 (ref may be None);
    advantages: [N]; selected: bool [N, T]. scheduler: ict.train.schedule.LRSchedule (sets the
    lr before each update from this step's number of updates). config: the TrainConfig (epochs, mini/micro batch
    sizes, clipping norm, seed, temperature, share_prompt). skip_rows: None = config's
    `skip_zero_advantage`. Returns {metric: value, "grad_norm", "update/tokens",
    "update/rows_run", "update/rows"}.
    """
    cfg = config
    skip_rows = cfg.skip_zero_advantage if skip_rows is None else skip_rows
    ids, attn = rollout.input_ids.to(device), rollout.attention_mask.to(device)
    mask = rollout.response_mask.to(device).bool()
    selected = selected.to(device)
    positions = loss_positions(mask, selected, loss_config)
    rows_all = torch.arange(ids.shape[0])
    if cfg.drop_zero_variance_groups:
        rows_all = rows_all[_informative_rows(rollout.prompt_index, advantages)]
    if rows_all.numel() == 0:
        return {"update/skipped": 1}
    group, micro_rows = batch_plan(rows_all.numel(), cfg)
    units = rows_all.view(-1, group)  # whole groups of G rows when prompts are shared
    mini_units = max(1, (cfg.mini_batch_size or rows_all.numel()) // group)
    generator = torch.Generator().manual_seed(selection_seed(cfg.seed, step))
    n_updates = cfg.num_epochs * -(-units.shape[0] // mini_units)  # the updates this step takes
    first_lr = None
    params = [p for p in model.parameters() if p.requires_grad]
    sums: dict[str, float] = {}
    grad_norms, tokens_done, rows_run, minis = [], 0, 0, 0
    model.train()
    for _epoch in range(cfg.num_epochs):
        shuffle = cfg.num_epochs > 1 or cfg.mini_batch_size
        order = units[torch.randperm(units.shape[0], generator=generator)] if shuffle else units
        for mini in (chunk.flatten() for chunk in order.split(mini_units)):
            optimizer.zero_grad(set_to_none=True)
            denominator = loss_config.denominator(mask[mini], selected[mini])
            kl_denominator = loss_config.denominator(mask[mini], selected[mini], term="kl")
            row_counts, kl_row_counts = loss_config.row_counts(mask, selected)
            run = (
                contributing_rows(mini, advantages, positions, loss_config, group)
                if skip_rows
                else mini
            )
            mini_sums: dict[str, float] = {}
            mini_weights: dict[str, float] = {}
            for micro in run.split(micro_rows) if run.numel() else ():
                stop = None
                if stop_at_last:
                    needed = positions[micro].any(0).nonzero()
                    stop = int(needed[-1]) + 1 if needed.numel() else None
                cols = column_span(attn[micro], stop)
                head_mask = positions[micro, cols] if head_on_loss_only else mask[micro, cols]
                with autocast():
                    logprob, entropy = policy_logprobs(
                        model,
                        ids[micro, cols],
                        attn[micro, cols],
                        head_mask,
                        temperature=cfg.temperature,
                        chunk_size=cfg.stats_chunk_size,
                        with_entropy=loss_config.entropy_coef > 0,
                        prompt_length=rollout.prompt_length - cols.start,
                        group_size=group,
                    )
                loss, metrics = policy_loss(
                    logprob,
                    old_logprob[micro, cols],
                    advantages[micro],
                    mask[micro, cols],
                    selected[micro, cols],
                    loss_config,
                    ref_logprob=None if ref_logprob is None else ref_logprob[micro, cols],
                    entropy=entropy,
                    denominator=denominator,
                    kl_denominator=kl_denominator,
                    row_counts=row_counts[micro],
                    kl_row_counts=kl_row_counts[micro],
                )
                loss.backward()
                n_loss = float(positions[micro, cols].sum())
                for key, value in metrics.items():
                    if not isinstance(value, (int, float)) or value != value:
                        continue
                    w = 1.0 if key in SUMMED_METRICS else n_loss
                    mini_sums[key] = mini_sums.get(key, 0.0) + float(value) * w
                    mini_weights[key] = mini_weights.get(key, 0.0) + w
                tokens_done += int(attn[micro, cols].sum())
                rows_run += micro.numel()
            for key, total in mini_sums.items():  # sums stay sums, the rest token-weighted means
                value = total if key in SUMMED_METRICS else total / max(mini_weights[key], 1e-12)
                sums[key] = sums.get(key, 0.0) + value
            if all(p.grad is None for p in params):  # nothing ran: the dense update's zero grads
                for p in params:
                    p.grad = torch.zeros_like(p)
            max_norm = cfg.max_grad_norm if cfg.max_grad_norm > 0 else float("inf")
            grad_norms.append(float(torch.nn.utils.clip_grad_norm_(params, max_norm)))
            lr = scheduler.set(step, minis, n_updates)
            first_lr = lr if first_lr is None else first_lr
            optimizer.step()
            minis += 1
    optimizer.zero_grad(set_to_none=True)
    model.eval()
    out = {key: value / minis for key, value in sums.items()}
    out["grad_norm"] = float(np.mean(grad_norms))
    out["update/tokens"] = tokens_done
    out["update/rows_run"] = rows_run
    out["update/rows"] = int(rows_all.numel()) * cfg.num_epochs
    out["update/updates"] = minis
    out["lr"] = first_lr
    return out


def _informative_rows(prompt_index, advantages) -> torch.Tensor:
    """bool [N]: rows whose group has a nonzero advantage (dynamic sampling)."""
    nonzero = advantages.abs() > 0
    informative = torch.zeros(int(prompt_index.max()) + 1, dtype=torch.bool).index_put_(
        (prompt_index,), nonzero.cpu(), accumulate=True
    )
    return informative[prompt_index]
