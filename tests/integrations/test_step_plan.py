"""The engine-neutral step (ict.methods.StepPlan): resolved once from the options and an engine's
layout, executed by one call; what every engine's adapter calls (docs/engines/CONTRACT.md)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from ict.integrations.cases import case_options, equivalence_cases, native_selection
from ict.loss import LossConfig
from ict.methods import (
    MethodOptions,
    StepInputs,
    StepLayout,
    StepPlan,
    get_method,
    normaliser_counts,
    one_forward_off,
    select_step,
    step_metrics,
)
from ict.stats import token_stats

CASES = equivalence_cases()


def case_stats(case):
    method = StepPlan.resolve(case_options(case.options), StepLayout(), seed=0).method
    return token_stats(
        case.hidden @ case.lm_head_weight.T, case.tokens, case.mask,
        temperature=case.options["temperature"], reference=method.reference,
        group_ids=case.group_ids, divergence="kl" if "kl" in method.needs() else "js",
    )  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_plans_step_is_the_native_step(case):
    """`StepPlan.step` on a case gives the native selection (ict.integrations.cases), the
    per-row counts whose sums are LossConfig.count's, and step_metrics' metrics."""
    o = case.options
    options = case_options(o)
    method = StepPlan.resolve(options, StepLayout(), seed=o["seed"]).method
    loss = LossConfig(loss_agg=method.loss_agg, normalize_by=method.normalize_by)
    plan = StepPlan.resolve(options, StepLayout(), seed=o["seed"], loss=loss)
    stats = case_stats(case)
    result = plan.step(stats, case.mask, case.advantages, case.tokens, step=o["step"])
    assert torch.equal(result.selection.selected, native_selection(case))
    selected = result.selection.selected
    assert float(result.counts.loss.sum()) == plan.loss.count(case.mask, selected)
    for rows in (slice(0, 3), slice(3, None)):  # any rows' counts: the count of those rows
        part = result.counts.take(torch.arange(case.mask.size(0))[rows])
        assert float(part.loss.sum()) == plan.loss.count(case.mask[rows], selected[rows])
    want = step_metrics(stats, case.mask, select_step(
        plan.method, options, StepInputs(case.mask, stats, case.advantages, case.tokens),
        step=o["step"], seed=o["seed"]))  # fmt: skip
    assert result.metrics.keys() == want.keys()
    assert all(result.metrics[k] == want[k] or want[k] != want[k] for k in want)


def test_resolve_fits_the_warmup_once_and_says_when_an_explicit_one_covers_the_run():
    own = StepPlan.resolve(MethodOptions(method="ict"), StepLayout(total_batches=8), seed=0)
    assert own.method.dense_warmup_steps == 4 and not own.explicit_warmup and own.warning is None
    assert [own.is_dense(s) for s in (4, 5)] == [True, False]
    unknown = StepPlan.resolve(MethodOptions(method="ict"), StepLayout(), seed=0)
    assert unknown.method.dense_warmup_steps == 10  # the run's length unknown: as resolved
    explicit = MethodOptions(method="ict", dense_warmup_steps=8)
    plan = StepPlan.resolve(explicit, StepLayout(total_batches=8), seed=0)
    assert plan.explicit_warmup and plan.method.dense_warmup_steps == 8
    assert "covers the whole run" in plan.warning
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.method = own.method  # resolved once


def test_the_single_forward_decision_reads_the_engine_first_then_the_method_then_the_split():
    ict = get_method("ict").resolved()
    on = StepLayout(engine_off=None)
    assert one_forward_off(ict, "position", on) is None
    assert one_forward_off(ict, "position", StepLayout(engine_off="off")) == "off"
    entropy = get_method("entropy").resolved()
    assert "whole batch" in one_forward_off(entropy, "position", on)
    split = dataclasses.replace(on, split_off="split")
    assert one_forward_off(ict, "position", split) == "split"  # per micro-batch: whole groups
    grpo = get_method("grpo").resolved()
    assert one_forward_off(grpo, "position", split) is None  # up front: the split is no matter
    per_micro = dataclasses.replace(split, stats_per_micro_batch=True)
    assert one_forward_off(grpo, "position", per_micro) == "split"  # ... unless stats are
    batch_mean = dataclasses.replace(ict, reference="batch_mean", scope="global")
    assert "whole batch" in one_forward_off(batch_mean, "position", on)
    assert "spans the rollout batch" in one_forward_off(
        dataclasses.replace(grpo, reference="batch_mean"), "position", per_micro
    )


def test_before_statistics_gives_the_selection_or_each_rows_count():
    mask = torch.arange(9)[None, :] < torch.tensor([[9], [4], [1], [0]])
    inputs = StepInputs(mask, None, torch.ones(4), None)
    layout = StepLayout(total_batches=100, engine_off=None)
    ict = StepPlan.resolve(MethodOptions(method="ict"), layout, seed=0)
    first, deferred = ict.before_statistics(inputs, step=1)  # the warm-up: every valid token
    assert not deferred and torch.equal(first, mask)
    counted, deferred = ict.before_statistics(inputs, step=11)
    assert deferred and counted.sum(1).tolist() == [1, 1, 1, 0]  # ceil(0.1 n), one at least
    random = StepPlan.resolve(MethodOptions(method="random_sequence"), layout, seed=0)
    picked, deferred = random.before_statistics(inputs, step=11)
    assert not deferred and torch.equal(picked, random.select_own(inputs, step=11))
    assert counted.sum(1).tolist() == picked.sum(1).tolist()


def test_normaliser_counts_per_row():
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [0, 0, 0, 0]], dtype=torch.bool)
    selected = torch.tensor([[1, 0, 1, 1], [0, 0, 1, 0], [1, 0, 0, 0]], dtype=torch.bool)
    counts = normaliser_counts(mask, selected, "selected")
    assert counts.tokens.tolist() == [2, 0, 0] and counts.rows.tolist() == [1, 0, 0]
    assert counts.loss is None
    valid = normaliser_counts(mask, selected, "valid", LossConfig(loss_agg="token_mean"))
    assert valid.tokens.tolist() == [3, 2, 0] and valid.loss.tolist() == [3, 2, 0]
    norm = normaliser_counts(mask, selected, "selected",
                             LossConfig(loss_agg="seq_mean_token_sum_norm"))  # fmt: skip
    assert norm.loss.tolist() == [4, 4, 4]  # rows x T (no max_response_length)
    parts = counts.split([2, 1])
    assert [p.tokens.tolist() for p in parts] == [[2, 0], [0]]
