"""The method's step, resolved once and executed the same way on every engine (native, TRL, verl).

    plan = StepPlan.resolve(options, StepLayout(total_batches=100, micro_batches=4), seed=0,
                            loss=LossConfig(...))
    plan.method            # the resolved Method, its warm-up fitted to the run (`run_warmup`)
    plan.explicit_warmup   # whether the options set dense_warmup_steps
    plan.loss              # the ict.loss.LossConfig the engine's loss runs (None: the engine's own)
    plan.one_forward_off   # why the statistics cannot come from the update's forward (None: they do)
    plan.selection_when    # up_front | per_micro_batch | whole_batch (selection_in_forward)
    plan.seeds             # SeedStreams: sampling, selection, shuffle (ict.seeds)
    plan.warning           # an explicit warm-up covering the whole run, else None

    result = plan.step(stats, mask, advantages, tokens, step=k)
    result.selection       # StepSelection: what the update trains on, the method's own, diagnostics
    result.counts          # StepCounts: per-row normaliser counts an engine sums over its updates
    result.metrics         # the step's selection metrics, the same keys on every engine

With the single forward (`one_forward_off` None) the statistics exist only after the update's
forward, so the step runs in three calls: `before_statistics` (the selection, or for a per-row
top-k its per-row counts, before the first loss), `select_own` on each micro-batch when the
selection is per micro-batch, and `step` once every row has been seen (checked against what ran).

What an engine provides is its layout (`StepLayout`: run length, micro-batches, processes, and the
reasons of its own that rule the single forward out); what it calls is this plan. Nothing here
knows an engine. docs/engines/CONTRACT.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from ict.methods.step import (
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
from ict.seeds import derive_seed, stream_seed


@dataclass(frozen=True)
class SeedStreams:
    """The run's named seeds, each stream its own derivation (ict.seeds): the rollouts' sampling
    `derive_seed(run, step)` (as before issue 41), the step's selection (`selection_seed`: the
    random controls' draws) and the mini-batch shuffle `stream_seed(run, name, step)`, so no two
    generators of a step are seeded alike. `prompts`: the prompt order's seed; `init`: torch /
    numpy / random at start."""

    run: int

    def sampling(self, step: int) -> int:
        return derive_seed(self.run, step)

    def selection(self, step: int) -> int:
        return selection_seed(self.run, step)

    def shuffle(self, step: int) -> int:
        return stream_seed(self.run, "shuffle", step)

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


@dataclass(frozen=True)
class StepCounts:
    """A selection's loss-normaliser counts per row, float [B] each, to be summed by the engine
    over the rows of one optimizer update (and its processes): `tokens` the normaliser's tokens
    D (selected, or valid for normalize_by="valid"), `rows` 1 where a row has a normaliser token,
    `loss` the row's share of LossConfig.count (None without a LossConfig)."""

    tokens: Tensor
    rows: Tensor
    loss: Tensor | None = None

    def take(self, index: Tensor) -> StepCounts:
        """The counts of rows `index` (long [n]), in that order."""
        return StepCounts(self.tokens[index], self.rows[index],
                          None if self.loss is None else self.loss[index])  # fmt: skip

    def split(self, sizes: list[int]) -> list[StepCounts]:
        """The counts of consecutive blocks of `sizes` rows (an engine's micro-batches)."""
        loss = [None] * len(sizes) if self.loss is None else self.loss.split(sizes)
        return [StepCounts(*parts) for parts in zip(self.tokens.split(sizes),
                                                    self.rows.split(sizes), loss, strict=True)]  # fmt: skip


def normaliser_counts(mask: Tensor, selected: Tensor, normalize_by: str, loss=None) -> StepCounts:
    """Per-row normaliser counts of `selected` (bool [B, T]) on the valid `mask` (bool [B, T])
    under `normalize_by`; with a LossConfig `loss`, also each row's share of `loss.count`
    (token_mean: D tokens; seq_mean_token_mean: 1 if the row has one; seq_mean_token_sum_norm:
    max_response_length, or T), so that sums over any rows are the count of those rows."""
    from ict.loss.policy import loss_masks

    _, D, _, _ = loss_masks(mask, selected, normalize_by=normalize_by)
    tokens = D.sum(-1).float()
    rows = (tokens > 0).float()
    share = None
    if loss is not None:
        if loss.loss_agg == "token_mean":
            share = tokens
        elif loss.loss_agg == "seq_mean_token_mean":
            share = rows
        else:
            share = tokens.new_full(tokens.shape, float(loss.max_response_length or mask.shape[1]))
    return StepCounts(tokens, rows, share)


@dataclass(frozen=True)
class StepResult:
    """What one rollout batch's step returns: the selection, its normaliser counts per row and
    its metrics (ict.methods.step_metrics keys)."""

    selection: StepSelection
    counts: StepCounts
    metrics: dict


