"""One forward per row when on-policy: the step's token statistics from the update's own forward.

When the update is on-policy (one epoch, one mini-batch per rollout batch, dropout off) the weights
the update's forward runs on are the old policy's, so the separate old-policy pass
(ict.train.old_policy) computes nothing the update's forward does not: the update's log-probs,
detached, are the old ones (ict.train.update), and its hidden states, detached, give the token
statistics. The plan says once whether a run can work this way (ict.methods.StepPlan.
one_forward_off, from the native layout of ict.train.plan.step_layout); `StatsInUpdate` collects what the update's micro-batches computed and returns
the step's statistics and selection once the update has run.

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
  the counts come from ict.select.topk.count_rule_mask (`initial_selection`), and `finish`
  checks that the real selection kept exactly those counts.
Which case a method is, or why it needs the whole batch's statistics first, is
ict.methods.selection_in_forward, the rule TRL's single forward uses too.
Rows the update leaves out (advantage 0, dropped groups) run a forward without gradient, for
their statistics only. Every row thus runs one forward per step instead of two.
"""

from __future__ import annotations

import time

import torch

from ict.methods import StepInputs
from ict.stats import STAT_FIELDS, TokenStats
from ict.train.old_policy import rollout_stats


class StatsInUpdate:
    """The step's statistics, collected from the update's forwards (module docstring).

    plan: RunPlan; policy: PolicyContext; rollout: ict.generation.Rollout [N, T];
    advantages: [N] on the device; step: the rollout batch (1-based)."""

    def __init__(self, plan, policy, rollout, advantages, *, step: int):
        self.plan, self.policy, self.rollout = plan, policy, rollout
        self.advantages, self.step = advantages, step
        self.mask = rollout.response_mask.to(policy.device).bool()
        self.tokens = rollout.input_ids.to(policy.device)
        self.deferred = plan.step.deferred(step)
        self.hidden: torch.Tensor | None = None  # [N, T, D] shifted, detached (not deferred)
        self.fields: dict[str, torch.Tensor] = {}  # [N, T] statistics (deferred)
        self.selected = torch.zeros_like(self.mask)  # the selection the update trains on
        self.counted: torch.Tensor | None = None  # deferred: the selection the normaliser counts
        self.seconds = 0.0  # time spent on statistics and selection inside the update

    def _inputs(self, rows, cols, stats):
        return StepInputs(
            self.mask[rows, cols], stats, self.advantages[rows], self.tokens[rows, cols]
        )

    def initial_selection(self) -> torch.Tensor:
        """bool [N, T]: the selection the update's normaliser counts (deferred: its per-response
        counts are the real one's; else the real selection: every valid token while dense)."""
        rows = self.plan.batch.rows(self.mask.shape[0])[1]
        all_rows = slice(None)
        first, deferred = self.plan.step.before_statistics(
            self._inputs(all_rows, all_rows, None), step=self.step, micro_batch_size=rows
        )
        if deferred:
            self.counted = first
        else:
            self.selected = first
        return first.clone()

    @torch.no_grad()
    def observe(self, rows, cols: slice, hidden: torch.Tensor) -> torch.Tensor | None:
        """Take the detached shifted hidden states [n, t, D] of rows `rows` (whole groups) at
        columns `cols`; returns their selection, bool [n, t], when it is deferred, else None."""
        start = time.perf_counter()
        hidden = hidden.detach()
        if not self.deferred:
            if self.hidden is None:
                self.hidden = hidden.new_zeros(self.mask.shape + hidden.shape[-1:])
            self.hidden[rows, cols] = hidden
            self.seconds += time.perf_counter() - start
            return None
        stats = rollout_stats(self.policy, self.rollout, self.plan, hidden, rows, cols)
        for name in STAT_FIELDS:
            value = getattr(stats, name)
            if value is None:
                continue
            if name not in self.fields:
                self.fields[name] = torch.zeros(self.mask.shape, dtype=value.dtype,
                                                device=value.device)  # fmt: skip
            self.fields[name][rows, cols] = value
        inputs = self._inputs(rows, cols, stats)
        picked = self.plan.step.select_own(inputs, step=self.step)
        self.selected[rows, cols] = picked
        self.seconds += time.perf_counter() - start
        return picked

    @torch.no_grad()
    def finish(self):
        """The step's (TokenStats [N, T], StepSelection) once every row has been observed. The
        selection the update trained on is checked against the step's (and, deferred, its
        per-response counts against the ones the normaliser counted)."""
        start = time.perf_counter()
        if self.deferred:
            f = self.fields
            stats = TokenStats(f["entropy"], f["renyi2"], f["logprob"], f["js"], mask=self.mask,
                               kl=f.get("kl"))  # fmt: skip
        else:
            stats = rollout_stats(self.policy, self.rollout, self.plan, self.hidden)
        plan = self.plan
        selection = plan.step.select(
            StepInputs(self.mask, stats, self.advantages, self.tokens), step=self.step,
            micro_batch_size=plan.batch.rows(len(self.mask))[1],
        )  # fmt: skip
        used = self.selected
        counts_differ = self.deferred and not torch.equal(self.counted.sum(-1), used.sum(-1))
        if counts_differ or not torch.equal(selection.selected, used):
            raise RuntimeError(
                f"step {self.step}: the selection computed in the update's forward differs from "
                f"the step's ({int(selection.selected.sum())} vs {int(used.sum())} tokens); "
                "set one_forward: false and report this as a bug"
            )
        self.seconds += time.perf_counter() - start
        return stats, selection
