"""One forward per row when on-policy: the step's token statistics from the update's own forward.

When the update is on-policy (one epoch, one mini-batch per rollout batch, dropout off) the weights
the update's forward runs on are the old policy's, so the separate old-policy pass
(ict.train.old_policy) computes nothing the update's forward does not: the update's log-probs,
detached, are the old ones (ict.train.update), and its hidden states, detached, give the token
statistics. The plan says once whether a run can work this way (ict.step.StepPlan.
one_forward_off, from the native layout of ict.train.plan.step_layout); the step's run
(ict.step.StepRun, the one every engine drives) makes the selection and checks it, and
`StatsInUpdate` hands it what the update's micro-batches computed.

Two cases, by whether the step's selection reads the statistics:
- it does not (every token: GRPO, Clip-Cov, KL-Cov, the entropy bonus; the random controls; any
  method in its dense warm-up): the update selects up front (`initial_selection`) and the
  statistics, for the metrics, come at the end from the detached hidden states of every row, by
  the same call as the separate pass (ict.train.old_policy.rollout_stats on the whole batch);
- it does, per response from group-local statistics (the paper's ICT: the top 10% of each
  response by JS to its group's mean distribution at the same position): every micro-batch holds
  whole groups, its statistics come from its own forward before its loss, and its selection
  from them (`observe`). The loss normaliser is needed before the first micro-batch's loss: a
  per-response top-k keeps keep_count(n) of a response's n valid tokens whatever the scores, so
  the counts come from ict.select.topk.count_rule_mask (`initial_selection`, `counts`), and
  `finish` checks that the real selection kept exactly those counts (`StepRun.finish`).
Which case a method is, or why it needs the whole batch's statistics first, is
ict.step.selection_in_forward, the rule TRL's single forward uses too.
Rows the update leaves out (advantage 0, dropped groups) run a forward without gradient, for
their statistics only. Every row thus runs one forward per step instead of two.
"""

from __future__ import annotations

import time

import torch

from ict.step import StepInputs, StepRun
from ict.train.old_policy import rollout_stats


class StatsInUpdate:
    """The native side of the step's run (ict.step.StepRun) on the single forward: the update's
    micro-batches hand their hidden states here; the run makes and checks the selection (module
    docstring).

    plan: RunPlan; policy: PolicyContext; rollout: ict.generation.Rollout [N, T];
    advantages: [N] on the device; step: the rollout batch (1-based)."""

    def __init__(self, plan, policy, rollout, advantages, *, step: int):
        self.plan, self.policy, self.rollout = plan, policy, rollout
        self.mask = rollout.response_mask.to(policy.device).bool()
        inputs = StepInputs(self.mask, None, advantages, rollout.input_ids.to(policy.device))
        self.run: StepRun = plan.step_plan.begin(
            inputs, step=step, micro_batch_size=plan.batch.rows(self.mask.shape[0])[1]
        )
        self.hidden: torch.Tensor | None = None  # [N, T, D] shifted, detached (not deferred)
        self.seconds = 0.0  # time spent on statistics and selection inside the update

    @property
    def counts(self):
        """The update's normaliser, per row (ict.loss.RowCounts: `StepRun.counts`)."""
        return self.run.counts

    def initial_selection(self) -> torch.Tensor:
        """bool [N, T]: the selection the update starts from (deferred: each row's count, its
        rows' selections arrive from `observe`; else the real selection: every valid token while
        dense)."""
        return self.run.counted.clone()

    @torch.no_grad()
    def observe(self, rows, cols: slice, hidden: torch.Tensor) -> torch.Tensor | None:
        """Take the detached shifted hidden states [n, t, D] of rows `rows` (whole groups) at
        columns `cols`; returns their selection, bool [n, t], when it is deferred, else None."""
        start = time.perf_counter()
        hidden = hidden.detach()
        picked = None
        if self.run.deferred:  # the statistics of this micro-batch now: its rows select
            stats = rollout_stats(self.policy, self.rollout, self.plan, hidden, rows, cols)
            picked = self.run.observe(rows, cols, stats)
        else:  # kept: the statistics of the whole batch at the end (a batch reference)
            if self.hidden is None:
                self.hidden = hidden.new_zeros(self.mask.shape + hidden.shape[-1:])
            self.hidden[rows, cols] = hidden
        self.seconds += time.perf_counter() - start
        return picked

    @torch.no_grad()
    def finish(self):
        """The step's ict.step.StepResult once every row has been observed (its selection
        checked against what the update trained on: `StepRun.finish`), and its TokenStats
        [N, T]."""
        start = time.perf_counter()
        stats = None
        if not self.run.deferred:
            stats = rollout_stats(self.policy, self.rollout, self.plan, self.hidden)
        result = self.run.finish(stats)
        self.seconds += time.perf_counter() - start
        return result, self.run.stats