@dataclass(frozen=True)
class StepPlan:
    """The method's step of one run, resolved once (module docstring). `options`: the run's
    MethodOptions (granularity, selector options), read by every selection."""

    method: object
    options: object
    explicit_warmup: bool
    loss: object
    seeds: SeedStreams
    layout: StepLayout
    one_forward_off: str | None
    selection_when: str
    warning: str | None = None

    @classmethod
    def resolve(cls, options, layout: StepLayout, *, seed: int, loss=None, method=None) -> StepPlan:
        """Resolve the step of a run with method `options` (MethodOptions) under `layout`:
        `method` (default ict.methods.resolve_method(options)) with its warm-up fitted to
        `layout.total_batches` (a method's own capped at half the run, an explicit one kept:
        `run_warmup`), the single-forward decision (`one_forward_off`) and the seed streams of
        run seed `seed`. `loss`: the ict.loss.LossConfig the engine's loss runs, if it runs ict's."""
        from ict.methods.options import resolve_method

        explicit = options.dense_warmup_steps is not None
        base = resolve_method(options) if method is None else method
        fitted = run_warmup(base, layout.total_batches, explicit=explicit)
        when, _ = selection_in_forward(fitted, options.granularity)
        return cls(
            method=fitted,
            options=options,
            explicit_warmup=explicit,
            loss=loss,
            seeds=SeedStreams(int(seed)),
            layout=layout,
            one_forward_off=one_forward_off(fitted, options.granularity, layout),
            selection_when=when,
            warning=warmup_warning(fitted, layout.total_batches) if explicit else None,
        )

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
        diagnostics): ict.methods.select_method with the step's seed. `where`: the batch's
        layout for the scopes (micro_batch_size / micro_batch_ids, process_group)."""
        seed = self.seeds.selection(step)
        return select_method(self.method, self.options, inputs, seed=seed, **where)

    def select(self, inputs: StepInputs, *, step: int, **where) -> StepSelection:
        """Step `step`'s selection: what the update trains on (every valid token while dense),
        the method's own and the diagnostics (ict.methods.select_step)."""
        return select_step(
            self.method, self.options, inputs, step=step, seed=self.seeds.run, **where
        )

    def before_statistics(self, inputs: StepInputs, *, step: int, **where) -> tuple[Tensor, bool]:
        """Single forward, before the first micro-batch's loss: (bool [B, T], deferred). Not
        deferred: the selection the update trains on (every valid token while dense; else the
        method's own, which reads no statistic). Deferred: a mask with each row's count of the
        per-row top-k (ict.select.topk.count_rule_mask), whose normaliser counts are the real
        selection's; each micro-batch then selects with `select_own` (`inputs.stats` unused)."""
        from ict.select.topk import count_rule_mask

        mask = inputs.mask.bool()
        if self.is_dense(step):
            return mask.clone(), False
        if self.deferred(step):
            return count_rule_mask(mask, self.method.ratio), True
        return self.select_own(StepInputs(mask, None, inputs.advantages, inputs.tokens),
                               step=step, **where), False  # fmt: skip

    def counts(self, mask: Tensor, selected: Tensor) -> StepCounts:
        """Per-row normaliser counts of `selected` on `mask` (`normaliser_counts`)."""
        return normaliser_counts(mask, selected, self.method.normalize_by, self.loss)

    def metrics(self, stats, mask: Tensor, selection: StepSelection, gather=None) -> dict:
        """The step's metrics (ict.methods.step_metrics). `gather`: [B, T] -> [sum B, max T]
        over every process (TRL), applied to the stats, mask and selections first."""
        if gather is not None:
            from ict.stats import STAT_FIELDS, TokenStats

            fields = {f: getattr(stats, f, None) for f in (*STAT_FIELDS, "kl")}
            stats = TokenStats(**{f: gather(v.float()) for f, v in fields.items() if v is not None})
            mask = gather(mask.long()).bool()
            selection = gathered(selection, gather)
        return step_metrics(stats, mask, selection)

    def step(
        self, stats, mask: Tensor, advantages: Tensor | None, tokens: Tensor | None, *,
        step: int, gather=None, **where,
    ) -> StepResult:  # fmt: skip
        """One rollout batch's step on its statistics (TokenStats [B, T]), valid `mask` (bool
        [B, T]), `advantages` ([B] or [B, T]) and `tokens` (long [B, T]): the selection, its
        per-row normaliser counts and the metrics. `gather`, `where`: see `metrics`, `select`."""
        mask = mask.bool()
        selection = self.select(StepInputs(mask, stats, advantages, tokens), step=step, **where)
        counts = self.counts(mask, selection.selected)
        return StepResult(selection, counts, self.metrics(stats, mask, selection, gather))


__all__ = [
    "SeedStreams",
    "StepCounts",
    "StepLayout",
    "StepPlan",
    "StepResult",
    "normaliser_counts",
    "one_forward_off",
]
