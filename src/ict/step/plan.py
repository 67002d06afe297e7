"""The method's step, resolved once and run the same way on every engine (native, TRL, verl).

    plan = StepPlan.resolve(options, StepLayout(total_batches=100, micro_batches=4), seed=0,
                            loss=lambda method: LossConfig(...))
    plan.method            # the resolved Method, its warm-up fitted to the run (`run_warmup`)
    plan.explicit_warmup   # whether the options set dense_warmup_steps
    plan.loss              # the ict.loss.LossConfig the engine's loss runs (None: the engine's own)
    plan.one_forward_off   # why the statistics cannot come from the update's forward (None: they do)
    plan.selection_when    # up_front | per_micro_batch | whole_batch (selection_in_forward)
    plan.seeds             # SeedStreams: sampling, selection, shuffle, refill (ict.seeds)
    plan.warning           # an explicit warm-up covering the whole run, else None
    plan.with_method(m)    # the same plan running method m: everything that depends on it re-derived

    run = plan.begin(StepInputs(mask, stats, advantages, tokens), step=k)   # ict.step.run.StepRun
    run.selected, run.counts   # what the update trains on and its per-row normaliser counts
    run.observe(rows, cols, stats)   # single forward: a micro-batch's statistics
    result = run.finish()          # StepResult: selection, counts, metrics (checked against what ran)

What an engine provides is its layout (`StepLayout`: run length, micro-batches, processes, and the
reasons of its own that rule the single forward out) and its loss rule; what it calls is this
plan. Nothing here knows an engine. docs/engines/CONTRACT.md.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from torch import Tensor

from ict.loss.normaliser import row_counts
from ict.methods.options import resolve_method
from ict.seeds import derive_seed, stream_seed
from ict.select.topk import count_rule_mask
from ict.stats import STAT_FIELDS, TokenStats
from ict.step.run import StepRun
from ict.step.selection import (
    LOCAL_REFERENCES,
    StepInputs,
    StepSelection,
    gathered,
    is_dense,
    run_warmup,
    select_method,
    select_step,
    selection_in_forward,
    selection_seed,
    step_metrics,
    warmup_warning,
)


@dataclass(frozen=True)
class SeedStreams:
    """The run's named seeds, each stream its own derivation (ict.seeds): the rollouts' sampling
    `derive_seed(run, step)` (as before issue 41) and its refill rounds (`refill`), the step's
    selection (`selection_seed`: the random controls' draws) and the mini-batch shuffle
    `stream_seed(run, name, step)`, so no two generators of a step are seeded alike. `prompts`: the prompt order's seed; `init`: torch /
    numpy / random at start."""

    run: int

    def sampling(self, step: int) -> int:
        return derive_seed(self.run, step)

    def selection(self, step: int) -> int:
        return selection_seed(self.run, step)

    def shuffle(self, step: int) -> int:
        return stream_seed(self.run, "shuffle", step)

    def refill(self, step: int, round_: int) -> int:
        """The sampling seed of generation round `round_` (0-based) of step `step`: round 0 is
        the step's `sampling` seed (a step without refill), round r > 0 derived from it."""
        base = self.sampling(step)
        return base if round_ == 0 else derive_seed(base, round_)

    @property
    def prompts(self) -> int:
        return self.run

    @property
    def init(self) -> int:
        return self.run


@dataclass(frozen=True)
class StepLayout:
    """How an engine runs its rollout batches, as far as the step needs to know, at set-up.

    total_batches: rollout batches in the run (None: not known yet; a method's warm-up is then
    taken as resolved). micro_batches: forward/backward passes per rollout batch on each process.
    processes: data-parallel processes. engine_off: the engine's own first reason the update's
    forward cannot give the statistics (the single forward is off, the update is off-policy,
    dropout, a multimodal model), None when none. stats_per_micro_batch: the single forward would
    compute the statistics of each micro-batch on its own (TRL), not of the whole batch at the
    end (native): the score's reference must then be row- or group-local. split_off: why the
    engine's micro-batches may not hold whole groups or its loss depends on how rows are split
    (None: they hold whole groups and it does not)."""

    total_batches: int | None = None
    micro_batches: int = 1
    processes: int = 1
    engine_off: str | None = "the engine runs no single forward"
    stats_per_micro_batch: bool = False
    split_off: str | None = None


def one_forward_off(method, granularity: str, layout: StepLayout) -> str | None:
    """Why `method`'s step cannot take its statistics from the update's own forward under
    `layout` (None: it can). The first reason wins: the engine's own, then the method's selection
    (`selection_in_forward`), then the statistics' reference, then the micro-batches' split."""
    if layout.engine_off:
        return layout.engine_off
    when, why = selection_in_forward(method, granularity)
    if when == "whole_batch":
        return why
    if layout.stats_per_micro_batch and method.reference not in LOCAL_REFERENCES:
        return (
            f"reference={method.reference!r} spans the rollout batch (a micro-batch has "
            f"{', '.join(LOCAL_REFERENCES)})"
        )
    if layout.split_off and (when == "per_micro_batch" or layout.stats_per_micro_batch):
        return layout.split_off
    return None


def _no_loss(method) -> None:
    return None


@dataclass(frozen=True)
class StepPlan:
    """The method's step of one run, resolved once (module docstring). `options`: the run's
    MethodOptions (granularity, selector options), read by every selection; `loss_of`: the
    engine's loss rule, Method -> ict.loss.LossConfig (None: the engine's own loss)."""

    method: object
    options: object
    explicit_warmup: bool
    loss: object
    seeds: SeedStreams
    layout: StepLayout
    one_forward_off: str | None
    selection_when: str
    warning: str | None = None
    # the rule, not a value: two plans are equal when what it gave (`loss`) is
    loss_of: object = dataclasses.field(default=_no_loss, compare=False)

    @classmethod
    def resolve(cls, options, layout: StepLayout, *, seed: int, loss=None, method=None) -> StepPlan:
        """Resolve the step of a run with method `options` (MethodOptions) under `layout`:
        `method` (default ict.methods.resolve_method(options)) with its warm-up fitted to
        `layout.total_batches` (a method's own capped at half the run, an explicit one kept:
        `run_warmup`), then `with_method`. `loss`: the engine's loss rule, a function of the
        resolved Method returning the ict.loss.LossConfig its loss runs (None: not ict's)."""
        explicit = options.dense_warmup_steps is not None
        base = resolve_method(options) if method is None else method
        fitted = run_warmup(base, layout.total_batches, explicit=explicit)
        plan = cls(
            method=None, options=options, explicit_warmup=explicit, loss=None,
            seeds=SeedStreams(int(seed)), layout=layout, one_forward_off=None,
            selection_when="", loss_of=loss or _no_loss,
        )  # fmt: skip
        return plan.with_method(fitted)

    def with_method(self, method) -> StepPlan:
        """This plan running the resolved `method` (its warm-up as given): the loss, the
        single-forward decision and the selection's timing re-derived from it, the options,
        layout and seeds kept."""
        when, _ = selection_in_forward(method, self.options.granularity)
        explicit, total = self.explicit_warmup, self.layout.total_batches
        return dataclasses.replace(
            self, method=method, loss=self.loss_of(method), selection_when=when,
            one_forward_off=one_forward_off(method, self.options.granularity, self.layout),
            warning=warmup_warning(method, total) if explicit else None,
        )  # fmt: skip

    @property
    def one_forward(self) -> bool:
        """Whether the statistics come from the update's own forward (`one_forward_off` None)."""
        return self.one_forward_off is None

    def is_dense(self, step: int) -> bool:
        """Whether rollout batch `step` (1-based) is in the warm-up (every valid token)."""
        return is_dense(self.method, step)

    def deferred(self, step: int) -> bool:
        """Single forward: whether step `step`'s selection is made per micro-batch from its
        statistics (a per-row top-k past the warm-up), not up front."""
        return self.selection_when == "per_micro_batch" and not self.is_dense(step)

    def select_own(self, inputs: StepInputs, *, step: int, **where) -> Tensor:
        """bool [B, T]: the method's own selection on `inputs` at step `step` (no warm-up, no
        diagnostics): ict.step.select_method with the step's seed. `where`: the batch's
        layout for the scopes (micro_batch_size / micro_batch_ids, process_group)."""
        seed = self.seeds.selection(step)
        return select_method(self.method, self.options, inputs, seed=seed, **where)

    def select(self, inputs: StepInputs, *, step: int, **where) -> StepSelection:
        """Step `step`'s selection: what the update trains on (every valid token while dense),
        the method's own and the diagnostics (ict.step.select_step)."""
        return select_step(
            self.method, self.options, inputs, step=step, seed=self.seeds.run, **where
        )

    def before_statistics(self, inputs: StepInputs, *, step: int, **where) -> tuple[Tensor, bool]:
        """Single forward, before the first micro-batch's loss: (bool [B, T], deferred). Not
        deferred: the selection the update trains on (every valid token while dense; else the
        method's own, which reads no statistic). Deferred: a mask with each row's count of the
        per-row top-k (ict.select.topk.count_rule_mask), whose normaliser counts are the real
        selection's; each micro-batch then selects with `select_own` (`inputs.stats` unused)."""
        mask = inputs.mask.bool()
        if self.is_dense(step):
            return mask.clone(), False
        if self.deferred(step):
            return count_rule_mask(mask, self.method.ratio), True
        return self.select_own(StepInputs(mask, None, inputs.advantages, inputs.tokens),
                               step=step, **where), False  # fmt: skip

    def counts(self, mask: Tensor, selected: Tensor):
        """Per-row normaliser counts of `selected` on `mask` (ict.loss.row_counts under the
        method's normalize_by and the plan's loss)."""
        return row_counts(mask, selected, normalize_by=self.method.normalize_by, loss=self.loss)

    def begin(self, inputs: StepInputs, *, step: int, **where) -> StepRun:
        """Step `step` on a rollout batch (ict.step.run.StepRun): with `inputs.stats` the
        selection at once (two passes); without, the single forward's (`before_statistics`),
        completed by `StepRun.observe` per micro-batch. `where`: see `select_own`."""
        return StepRun(self, inputs, step=step, where=where)

    def metrics(self, stats, mask: Tensor, selection: StepSelection, gather=None) -> dict:
        """The step's metrics (ict.step.step_metrics). `gather`: [B, T] -> [sum B, max T]
        over every process (TRL), applied to the stats, mask and selections first."""
        if gather is not None:
            fields = {f: getattr(stats, f, None) for f in STAT_FIELDS}
            stats = TokenStats(**{f: gather(v.float()) for f, v in fields.items() if v is not None})
            mask = gather(mask.long()).bool()
            selection = gathered(selection, gather)
        return step_metrics(stats, mask, selection)


__all__ = ["SeedStreams", "StepLayout", "StepPlan", "one_forward_off"]
