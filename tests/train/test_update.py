"""The update's savings change nothing: skipping zero-advantage rows, the LM head on the loss
positions only and stopping at the last loss column give the plain update's gradient."""

import itertools

import pytest
import torch

from ict.loss import LossConfig
from ict.step import StepInputs, select_method
from ict.train.old_policy import old_policy_pass
from ict.train.step import PolicyContext
from ict.train.update import (
    UpdateBatch,
    UpdateSwitches,
    contributing_rows,
    loss_positions,
    update_policy,
)
from tests.train.update_helpers import GradRecorder, NoScheduler, config_for


def gradients(model, rollout, advantages, plan, selected, **switches):
    policy = PolicyContext.of(plan, model, model if plan.config.kl_coef else None)
    stats, old_logprob, ref_logprob = old_policy_pass(policy, rollout, plan)
    recorder = GradRecorder(model.parameters())
    metrics = update_policy(
        plan,
        policy,
        recorder,
        NoScheduler(),
        UpdateBatch(rollout, old_logprob, advantages, selected, ref_logprob),
        step=1,
        switches=UpdateSwitches(**switches),
    )
    return recorder.grads, metrics


def selection(model, rollout, advantages, plan):
    stats, _, _ = old_policy_pass(PolicyContext.of(plan, model, model), rollout, plan)
    mask = rollout.response_mask.bool()
    inputs = StepInputs(mask, stats, advantages, rollout.input_ids)
    return select_method(plan.method, plan.config, inputs, seed=0, micro_batch_size=8)


PLAIN = dict(skip_rows=False, head_on_loss_only=False, stop_at_last=False)


@pytest.mark.parametrize(
    "loss_agg,normalize_by,share_prompt",
    [
        (agg, norm, share)
        for agg, norm in itertools.product(
            ("token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"), ("selected", "valid")
        )
        for share in (True, False)
    ],
)
def test_savings_give_the_plain_gradient(batch, loss_agg, normalize_by, share_prompt):
    model, rollout, advantages = batch
    # global top 10%: many rows have no selected token; sequence scope would keep one per row
    plan = config_for(
        method="ict",
        scope="global",
        loss_agg=loss_agg,
        normalize_by=normalize_by,
        share_prompt=share_prompt,
        dense_warmup_steps=0,
    )
    selected = selection(model, rollout, advantages, plan)
    plain, _ = gradients(model, rollout, advantages, plan, selected, **PLAIN)
    fast, metrics = gradients(model, rollout, advantages, plan, selected)
    assert len(plain) == len(fast) == 1
    assert plain[0].abs().max() > 0
    torch.testing.assert_close(fast[0], plain[0], atol=1e-6, rtol=1e-4)
    assert metrics["update/rows_run"] < metrics["update/rows"]  # something was skipped
    for switch in ("skip_rows", "head_on_loss_only", "stop_at_last"):  # each one alone
        one = dict(PLAIN, **{switch: True})
        alone, _ = gradients(model, rollout, advantages, plan, selected, **one)
        torch.testing.assert_close(alone[0], plain[0], atol=1e-6, rtol=1e-4)


def test_kl_over_valid_tokens_runs_every_row_and_matches(batch):
    model, rollout, advantages = batch
    plan = config_for(
        method="ict", kl_coef=0.1, kl_on="valid", normalize_by="valid", dense_warmup_steps=0
    )
    selected = selection(model, rollout, advantages, plan)
    plain, _ = gradients(model, rollout, advantages, plan, selected, **PLAIN)
    fast, metrics = gradients(model, rollout, advantages, plan, selected)
    torch.testing.assert_close(fast[0], plain[0], atol=1e-6, rtol=1e-4)
    assert metrics["update/rows_run"] == metrics["update/rows"]  # KL reads zero-advantage rows


def test_all_rows_skipped_still_steps_with_zero_gradient(batch):
    model, rollout, _ = batch
    plan = config_for(method="grpo")
    zero = torch.zeros(rollout.input_ids.shape[0])
    grads, metrics = gradients(model, rollout, zero, plan, rollout.response_mask.bool())
    assert metrics["update/rows_run"] == 0 and len(grads) == 1 and grads[0].abs().max() == 0


def test_contributing_rows_and_loss_positions():
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 0, 0], [1, 1, 0]], dtype=torch.bool)
    selected = torch.tensor([[0, 1, 0], [0, 0, 0], [1, 0, 0], [1, 1, 0]], dtype=torch.bool)
    adv = torch.tensor([0.5, 1.0, 0.0, -1.0])
    plain = LossConfig()
    positions = loss_positions(mask, selected, plain)
    assert torch.equal(positions, mask & selected)
    rows = torch.arange(4)
    # row 1 has no selected token, row 2 a zero advantage
    assert contributing_rows(rows, adv, positions, plain, group=1).tolist() == [0, 3]
    # whole groups of 2: (0, 1) keeps row 0, (2, 3) keeps row 3
    assert contributing_rows(rows, adv, positions, plain, group=2).tolist() == [0, 1, 2, 3]
    kl_valid = LossConfig(kl_coef=0.1, kl_on="valid", normalize_by="valid")
    assert torch.equal(loss_positions(mask, selected, kl_valid), mask)
    assert contributing_rows(rows, adv, mask, kl_valid, group=1).tolist() == [0, 1, 2, 3]


