"""One forward per row when on-policy (ict.train.stats_in_update): the step that takes its token
statistics from the update's own forward computes what the step with a separate old-policy pass
computes (statistics, selection, loss metrics, gradient: float32 tolerance), runs every token
through the model once instead of twice, and says why when a run cannot use it."""

from __future__ import annotations

import pytest
import torch

from ict.testing import TokenCounter
from ict.train.old_policy import old_policy_pass
from ict.train.step import PolicyContext, TrainingStep
from tests.train.update_helpers import REWARDS, GradRecorder, NoScheduler, config_for

# times; the tokens the update's forward ran (`update/tokens`: it sees every column now, for the
# statistics); and the loss call's own |M| / |valid| over the columns it saw: the separate pass's update
# stops at the last loss column (UpdateSwitches.stop_at_last), the one-forward update sees every
# column, so that fraction counts different valid tokens (the step's `selected_fraction`, over
# every valid token, is compared)
NOT_COMPARED = ("time/", "throughput/", "update/tokens", "loss/selected_fraction")


def run_step(model, rollout, plan, *, step=1):
    """One TrainingStep.train_on_rollout on a copy of `model`: (metrics, scored, recorded gradients, tokens)."""
    import copy

    model = copy.deepcopy(model)
    policy = PolicyContext.of(plan, model, copy.deepcopy(model) if plan.config.kl_coef else None)
    recorder = GradRecorder(model.parameters())
    counter = TokenCounter(model)
    metrics, scored = TrainingStep(plan, policy, recorder, NoScheduler()).train_on_rollout(
        rollout, torch.tensor(REWARDS), step=step
    )
    counter.close()
    return metrics, scored, recorder.grads, counter.tokens


CASES = {
    "grpo": dict(method="grpo"),
    "ict": dict(method="ict", dense_warmup_steps=0),
    "ict_in_its_warmup": dict(method="ict", dense_warmup_steps=3),
    "ict_kl": dict(method="ict_kl", dense_warmup_steps=0),
    "ict_bottom_token_mean": dict(method="ict_bottom", dense_warmup_steps=0, loss_agg="token_mean"),
    "random_sequence": dict(method="random_sequence", dense_warmup_steps=0),
    "random_global": dict(method="random"),
    "kl_cov": dict(method="kl_cov"),
    "entropy_bonus": dict(method="entropy_bonus"),
    "grpo_kl_valid": dict(method="grpo", kl_coef=0.1, kl_on="valid"),
    "ict_kl_selected": dict(method="ict", dense_warmup_steps=0, kl_coef=0.1),
}


def registry_cases():
    """Every registered method past its warm-up, and whether it runs in one forward."""
    from ict.methods import METHODS

    return sorted(METHODS)


@pytest.mark.parametrize("method", registry_cases())
def test_every_registered_method_runs_one_forward_or_says_why(batch, method):
    """A method whose selection the update can compute runs in one forward and matches the
    separate pass; the others (selections over the whole batch's statistics) name the reason."""
    plan = config_for(method=method, dense_warmup_steps=0)
    reads_stats = any(n not in ("advantages", "tokens") for n in plan.method.needs())
    if reads_stats and (plan.method.scope != "sequence" or plan.method.reference == "batch_mean"):
        assert not plan.one_forward
        assert "needs the statistics of the whole batch" in plan.one_forward_off
        return
    assert plan.one_forward, plan.one_forward_off
    if plan.method.advantage == "passk":  # G = k = 4: a group is its only 4-subset, so A = 0
        return  # (tests/loss/test_passk.py; the equivalence suite runs passk with k = 2)
    assert_same_step(batch, dict(method=method, dense_warmup_steps=0))


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_forward_step_equals_the_separate_pass(batch, name):
    assert_same_step(batch, CASES[name])


