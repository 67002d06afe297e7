"""One rollout batch's step, driven the same way by every engine (native, TRL, verl).

    run = plan.begin(StepInputs(mask, stats, advantages, tokens), step=k, **where)
    run.selected    # bool [B, T]: what the update trains on, as far as known now
    run.counts      # ict.loss.RowCounts per row: the normaliser every engine sums
    run.observe(rows, cols, stats)   # single forward: one micro-batch's statistics [n, t]
    result = run.finish()            # StepResult: selection, counts, metrics

Two passes (`inputs.stats` given): the statistics came from a forward of their own, the selection
is made at once and `finish` adds the metrics. The single forward (`inputs.stats` None; the plan's
`one_forward`): the statistics exist only after each micro-batch's forward in the update, so the
selection is made before the first loss (`StepPlan.before_statistics`: the warm-up's every valid
token, a selection that reads no statistic, or, for a per-row top-k made per micro-batch, each
row's count: `deferred`), each micro-batch hands its statistics to `observe` (and, deferred, takes
its rows' selection from it before its loss), and `finish` makes the step's selection on every
row's statistics and checks that what ran is it: the one mismatch check of every engine.

The rows `observe` takes are indices of the batch `begin` saw (long [n] or a slice), its columns a
slice; an engine whose statistics of the whole batch come otherwise (the native up-front case: from
the kept hidden states) passes them to `finish` instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from ict.stats import STAT_FIELDS, TokenStats
from ict.step.selection import StepInputs, StepSelection

if TYPE_CHECKING:
    from ict.loss import RowCounts
    from ict.step.plan import StepPlan

MISMATCH = (
    "step {step}: the selection made in the update's forward differs from the step's "
    "({ran} vs {want} tokens); set one_forward off (native: one_forward: false; TRL: "
    "one_forward=False) and report this as a bug"
)


@dataclass(frozen=True)
class StepResult:
    """What one rollout batch's step returns: the selection, its normaliser counts per row
    (ict.loss.RowCounts) and its metrics (ict.step.step_metrics keys)."""

    selection: StepSelection
    counts: RowCounts
    metrics: dict


class StepRun:
    """One rollout batch's step under a StepPlan (module docstring). Made by `StepPlan.begin`."""

    def __init__(self, plan: StepPlan, inputs: StepInputs, *, step: int, where: dict):
        self.plan, self.step, self.where = plan, int(step), where
        self.mask = inputs.mask.bool()
        self.advantages, self.tokens = inputs.advantages, inputs.tokens
        self.stats = inputs.stats
        self.selection: StepSelection | None = None
        self.deferred = False
        self.fields: dict[str, Tensor] = {}  # single forward: the observed statistics [B, T]
        if inputs.stats is not None:  # two passes: the step's selection at once
            self.selection = plan.select(self._inputs(inputs.stats), step=step, **where)
            self.selected = self.selection.selected
            counted = self.selected
        else:
            counted, self.deferred = plan.before_statistics(inputs, step=step, **where)
            self.selected = torch.zeros_like(self.mask) if self.deferred else counted.clone()
        self.counted = counted  # what the normaliser counts (deferred: each row's count)
        self.counts = plan.counts(self.mask, counted)

    def _inputs(self, stats) -> StepInputs:
        return StepInputs(self.mask, stats, self.advantages, self.tokens)

    def observe(self, rows, cols: slice, stats: TokenStats | None) -> Tensor | None:
        """A micro-batch's statistics (TokenStats [n, t], or None when the engine keeps its own),
        rows `rows` (whole groups) at columns `cols`; returns their selection, bool [n, t], when
        it is deferred (the selection the micro-batch's loss trains on), else None."""
        if stats is not None:
            for name in STAT_FIELDS:
                value = getattr(stats, name, None)
                if value is None:
                    continue
                if name not in self.fields:
                    self.fields[name] = value.new_zeros(self.mask.shape)
                self.fields[name][rows, cols] = value
        if not self.deferred:
            return None
        inputs = StepInputs(self.mask[rows, cols], stats, self._at(self.advantages, rows),
                            self._at(self.tokens, rows, cols))  # fmt: skip
        picked = self.plan.select_own(inputs, step=self.step)
        self.selected[rows, cols] = picked
        return picked

    @staticmethod
    def _at(value, rows, cols=None):
        if value is None:
            return None
        return value[rows] if cols is None or value.dim() == 1 else value[rows, cols]

    def observed(self) -> TokenStats:
        """The statistics of every row `observe` saw, TokenStats [B, T]."""
        f = self.fields
        return TokenStats(f["entropy"], f["renyi2"], f["logprob"], f["js"], mask=self.mask,
                          kl=f.get("kl"))  # fmt: skip

    @torch.no_grad()
    def finish(self, stats: TokenStats | None = None, *, gather=None) -> StepResult:
        """The step's StepResult: its selection, per-row counts and metrics (`gather`: see
        StepPlan.metrics). Single forward: the selection made on every row's statistics (`stats`,
        default the observed ones), checked against what the update trained on and, deferred,
        against each row's count the normaliser used (a RuntimeError if not). Two passes: `stats`
        the statistics the metrics read (default: those `begin` saw)."""
        if self.selection is not None:
            self.stats = self.stats if stats is None else stats
        else:
            self.stats = self.observed() if stats is None else stats
            self.selection = self.plan.select(self._inputs(self.stats), step=self.step,
                                              **self.where)  # fmt: skip
            want, ran = self.selection.selected, self.selected.to(self.mask.device)
            counts_differ = self.deferred and not torch.equal(
                self.counted.sum(-1), ran.sum(-1)
            )  # fmt: skip
            if counts_differ or not torch.equal(want, ran):
                raise RuntimeError(MISMATCH.format(step=self.step, ran=int(ran.sum()),
                                                   want=int(want.sum())))  # fmt: skip
        metrics = self.plan.metrics(self.stats, self.mask, self.selection, gather)
        return StepResult(self.selection, self.counts, metrics)


__all__ = ["StepResult", "StepRun"]
