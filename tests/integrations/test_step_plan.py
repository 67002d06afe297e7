"""The engine-neutral step (ict.step.StepPlan, ict.step.StepRun): resolved once from the options,
an engine's layout and its loss rule, run by `begin` / `observe` / `finish`; what every engine's
adapter calls (docs/engines/CONTRACT.md)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from ict.integrations.cases import case_options, equivalence_cases, native_selection
from ict.loss import LossConfig, row_counts
from ict.methods import MethodOptions, get_method
from ict.stats import token_stats
from ict.step import StepInputs, StepLayout, StepPlan, one_forward_off, select_step, step_metrics

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
    """A run on the statistics (`begin` then `finish`) gives the native selection
    (ict.integrations.cases), the per-row counts whose sums are LossConfig.count's, and
    step_metrics' metrics."""
    o = case.options
    options = case_options(o)

    def loss(method):
        return LossConfig(loss_agg=method.loss_agg, normalize_by=method.normalize_by)

    plan = StepPlan.resolve(options, StepLayout(), seed=o["seed"], loss=loss)
    assert plan.loss == loss(plan.method)  # the loss rule, applied to the resolved method
    stats = case_stats(case)
    inputs = StepInputs(case.mask, stats, case.advantages, case.tokens)
    result = plan.begin(inputs, step=o["step"]).finish()
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


def test_row_counts_per_row():
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [0, 0, 0, 0]], dtype=torch.bool)
    selected = torch.tensor([[1, 0, 1, 1], [0, 0, 1, 0], [1, 0, 0, 0]], dtype=torch.bool)
    counts = row_counts(mask, selected, normalize_by="selected")
    assert counts.tokens.tolist() == [2, 0, 0] and counts.rows.tolist() == [1, 0, 0]
    assert counts.loss is None
    valid = row_counts(mask, selected, loss=LossConfig(loss_agg="token_mean", normalize_by="valid"))
    assert valid.tokens.tolist() == [3, 2, 0] and valid.loss.tolist() == [3, 2, 0]
    norm = row_counts(mask, selected, loss=LossConfig(loss_agg="seq_mean_token_sum_norm"))
    assert norm.loss.tolist() == [4, 4, 4]  # rows x T (no max_response_length)
    kl = row_counts(mask, selected, loss=LossConfig(loss_agg="token_mean", kl_on="valid"))
    assert kl.loss.tolist() == [2, 0, 0] and kl.kl_loss.tolist() == [3, 2, 0]  # D_K: valid
    parts = counts.split([2, 1])
    assert [p.tokens.tolist() for p in parts] == [[2, 0], [0]]


def test_with_method_re_derives_what_depends_on_the_method():
    """`with_method` gives the plan of another method: its loss from the loss rule, its
    single-forward decision and timing, its warning; the options, layout and seeds kept."""
    layout = StepLayout(total_batches=8, engine_off=None)

    def loss(method):
        return LossConfig(loss_agg=method.loss_agg, entropy_coef=method.entropy_coef)

    plan = StepPlan.resolve(MethodOptions(method="ict"), layout, seed=3, loss=loss)
    assert plan.one_forward and plan.selection_when == "per_micro_batch"
    entropy = get_method("entropy_bonus").resolved()
    other = plan.with_method(entropy)
    assert other.method is entropy and other.loss == loss(entropy) != plan.loss
    assert other.loss.entropy_coef == entropy.entropy_coef > 0
    assert other.selection_when == "up_front" and other.one_forward
    whole = plan.with_method(get_method("entropy").resolved())
    assert whole.selection_when == "whole_batch" and "whole batch" in whole.one_forward_off
    assert (other.seeds, other.layout, other.options) == (plan.seeds, plan.layout, plan.options)


@pytest.mark.parametrize("case", [c for c in CASES if c.options["method"] in ("ict", "grpo")][:2],
                         ids=lambda c: c.name)  # fmt: skip
def test_a_single_forward_run_is_the_two_pass_run(case):
    """The single forward (`begin` without statistics, `observe` per micro-batch of whole groups,
    `finish`) gives the selection, counts and metrics of the run on the whole batch's statistics;
    a selection other than the step's is caught by `finish`."""
    o = case.options
    layout = StepLayout(engine_off=None)
    plan = StepPlan.resolve(case_options(o), layout, seed=o["seed"])
    stats = case_stats(case)
    inputs = StepInputs(case.mask, stats, case.advantages, case.tokens)
    want = plan.begin(inputs, step=o["step"]).finish()

    def single(tamper=False):
        run = plan.begin(dataclasses.replace(inputs, stats=None), step=o["step"])
        group = int((case.group_ids == case.group_ids[0]).sum())
        for start in range(0, case.mask.size(0), group):
            rows = torch.arange(start, start + group)
            part = type(stats)(**{f: getattr(stats, f)[rows] for f in
                                  ("entropy", "renyi2", "logprob", "js")})  # fmt: skip
            run.observe(rows, slice(None), part)
        if tamper:  # the update trained on another selection of one token
            column = int(case.mask[0].nonzero()[0, 0])
            run.selected[0, column] = ~run.selected[0, column]
        return run

    run = single()
    got = run.finish()
    assert torch.equal(got.selection.selected, want.selection.selected)
    assert torch.equal(got.counts.tokens, want.counts.tokens)
    assert got.metrics.keys() == want.metrics.keys()
    with pytest.raises(RuntimeError, match="differs from the step's"):
        single(tamper=True).finish()


def test_the_refill_rounds_are_a_named_seed_stream():
    """Round 0 of a step's refill is its sampling seed (a step without refill draws as before);
    round r > 0 derives from it, apart from every other stream of the run."""
    from ict.seeds import derive_seed
    from ict.step import SeedStreams

    seeds = SeedStreams(7)
    assert seeds.refill(3, 0) == seeds.sampling(3)
    assert seeds.refill(3, 2) == derive_seed(seeds.sampling(3), 2)
    assert len({seeds.refill(3, r) for r in range(4)} | {seeds.selection(3), seeds.shuffle(3)}) == 6
