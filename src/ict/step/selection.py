"""One training step's token selection, the same on every engine (native, TRL, verl).

    selection = select_step(method, options, StepInputs(mask, stats, advantages, tokens),
                            step=step, seed=seed)
    selection.selected      # bool [B, T]: the tokens the update trains on
    selection.selections    # {method name: its own selection, "ict"/"entropy"/"stapo": diagnostics}
    selection.dense         # whether this step is in the dense warm-up
    step_metrics(stats, mask, selection)   # the logged metrics

The rules, each written once here:
- step: the 1-based index of the rollout batch (native: the training step; TRL: the generation
  batch; verl: `global_steps`). The dense warm-up counts rollout batches: dense while
  step <= dense_warmup_steps.
- warm-up cap (`run_warmup`): a method's own warm-up (the paper's Theta = 10) takes at most half
  of the run, so its selection is ever used; an explicit one is taken as given, with a warning when
  it covers the whole run.
- seed (`selection_seed`): ict.seeds.stream_seed(seed, "selection", step), the selection's own
  stream (not the rollouts' or the shuffle's numbers); each process then draws its own
  (ict.seeds.rank_seed), so no (seed, rank) shares another's draws.
- diagnostics: the paper's ICT, 20-Entropy and STAPO selections on the same batch (the ones the
  batch's statistics can compute), each with its own method's settings.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from ict.methods.options import selector_kwargs
from ict.methods.registry import get_method
from ict.seeds import stream_seed
from ict.select import jaccard, select_tokens
from ict.select.core import selector_facts
from ict.stats import STAT_FIELDS
from ict.training_metrics import regime_metrics, token_metrics

DIAGNOSTIC_METHODS = ("ict", "entropy", "stapo")
# references computed from one row or one group (ict.stats): a micro-batch of whole groups has them
LOCAL_REFERENCES = ("group_position", "group_mean", "sequence_mean", "previous_token")


def selection_seed(seed: int, step: int) -> int:
    """The seed of step `step`'s selection (the random control's draws) for run seed `seed`."""
    return stream_seed(seed, "selection", step)


def selection_in_forward(method, granularity: str) -> tuple[str, str]:
    """When a step's selection can be made if its statistics come from the update's own forward
    (on-policy, one forward per row: ict.step.run.StepRun on every engine):
    ("up_front", "") when it reads no statistics (every, uniform); ("per_micro_batch", "") when
    it is one per-row top-k of a row-local score (the selector fact `row_local`, scope "sequence",
    granularity "position", a `LOCAL_REFERENCES` reference): each micro-batch of whole groups
    selects its own rows before its loss, as the whole batch would, its normaliser counted by
    ict.select.topk.count_rule_mask; ("whole_batch", why) otherwise: every statistic first."""

    facts = selector_facts(method.selector)
    if not any(n in STAT_FIELDS for n in facts["needs"]):  # reads no statistic
        return "up_front", ""
    if (
        facts["row_local"]
        and method.scope == "sequence"
        and granularity == "position"
        and method.reference in LOCAL_REFERENCES
    ):
        return "per_micro_batch", ""
    return "whole_batch", (
        f"the selection of method={method.name!r} (selector {method.selector!r}, scope "
        f"{method.scope!r}, granularity {granularity!r}, reference {method.reference!r}) needs "
        "the statistics of the whole batch"
    )


def is_dense(method, step: int) -> bool:
    """Whether rollout batch `step` (1-based) updates every valid token (the warm-up)."""
    return int(step) <= int(method.dense_warmup_steps or 0)


def run_warmup(method, total_batches: int | None, *, explicit: bool):
    """`method` with its warm-up fitted to a run of `total_batches` rollout batches: a method's
    own warm-up (explicit=False) is capped at half the run, an explicit one is kept as given.
    total_batches None (not known yet): unchanged. See `warmup_warning` for the whole-run case."""
    import dataclasses

    warmup = int(method.dense_warmup_steps or 0)
    if total_batches is None or explicit or warmup <= total_batches // 2:
        return method
    return dataclasses.replace(method, dense_warmup_steps=total_batches // 2)


def warmup_warning(method, total_batches: int | None) -> str | None:
    """A one-line warning when the warm-up covers the whole run (the method's selection is never
    used), else None. Engines log it once, when the run's length is known."""
    warmup = int(method.dense_warmup_steps or 0)
    if total_batches is None or warmup == 0 or warmup < total_batches:
        return None
    return (
        f"dense_warmup_steps={warmup} covers the whole run of {total_batches} rollout batches: "
        f"method {method.name!r} runs as plain GRPO (every valid token); lower "
        "dense_warmup_steps to see its selection"
    )


