"""Step 7 of a training step: the policy update, costing what it learns from.

`num_epochs` passes over mini-batches; one AdamW step per mini-batch, gradient accumulated over
micro-batches. The first update of a step is on-policy by construction: its old log-probabilities
are the update pass's own, detached (the weights have not moved yet), so its importance ratio is
exactly 1 whatever the two passes' rounding; later updates use the old-policy pass's. The
normaliser of the loss is the sum over the mini-batch's rows of the step's per-row counts
(`ict.loss.RowCounts`, from the step's run: the one ladder of ict.loss.normaliser, as TRL and
verl sum theirs), so each micro-batch's loss is an exact share of the mini-batch's and rows can be
left out without changing the gradient:

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

from dataclasses import dataclass

import numpy as np
import torch

from ict.loss import LossConfig, policy_loss
from ict.loss.modes import loss_mode_metrics
from ict.loss.normaliser import RowCounts, loss_masks
from ict.train.logprobs import column_span, policy_hidden, token_logprobs_from_hidden
from ict.training_metrics import ParamChange

SUMMED_METRICS = ("loss", "pg_loss")  # partial sums over micro-batches; the rest are averages


def loss_positions(mask, selected, loss_config: LossConfig):
    """bool [N, T]: where the loss reads log-probs (M, and K when a KL term runs)."""
    M, _, K, _ = loss_masks(mask, selected, normalize_by=loss_config.normalize_by,
                            kl_on=loss_config.kl_on)  # fmt: skip
    return M | K if loss_config.kl_coef != 0 else M


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


@dataclass
class UpdateBatch:
    """One rollout batch as the update reads it. rollout: ict.generation.Rollout ([N, T] ids,
    masks); old_logprob, ref_logprob: [N, T] float32 (ref None without a KL term; old None when
    the update is one on-policy mini-batch, which never reads it); advantages:
    [N]; selected: bool [N, T] (the step's selection, every valid token while dense); counts:
    its per-row normaliser counts (ict.loss.RowCounts: the step run's `counts`; None: counted
    here from `selected`)."""

    rollout: object
    old_logprob: torch.Tensor | None
    advantages: torch.Tensor
    selected: torch.Tensor
    ref_logprob: torch.Tensor | None = None
    counts: RowCounts | None = None


@dataclass(frozen=True)
class UpdateSwitches:
    """The three savings of the module docstring, each on by default (skip_rows None: the
    config's `skip_zero_advantage`); off, the update is the plain one (same gradients)."""

    skip_rows: bool | None = None
    head_on_loss_only: bool = True
    stop_at_last: bool = True


def update_policy(
    plan,
    policy,
    optimizer,
    scheduler,
    batch: UpdateBatch,
    *,
    step: int,
    switches: UpdateSwitches = UpdateSwitches(),
    stats=None,
) -> dict:
    """Run the update on one rollout batch; returns loss metrics averaged over mini-batches.

    plan: the RunPlan (loss, batch plan, epochs, clipping norm, the shuffle's seed stream, ...);
    policy: the PolicyContext (model, device, precision, heads); optimizer: AdamW
    (ict.train.schedule.make_optimizer); scheduler: its LRSchedule, which sets the lr before each
    update. step: the rollout batch (1-based; seeds the mini-batch shuffle, places the lr).
    Returns {metric: value, "grad_norm" (the mean over the step's updates of the pre-clip total
    gradient norm), "lr" (of the first update), "update/tokens", "update/rows_run",
    "update/rows", "update/updates", "update/param_change_rel" (ict.training_metrics.ParamChange over the
    step's updates), and the loss mode's counts over every loss call of the step
    (ict.loss.modes.loss_mode_metrics: `loss_mode/changed_tokens`, `loss_mode/changed_rate`,
    `loss_mode/nominal_rate`; none for vanilla)}.

    stats: an ict.train.stats_in_update.StatsInUpdate when the step's statistics come from this
    update's forward (`plan.one_forward`: one epoch, one mini-batch): every micro-batch hands it
    its hidden states (and, deferred, takes its selection from it before its loss), the rows the
    update leaves out run a forward without gradient for it, and every forward covers all
    columns (`stop_at_last` does not apply).
    """
    cfg, loss_config = plan.config, plan.loss
    run = _UpdateRun(plan, policy, batch, switches, stats)
    if run.rows_all.numel() == 0:
        run.observe_rest(run.rows_all)
        return {"update/skipped": 1}
    change = ParamChange(policy.model.parameters())  # one snapshot per step
    units = run.rows_all.view(-1, run.group)  # whole groups of G rows when prompts are shared
    mini_units = max(1, (plan.batch.mini_rows or run.rows_all.numel()) // run.group)
    generator = torch.Generator().manual_seed(plan.seeds.shuffle(step))
    n_updates = plan.batch.epochs * -(-units.shape[0] // mini_units)  # updates this step takes
    sums: dict[str, float] = {}
    grad_norms, lrs = [], []
    policy.model.train()
    for _epoch in range(plan.batch.epochs):
        shuffle = plan.batch.epochs > 1 or plan.batch.mini_rows
        order = units[torch.randperm(units.shape[0], generator=generator)] if shuffle else units
        for mini in (chunk.flatten() for chunk in order.split(mini_units)):
            optimizer.zero_grad(set_to_none=True)
            for key, value in run.minibatch(mini).items():
                sums[key] = sums.get(key, 0.0) + value
            grad_norms.append(run.clip_gradients(cfg.max_grad_norm))
            lrs.append(scheduler.set(step, len(lrs), n_updates))
            optimizer.step()
            run.on_policy = False  # the weights have moved: the stored old log-probs from here
    optimizer.zero_grad(set_to_none=True)
    policy.model.eval()
    out = {key: value / len(lrs) for key, value in sums.items()}
    out["grad_norm"] = float(np.mean(grad_norms))
    out["update/tokens"] = run.tokens_done
    out["update/rows_run"] = run.rows_run
    out["update/rows"] = int(run.rows_all.numel()) * plan.batch.epochs
    out["update/updates"] = len(lrs)
    out["update/param_change_rel"] = change.relative()
    out.update(
        loss_mode_metrics(
            loss_config.loss_mode, loss_config.covariance, run.mode_changed, run.mode_tokens
        )
    )
    out["lr"] = lrs[0]
    return out


class _UpdateRun:
    """One update_policy call's tensors on the device and its per-mini-batch work."""

    def __init__(self, plan, policy, batch: UpdateBatch, switches: UpdateSwitches, stats=None):
        cfg, loss_config = plan.config, plan.loss
        self.policy, self.cfg, self.loss_config = policy, cfg, loss_config
        self.batch = batch
        self.skip = cfg.skip_zero_advantage if switches.skip_rows is None else switches.skip_rows
        self.switches, self.stats = switches, stats
        rollout, device = batch.rollout, policy.device
        self.ids, self.attn = rollout.input_ids.to(device), rollout.attention_mask.to(device)
        self.mask = rollout.response_mask.to(device).bool()
        self.selected = batch.selected.to(device)
        self.positions = loss_positions(self.mask, self.selected, loss_config)
        self.rows_all = torch.arange(self.ids.shape[0])
        if cfg.drop_zero_variance_groups:
            self.rows_all = self.rows_all[_informative_rows(rollout.prompt_index, batch.advantages)]
        self.group, self.micro_rows = plan.batch.rows(self.ids.shape[0])
        self.counts = batch.counts  # else the plan's counts of `selected` (ict.step.StepPlan)
        if self.counts is None:
            self.counts = plan.step_plan.counts(self.mask, self.selected)
        self.params = [p for p in policy.model.parameters() if p.requires_grad]
        self.tokens_done = self.rows_run = 0
        self.mode_changed = self.mode_tokens = 0  # the loss mode's counts over the step's calls
        # before the step's first optimizer step the weights are the old policy's: the update's
        # own log-probs, detached, are the old ones (rho exactly 1, not 1 up to the rounding of
        # two different passes; METHOD.md "Clip-Cov and KL-Cov")
        self.on_policy = True

    def minibatch(self, mini) -> dict[str, float]:
        """Forward and backward of the mini-batch `mini` (row indices), micro-batch by
        micro-batch, each loss an exact share of the mini-batch's (one normaliser). Returns its
        metrics: sums stay sums, the rest token-weighted means."""
        lc, counts = self.loss_config, self.counts
        index = mini.to(counts.loss.device)
        denominators = tuple(  # the mini-batch's normaliser: its rows' shares, at least 1
            max(float(int(share[index].sum())), 1.0) for share in (counts.loss, counts.kl_loss)
        )
        run = mini
        if self.skip:
            run = contributing_rows(mini, self.batch.advantages, self.positions, lc, self.group)
        self.observe_rest(run)
        sums: dict[str, float] = {}
        weights: dict[str, float] = {}
        for micro in run.split(self.micro_rows) if run.numel() else ():
            metrics, n_loss = self.micro_step(micro, denominators)
            for key, value in metrics.items():
                if key.startswith("loss_mode/"):  # counted over the step (micro_step)
                    continue
                if not isinstance(value, (int, float)) or value != value:
                    continue
                w = 1.0 if key in SUMMED_METRICS else n_loss
                sums[key] = sums.get(key, 0.0) + float(value) * w
                weights[key] = weights.get(key, 0.0) + w
        return {
            key: total if key in SUMMED_METRICS else total / max(weights[key], 1e-12)
            for key, total in sums.items()
        }

    def observe_rest(self, run) -> None:
        """With in-update statistics: a forward without gradient of every row the update does
        not run (`run`: the rows it does), micro-batch by micro-batch, for their statistics."""
        if self.stats is None:
            return
        done = torch.zeros(self.ids.shape[0], dtype=torch.bool)
        done[run] = True
        rest = torch.nonzero(~done).flatten()
        for micro in rest.split(self.micro_rows) if rest.numel() else ():
            cols = column_span(self.attn[micro])
            with torch.no_grad():
                self._observe(micro, cols, self._hidden(micro, cols))

    def _hidden(self, micro, cols):
        """Shifted hidden states [n, t, D] of rows `micro` at columns `cols` (the update's forward)."""
        with self.policy.autocast():
            return policy_hidden(
                self.policy.model, self.ids[micro, cols], self.attn[micro, cols],
                prompt_length=self.batch.rollout.prompt_length - cols.start,
                group_size=self.group,
            )  # fmt: skip

    def _observe(self, micro, cols, hidden) -> None:
        """Hand the micro-batch's hidden states to the in-update statistics; a deferred
        selection it returns becomes this micro-batch's (and its loss positions)."""
        picked = self.stats.observe(micro, cols, hidden)
        if picked is not None:
            self.selected[micro, cols] = picked
            self.positions[micro] = loss_positions(
                self.mask[micro], self.selected[micro], self.loss_config
            )

    def micro_step(self, micro, denominators) -> tuple[dict, float]:
        """Loss and backward of one micro-batch; returns (policy_loss metrics, loss tokens)."""
        b, cfg, lc = self.batch, self.cfg, self.loss_config
        stop = None
        if self.switches.stop_at_last and self.stats is None:
            needed = self.positions[micro].any(0).nonzero()
            stop = int(needed[-1]) + 1 if needed.numel() else None
        cols = column_span(self.attn[micro], stop)
        hidden = self._hidden(micro, cols)
        if self.stats is not None:
            self._observe(micro, cols, hidden)
        where = self.positions if self.switches.head_on_loss_only else self.mask
        with self.policy.autocast():
            logprob, entropy = token_logprobs_from_hidden(
                hidden, self.policy.head, self.ids[micro, cols], where[micro, cols],
                temperature=cfg.temperature, chunk_size=cfg.stats_chunk_size,
                with_entropy=lc.needs_entropy,
            )  # fmt: skip
        old = logprob.detach() if self.on_policy else b.old_logprob[micro, cols]
        loss, metrics = policy_loss(
            logprob, old, b.advantages[micro], self.mask[micro, cols],
            self.selected[micro, cols], lc,
            ref_logprob=None if b.ref_logprob is None else b.ref_logprob[micro, cols],
            entropy=entropy, denominator=denominators[0], kl_denominator=denominators[1],
            row_counts=self.counts.tokens[micro.to(self.counts.tokens.device)],
            kl_row_counts=self.counts.kl_tokens[micro.to(self.counts.tokens.device)],
        )  # fmt: skip
        loss.backward()
        if "loss_mode/changed_tokens" in metrics:
            self.mode_changed += int(metrics["loss_mode/changed_tokens"])
            self.mode_tokens += int((self.mask & self.selected)[micro, cols].sum())
        self.tokens_done += int(self.attn[micro, cols].sum())
        self.rows_run += micro.numel()
        return metrics, float(self.positions[micro, cols].sum())

    def clip_gradients(self, max_grad_norm: float) -> float:
        """Clip to max_grad_norm (0: off) and return the norm; zero grads if nothing ran."""
        if all(p.grad is None for p in self.params):  # nothing ran: the dense update's zeros
            for p in self.params:
                p.grad = torch.zeros_like(p)
        max_norm = max_grad_norm if max_grad_norm > 0 else float("inf")
        return float(torch.nn.utils.clip_grad_norm_(self.params, max_norm))


def _informative_rows(prompt_index, advantages) -> torch.Tensor:
    """bool [N]: rows whose group has a nonzero advantage (dynamic sampling)."""
    nonzero = advantages.abs() > 0
    informative = torch.zeros(int(prompt_index.max()) + 1, dtype=torch.bool).index_put_(
        (prompt_index,), nonzero.cpu(), accumulate=True
    )
    return informative[prompt_index]
