"""The training step as a service: steps 4-7 of a training step on a rollout, written once.

    policy = PolicyContext.of(plan, model, ref_model)      # model, reference, heads, device, precision
    step = TrainingStep(plan, policy, optimizer, scheduler)
    metrics, scored = step.train_on_rollout(rollout, rewards, step=k)
        # advantages, statistics, selection, update (one forward per row when on-policy)
    scored = step.select_on_rollout(rollout, advantages, step=k)   # no update (`ict inspect`)
    metrics = step.update_on_selection(scored, step=k, switches=...)   # the update alone

The native trainer (ict.train.trainer), `ict inspect --model` (ict.train.inspect) and
benchmarks/train_step.py call it. The step itself is ict.step's, driven as every engine drives it:
`run = plan.step_plan.begin(...)` on the statistics (two passes) or before them (the single
forward, ict.train.stats_in_update), `run.counts` the update's normaliser, `run.finish()` the
selection, counts and metrics; TRL and verl drive the same run inside their trainers' hooks.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from ict.generation import Rollout
from ict.head import LogitHead, logit_head
from ict.loss import RowCounts, compute_advantages
from ict.precision import PrecisionChoice
from ict.stats import TokenStats
from ict.step import StepInputs, StepSelection
from ict.train.old_policy import old_policy_pass, reference_logprobs
from ict.train.plan import RunPlan
from ict.train.stats_in_update import StatsInUpdate
from ict.train.update import UpdateBatch, UpdateSwitches, update_policy


@dataclass
class PolicyContext:
    """What a step computes with: the policy model, the frozen reference model (None unless the
    KL term or the score's reference reads one), their logit heads (ict.head: the logits each
    model samples from), the device and the precision (autocast) of the model passes."""

    model: torch.nn.Module
    ref_model: torch.nn.Module | None
    head: LogitHead
    ref_head: LogitHead | None
    device: torch.device
    precision: PrecisionChoice

    @classmethod
    def of(cls, plan: RunPlan, model, ref_model=None) -> PolicyContext:
        """The context of `model` (and `ref_model`) with the plan's device and precision."""
        return cls(
            model,
            ref_model,
            logit_head(model),
            None if ref_model is None else logit_head(ref_model),
            plan.device,
            plan.precision,
        )

    def autocast(self):
        """The precision context of the statistics and update passes."""
        return self.precision.context(self.device.type)


@dataclass
class ScoredBatch:
    """A rollout scored as a step scores it before its update. rollout: ict.generation.Rollout;
    advantages [N] (on the device); stats: TokenStats [N, T]; old_logprob, ref_logprob [N, T]
    (ref None without a KL term; old None when the update ran on-policy in one forward); mask:
    bool [N, T] valid tokens; selection: the step's selection (`.selected` is what the update
    trains on); counts: its per-row normaliser (ict.loss.RowCounts); metrics: the step's
    (ict.step.step_metrics keys)."""

    rollout: Rollout
    advantages: torch.Tensor
    stats: TokenStats
    old_logprob: torch.Tensor | None
    ref_logprob: torch.Tensor | None
    mask: torch.Tensor
    selection: StepSelection
    counts: RowCounts
    metrics: dict