@dataclass(frozen=True)
class StepInputs:
    """What a step's selection reads. All [B, T] except advantages ([B] or [B, T]).

    mask: bool, valid response tokens; stats: TokenStats (entropy, renyi2, logprob, js, kl);
    tokens: long token ids (granularity token_id) or None."""

    mask: Tensor
    stats: object
    advantages: Tensor | None
    tokens: Tensor | None = None


@dataclass(frozen=True)
class StepSelection:
    """A step's selection: `selected` (bool [B, T], what the update trains on: every valid token
    while `dense`), `selections` (name -> bool [B, T]: the method's own under its name, and the
    diagnostics) and `method` (the resolved Method that ran)."""

    selected: Tensor
    selections: dict
    dense: bool
    method: object

    @property
    def own(self) -> Tensor:
        """The method's own selection (also during the warm-up)."""
        return self.selections[self.method.name]


def select_method(method, options, inputs: StepInputs, *, seed: int, **where) -> Tensor:
    """bool [B, T]: the tokens the resolved `method` keeps on `inputs` (no warm-up).

    options: the run's MethodOptions (granularity, selector options). `where`: how the engine's
    batch is laid out for the scopes: micro_batch_size / micro_batch_ids (scope micro_batch),
    process_group (scope global across ranks)."""

    facts = selector_facts(method.selector)
    scope = method.scope
    if (
        scope == "micro_batch"
        and not where.get("micro_batch_size")
        and where.get("micro_batch_ids") is None
    ):
        scope = "global"  # one micro-batch: the whole batch
    return select_tokens(
        method.selector, inputs.mask, stats=inputs.stats, advantages=inputs.advantages,
        tokens=inputs.tokens, ratio=method.ratio if facts["takes_ratio"] else None,
        scope=scope, granularity=options.granularity, seed=seed,
        **where, **selector_kwargs(options, method.selector),
    ).bool() & inputs.mask.bool()  # fmt: skip


def _computable(method, stats) -> bool:
    needs = method.needs()
    return all(getattr(stats, n, None) is not None for n in ("kl", "js") if n in needs)


def select_step(method, options, inputs: StepInputs, *, step: int, seed: int, **where):
    """Step `step`'s selection for the resolved `method` (its warm-up already fitted to the run,
    `run_warmup`): the method's own selection, the diagnostics, and the update's tokens.

    seed: the run's seed (`selection_seed` derives the step's). `where`: see `select_method`.
    Diagnostic methods other than the run's own use their method's settings on the same stats
    (the diagnostic ICT scores with the run's reference: the statistics hold one JS)."""

    step_seed = selection_seed(seed, step)
    own = select_method(method, options, inputs, seed=step_seed, **where)
    selections = {}
    for name in DIAGNOSTIC_METHODS:
        if name == method.name:
            continue
        diag = get_method(name).resolved()
        if _computable(diag, inputs.stats):
            selections[name] = select_method(diag, options, inputs, seed=step_seed, **where)
    selections[method.name] = own
    dense = is_dense(method, step)
    selected = inputs.mask.bool().clone() if dense else own
    return StepSelection(selected=selected, selections=selections, dense=dense, method=method)


def step_metrics(stats, mask: Tensor, selection: StepSelection) -> dict[str, float]:
    """The step's selection metrics, the same keys on every engine: ict.training_metrics.token_metrics
    (valid / selected means, by_selector/<name>/...), the paper's regime diagnostics of the
    method's own picks, the ICT vs 20-Entropy Jaccard and `dense_warmup` (0/1).

    stats, mask and the selections must cover the same rows (TRL gathers every rank's first)."""

    mask = mask.bool()
    out = token_metrics(stats, mask, selection.selected, selection.selections)
    out.update(regime_metrics(stats, selection.own, mask))
    if "ict" in selection.selections and "entropy" in selection.selections:
        out["overlap/ict_entropy_jaccard"] = jaccard(
            selection.selections["ict"], selection.selections["entropy"]
        )
    out["dense_warmup"] = float(selection.dense)
    return out


def gathered(selection: StepSelection, gather) -> StepSelection:
    """The selection with every mask passed through `gather` ([B, T] -> [sum B, max T]), for
    metrics over every rank's rows."""
    return StepSelection(
        selected=gather(selection.selected.long()).bool(),
        selections={k: gather(v.long()).bool() for k, v in selection.selections.items()},
        dense=selection.dense,
        method=selection.method,
    )


__all__ = [
    "DIAGNOSTIC_METHODS",
    "LOCAL_REFERENCES",
    "StepInputs",
    "StepSelection",
    "gathered",
    "is_dense",
    "run_warmup",
    "select_method",
    "select_step",
    "selection_in_forward",
    "selection_seed",
    "step_metrics",
    "warmup_warning",
]