def test_step_metrics_count_every_loss_call_and_the_weight_change(batch):
    """The loss mode's `loss_mode/*` keys sum over every loss call of the step (2 mini-batches x
    2 micro-batches here: 4 KL-Cov calls, each changing max(1, int(0.1 |M|)) tokens), the rate is
    changed / |M| over the step; `update/param_change_rel` is ||theta_after - theta_before|| /
    ||theta_before|| over the step's two AdamW updates, checked against a copy taken by hand."""
    import copy

    from ict.loss.modes import mode_count

    model, rollout, advantages = batch
    model = copy.deepcopy(model)
    plan = config_for(method="kl_cov", kl_cov_ratio=0.1, mini_batch_size=8)
    policy = PolicyContext.of(plan, model)
    _, old_logprob, _ = old_policy_pass(policy, rollout, plan)
    mask = rollout.response_mask.bool()
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    metrics = update_policy(
        plan, policy, optimizer, NoScheduler(),
        UpdateBatch(rollout, old_logprob, advantages, mask.clone()), step=1,
    )  # fmt: skip
    assert metrics["update/updates"] == 2
    # the 4 calls: mini-batches of 8 rows in the step's shuffled order, micro-batches of 4
    generator = torch.Generator().manual_seed(plan.seeds.shuffle(1))
    units = torch.arange(16).view(-1, 4)[torch.randperm(4, generator=generator)]
    calls = [chunk.flatten() for chunk in units.split(2)]
    want = sum(mode_count(0.1, int(mask[rows].sum())) for c in calls for rows in c.split(4))
    assert metrics["loss_mode/changed_tokens"] == want >= 4
    assert metrics["loss_mode/changed_rate"] == pytest.approx(want / int(mask.sum()))
    assert metrics["loss_mode/nominal_rate"] == 0.1
    after = list(model.parameters())
    num = sum(
        float((a.detach() - b).double().square().sum()) for a, b in zip(after, before, strict=True)
    )
    den = sum(float(b.double().square().sum()) for b in before)
    assert metrics["update/param_change_rel"] == pytest.approx((num / den) ** 0.5, rel=1e-9)
    assert metrics["update/param_change_rel"] > 0
    vanilla = update_policy(
        config_for(), policy, optimizer, NoScheduler(),
        UpdateBatch(rollout, old_logprob, advantages, mask.clone()), step=1,
    )  # fmt: skip
    assert not any(k.startswith("loss_mode/") for k in vanilla)  # none for the vanilla loss


@pytest.mark.parametrize("share_prompt", [True, False])
def test_the_first_update_is_bit_exactly_on_policy(batch, share_prompt):
    """Before the step's first optimizer step the weights are the old policy's: the update pass
    (its own row subsets, column span, LM head on the loss positions, shared-prompt forward)
    gives bit-identical log-probabilities to the old-policy pass, so the first mini-batch's
    importance ratio is exactly 1 (max |log rho| = 0) and KL-Cov's |log rho| penalty has no
    gradient there (METHOD.md, "Clip-Cov and KL-Cov"): by construction (the update's own
    log-probs, detached, are the first update's old ones), also where the two passes round
    differently (without the shared-prompt forward, 4.8e-7 on this batch). The second update
    uses the old-policy pass's log-probs."""
    import ict.train.update as update

    model, rollout, advantages = batch
    plan = config_for(method="kl_cov", kl_cov_ratio=0.2, share_prompt=share_prompt,
                      mini_batch_size=8)  # fmt: skip
    policy = PolicyContext.of(plan, model)
    _, old_logprob, _ = old_policy_pass(policy, rollout, plan)
    mask = rollout.response_mask.bool()
    seen = []

    def recording(logprob, old, *args, **kwargs):
        out = policy_loss(logprob, old, *args, **kwargs)
        seen.append((logprob.detach() - old)[args[1].bool()])
        return out

    from ict.loss import policy_loss

    recorder = GradRecorder(model.parameters())  # changes no weight
    original, update.policy_loss = update.policy_loss, recording
    try:
        update_policy(
            plan, policy, recorder, NoScheduler(),
            UpdateBatch(rollout, old_logprob, advantages, mask.clone()), step=1,
        )  # fmt: skip
    finally:
        update.policy_loss = original
    # 2 updates (mini-batches of 8 rows), micro-batches of 4 rows: the first two calls are the
    # first update's; KL-Cov reads every row, so all 16 rows ran
    assert len(seen) == 4 and sum(x.numel() for x in seen) == int(mask.sum())
    first = torch.cat(seen[:2])
    assert float(first.abs().max()) == 0.0
    second = torch.cat(seen[2:])  # the stored old log-probs (the weights did not move here)
    assert float(second.abs().max()) < 1e-5