class TrainingStep:
    """Steps 4-7 of a training step under `plan` for `policy`; `optimizer` and `scheduler`
    (ict.train.schedule) are needed by `update_on_selection` and `train_on_rollout` only."""

    def __init__(self, plan: RunPlan, policy: PolicyContext, optimizer=None, scheduler=None):
        self.plan, self.policy = plan, policy
        self.optimizer, self.scheduler = optimizer, scheduler

    def advantages(self, rollout: Rollout, rewards: torch.Tensor) -> tuple[torch.Tensor, dict]:
        """Step 4: group-relative advantages [N] on the device, and the estimator's info."""
        advantages, info = compute_advantages(
            rewards, rollout.prompt_index, mode=self.plan.config.advantage
        )
        return advantages.to(self.policy.device), info

    def select_on_rollout(
        self, rollout: Rollout, advantages: torch.Tensor, *, step: int
    ) -> ScoredBatch:
        """Steps 5-6: the old policy's statistics and log-probs (no gradient) and the step's run on
        them (ict.step.StepRun: the method's own selection, the diagnostics, the warm-up, the
        normaliser counts, the metrics)."""
        plan, policy = self.plan, self.policy
        stats, old_logprob, ref_logprob = old_policy_pass(policy, rollout, plan)
        mask = rollout.response_mask.to(policy.device).bool()
        tokens = rollout.input_ids.to(policy.device)
        run = plan.step_plan.begin(
            StepInputs(mask, stats, advantages, tokens), step=step,
            micro_batch_size=plan.batch.rows(mask.shape[0])[1],
        )  # fmt: skip
        result = run.finish()
        return ScoredBatch(rollout, advantages, stats, old_logprob, ref_logprob, mask,
                           result.selection, result.counts, result.metrics)  # fmt: skip

    def update_on_selection(
        self, scored: ScoredBatch, *, step: int, switches: UpdateSwitches | None = None
    ) -> dict:
        """Step 7: the policy update on the scored batch's selection (ict.train.update);
        `switches`: the update's savings (default all on)."""
        batch = UpdateBatch(
            scored.rollout, scored.old_logprob, scored.advantages, scored.selection.selected,
            scored.ref_logprob, scored.counts,
        )  # fmt: skip
        return update_policy(
            self.plan, self.policy, self.optimizer, self.scheduler, batch, step=step,
            switches=switches or UpdateSwitches(),
        )  # fmt: skip

    def _run_one_forward(self, rollout: Rollout, advantages: torch.Tensor, *, step: int):
        """Steps 5-7 in one forward per row (`plan.one_forward`, ict.train.stats_in_update): the
        update computes the statistics and, when they decide it, the selection. Returns
        (ScoredBatch with old_logprob None, the update's metrics, seconds of statistics and
        selection, seconds of the rest of the update)."""
        plan, policy = self.plan, self.policy
        t0 = time.perf_counter()
        in_update = StatsInUpdate(plan, policy, rollout, advantages, step=step)
        batch = UpdateBatch(
            rollout, None, advantages, in_update.initial_selection(),
            reference_logprobs(policy, rollout, plan), in_update.counts,
        )  # fmt: skip
        loss_metrics = update_policy(
            plan, policy, self.optimizer, self.scheduler, batch, step=step,
            switches=UpdateSwitches(), stats=in_update,
        )  # fmt: skip
        result, stats = in_update.finish()
        total = time.perf_counter() - t0
        scored = ScoredBatch(rollout, advantages, stats, None, batch.ref_logprob, in_update.mask,
                             result.selection, result.counts, result.metrics)  # fmt: skip
        return scored, loss_metrics, in_update.seconds, total - in_update.seconds

    def train_on_rollout(
        self, rollout: Rollout, rewards: torch.Tensor, *, step: int
    ) -> tuple[dict, ScoredBatch]:
        """Steps 4-7 on a rollout and its rewards [N]; returns (the step's metrics: advantages,
        selection, loss and update metrics, times and throughput; the ScoredBatch)."""
        advantages, info = self.advantages(rollout, rewards)
        metrics: dict = {
            "zero_variance_groups": int(info.get("zero_variance_groups", 0)),
            "zero_variance_share": info["zero_variance_share"],
            "no_signal_share": info["no_signal_share"],
        }
        if self.plan.one_forward:
            scored, loss_metrics, stats_s, update_s = self._run_one_forward(
                rollout, advantages, step=step
            )
        else:
            t0 = time.perf_counter()
            scored = self.select_on_rollout(rollout, advantages, step=step)
            stats_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            loss_metrics = self.update_on_selection(scored, step=step)
            update_s = time.perf_counter() - t0
        metrics["time/stats_s"] = stats_s
        # the paper's diagnostics describe the method's own picks, also during the dense warm-up
        metrics.update(scored.metrics)
        metrics["dense_warmup"] = scored.selection.dense
        lr = loss_metrics.pop("lr", None)
        metrics.update(loss_metric_names(loss_metrics))
        metrics["lr"] = lr if lr is not None else self.optimizer.param_groups[0]["lr"]
        metrics["time/update_s"] = update_s
        metrics["throughput/update_tok_s"] = loss_metrics.get("update/tokens", 0) / max(
            update_s, 1e-9
        )
        return metrics, scored


def loss_metric_names(loss_metrics: dict) -> dict:
    """The update's metrics under their metrics.jsonl names: loss/*, kl_ref, update/*, ..."""
    out = {}
    for key, value in loss_metrics.items():
        if key in ("clip_fraction", "kl_ref", "grad_norm") or key.startswith(
            ("update/", "loss/", "loss_mode/")
        ):
            out[key] = value
        elif key == "loss":
            out["loss/total"] = value
        elif key in ("kl", "kl_mean"):
            out["kl_ref"] = value
        else:
            out[f"loss/{key}"] = value
    return out