def assert_same_step(batch, changes):
    model, rollout, _ = batch
    on, off = (config_for(**changes, one_forward=flag) for flag in (True, False))
    assert on.one_forward and on.one_forward_off is None
    assert not off.one_forward and off.one_forward_off == "one_forward is off"
    m_on, s_on, g_on, _ = run_step(model, rollout, on)
    m_off, s_off, g_off, _ = run_step(model, rollout, off)

    assert torch.equal(s_on.selection.selected, s_off.selection.selected)
    assert s_on.selection.selections.keys() == s_off.selection.selections.keys()
    for key, picked in s_on.selection.selections.items():
        assert torch.equal(picked, s_off.selection.selections[key]), key
    for field in ("entropy", "renyi2", "logprob", "js", "kl"):
        a, b = getattr(s_on.stats, field), getattr(s_off.stats, field)
        assert (a is None) == (b is None), field
        if a is not None:
            torch.testing.assert_close(a, b, atol=2e-5, rtol=1e-5)
    assert s_on.old_logprob is None and s_off.old_logprob is not None

    assert len(g_on) == len(g_off) == 1
    assert g_off[0].abs().sum() > 0
    torch.testing.assert_close(g_on[0], g_off[0], atol=1e-6, rtol=1e-4)
    compared = {k for k in m_off if not k.startswith(NOT_COMPARED)}
    assert compared <= set(m_on)
    for key in compared:
        a, b = m_on[key], m_off[key]
        if isinstance(b, float) and b != b:
            assert a != a, key
        elif isinstance(b, (int, float)):
            assert a == pytest.approx(b, rel=1e-4, abs=1e-6), key
        else:
            assert a == b, key


def test_each_token_runs_through_the_model_once(batch):
    """The one-forward step's model passes cover exactly the tokens of the separate statistics
    pass alone: the update adds no forward of its own (the old path runs both)."""
    model, rollout, _ = batch
    for case in ("ict", "grpo"):
        plan = config_for(**CASES[case])
        counter = TokenCounter(model)
        old_policy_pass(PolicyContext.of(plan, model), rollout, plan)
        counter.close()
        stats_pass = counter.tokens
        _, _, _, one = run_step(model, rollout, plan)
        _, _, _, two = run_step(model, rollout, config_for(**CASES[case], one_forward=False))
        assert one == stats_pass, case
        assert two > one, case


@pytest.mark.parametrize(
    "changes,why",
    [
        (dict(num_epochs=2), "not on-policy"),
        (dict(mini_batch_size=8), "not on-policy"),
        (dict(disable_dropout=False), "dropout is on"),
        (dict(method="entropy"), "needs the statistics of the whole batch"),
        (dict(method="stapo"), "needs the statistics of the whole batch"),
        (dict(method="ict_batch_mean"), "needs the statistics of the whole batch"),
        (dict(method="ict", granularity="token_id"), "granularity 'token_id'"),
        (dict(method="ict", scope="global"), "scope 'global'"),
        (dict(method="ict", share_prompt=False), "share_prompt is off"),
    ],
)
def test_runs_that_keep_the_separate_pass_say_why(batch, changes, why):
    plan = config_for(**changes)
    assert not plan.one_forward and why in plan.one_forward_off
    model, rollout, _ = batch
    metrics, scored, grads, _ = run_step(model, rollout, plan)  # the separate pass still runs
    assert scored.old_logprob is not None and len(grads) >= 1


def test_selections_that_ignore_the_statistics_keep_one_forward_without_shared_prompts(batch):
    plan = config_for(method="grpo", share_prompt=False)
    assert plan.one_forward
    model, rollout, _ = batch
    _, scored, grads, _ = run_step(model, rollout, plan)
    assert scored.old_logprob is None and grads[0].abs().sum() > 0


def test_row_local_is_a_selector_fact_the_single_forward_reads():
    """A selector registered `row_local=True` (its score at (b, t) reads row b and its group
    only) is selected per micro-batch in the single forward; the same function registered
    without it needs the whole batch's statistics; a composition is never row-local."""
    from ict.methods import Method
    from ict.select import SELECTORS, register_selector
    from ict.select.core import selector_facts
    from ict.step import selection_in_forward

    assert [n for n, s in sorted(SELECTORS.items()) if s.row_local] == [
        "entropy_top", "js_bottom", "js_next_top", "js_top", "kl_top",
    ]  # fmt: skip
    assert not selector_facts("js_top+not_spurious")["row_local"]

    def score(ctx):
        return ctx.require_stats("t", "logprob").logprob

    try:
        for local in (True, False):
            register_selector("row_local_test", default_ratio=0.5, needs=("logprob",),
                              row_local=local)(score)  # fmt: skip
            method = Method("m", "row_local_test", scope="sequence", reference="group_position")
            when, why = selection_in_forward(method.resolved(), "position")
            assert when == ("per_micro_batch" if local else "whole_batch"), why
    finally:
        SELECTORS.pop("row_local_test", None)
