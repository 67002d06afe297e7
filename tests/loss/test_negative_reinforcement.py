"""PSR, NSR and W-REINFORCE (arXiv 2506.01347): advantages, selection and loss by hand, their
defaults, and equality with the authors' functions on random inputs.

The reference numbers in fixtures/negative_reinforcement_reference.json were computed at
development time from TianHongZXY/RLVR-Decomposed (commit in the file's `provenance`), running
their `compute_psr_nsr_outcome_advantage` and `compute_policy_loss` as is, with their trainer's
row subset for PSR / NSR and their actor's entropy term; their code is not in this repository.
"""

import json
from pathlib import Path

import pytest
import torch

from ict.errors import DataError
from ict.loss import W_REINFORCE_LAMBDA, LossConfig, compute_advantages, policy_loss
from ict.methods import METHODS, get_method
from ict.select import select_tokens

FIXTURE = Path(__file__).parent / "fixtures" / "negative_reinforcement_reference.json"
REWARDS = torch.tensor([1.0, 0, 1, 1, 0, 0, 1, 0])
GROUPS = torch.tensor([5, 5, 5, 5, 2, 2, 9, 9])  # group 2 has zero variance: no baseline, no zero


@pytest.mark.parametrize(
    "mode, expected",
    [
        ("w_reinforce", [0.1, -1, 0.1, 0.1, -1, -1, 0.1, -1]),
        ("nsr", [0, -1, 0, 0, -1, -1, 0, -1]),
        ("psr", [1, 0, 1, 1, 0, 0, 1, 0]),
    ],
)
def test_advantages_by_hand(mode, expected):
    adv, _ = compute_advantages(REWARDS, GROUPS, mode=mode)
    assert adv.tolist() == pytest.approx(expected)


@pytest.mark.parametrize("mode", ["w_reinforce", "nsr", "psr"])
def test_non_binary_rewards_refused_in_one_line(mode):
    with pytest.raises(DataError, match=rf"advantage '{mode}' needs 0/1 rewards.*got 0\.5"):
        compute_advantages(torch.tensor([1.0, 0.5]), torch.tensor([0, 0]), mode=mode)


def test_defaults_are_the_cited_ones():
    """lambda 0.1 (their README), clip 0.2 / 0.2 and entropy_coeff 0.001 (their ppo_trainer.yaml,
    kept by run_*_psr_nsr.sh), token mean over the rows trained on, no KL."""
    assert W_REINFORCE_LAMBDA == 0.1
    for name, selector in (("w_reinforce", "every"), ("nsr", "nonzero_advantage"),
                           ("psr", "nonzero_advantage")):  # fmt: skip
        m = METHODS[name].resolved()
        assert (m.selector, m.advantage, m.eps_low, m.eps_high, m.entropy_coef) == (
            selector,
            name,
            0.2,
            0.2,
            0.001,
        )
        assert (m.loss_agg, m.normalize_by, m.dense_warmup_steps) == ("token_mean", "selected", 0)
    assert get_method("grpo").resolved().advantage == "grpo"


def _method_loss(name, logprob, old, mask, rewards, entropy=None):
    method = METHODS[name].resolved()
    adv, _ = compute_advantages(rewards, torch.arange(rewards.numel()) // 2, mode=method.advantage)
    selected = select_tokens(method.selector, mask, advantages=adv)
    config = LossConfig.from_config(method, entropy_coef=0.0 if entropy is None else 0.001)
    loss, _ = policy_loss(logprob, old, adv, mask, selected, config, entropy=entropy)
    return loss, selected


def test_loss_and_gradient_by_hand():
    """Row 0 correct (2 tokens), row 1 incorrect (1 token), ratio 1 except row 0's second token
    (ratio e^0.5 > 1.2: clipped for A > 0, no gradient)."""
    mask = torch.tensor([[True, True], [True, False]])
    old = torch.tensor([[-1.0, -2.0], [-1.5, 0.0]])
    rewards = torch.tensor([1.0, 0.0])
    # W-REINFORCE: A = (0.1, -1); token mean over 3 tokens: -(0.1 + 0.1 * 1.2 - 1) / 3
    logprob = (old + torch.tensor([[0.0, 0.5], [0.0, 0.0]])).requires_grad_(True)
    loss, selected = _method_loss("w_reinforce", logprob, old, mask, rewards)
    assert selected.tolist() == mask.tolist()
    assert loss.item() == pytest.approx(-(0.1 + 0.12 - 1) / 3, rel=1e-6)
    loss.backward()
    torch.testing.assert_close(logprob.grad, torch.tensor([[-0.1 / 3, 0.0], [1 / 3, 0.0]]))
    # NSR: only row 1 (A = -1) is trained on, normalised by its 1 token
    logprob = old.clone().requires_grad_(True)
    loss, selected = _method_loss("nsr", logprob, old, mask, rewards)
    assert selected.tolist() == [[False, False], [True, False]]
    assert loss.item() == pytest.approx(1.0)
    loss.backward()
    torch.testing.assert_close(logprob.grad, torch.tensor([[0.0, 0.0], [1.0, 0.0]]))
    # PSR: only row 0 (A = 1), over its 2 tokens: -(1 + 1) / 2
    logprob = old.clone().requires_grad_(True)
    loss, selected = _method_loss("psr", logprob, old, mask, rewards)
    assert selected.tolist() == [[True, True], [False, False]]
    assert loss.item() == pytest.approx(-1.0)
    loss.backward()
    torch.testing.assert_close(logprob.grad, torch.tensor([[-0.5, -0.5], [0.0, 0.0]]))


def test_equal_to_the_authors_functions():
    reference = json.loads(FIXTURE.read_text())
    assert reference["provenance"]["settings"]["positive_advantage_weight"] == W_REINFORCE_LAMBDA
    assert len(reference["cases"]) == 3
    for case in reference["cases"]:
        mask = torch.tensor(case["mask"]).bool()
        old, entropy = torch.tensor(case["old_logprob"]), torch.tensor(case["entropy"])
        rewards = torch.tensor(case["correct"])
        for name, want in case["methods"].items():
            logprob = torch.tensor(case["logprob"]).requires_grad_(True)
            method = METHODS[name].resolved()
            adv, _ = compute_advantages(rewards, torch.arange(8) // 4, mode=method.advantage)
            torch.testing.assert_close(adv, torch.tensor(want["advantages"]))
            selected = select_tokens(method.selector, mask, advantages=adv)
            kept = selected.any(dim=1) | ~mask.any(dim=1)
            assert kept.tolist() == want["kept_rows"], name
            loss, metrics = policy_loss(
                logprob, old, adv, mask, selected, LossConfig.from_config(method), entropy=entropy
            )
            torch.testing.assert_close(loss, torch.tensor(want["loss"]), rtol=1e-5, atol=1e-6)
            assert metrics["pg_loss"] == pytest.approx(want["pg_loss"], rel=1e-5, abs=1e-6)
            loss.backward()
            torch.testing.assert_close(
                logprob.grad, torch.tensor(want["grad_logprob"]), rtol=1e-5, atol=1e-7
            )


def test_the_native_trainer_runs_the_methods_estimator():
    """`ict train --method nsr` resolves its estimator into the run's config (what config.yaml
    records) and the training step's advantages are NSR's; an explicit --advantage overrides it."""
    from types import SimpleNamespace

    from ict.train.config import TrainConfig
    from ict.train.plan import RunPlan
    from ict.train.step import TrainingStep

    rollout = SimpleNamespace(prompt_index=torch.tensor([0, 0, 1, 1]))
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0])
    for options, want in (
        ({"method": "nsr"}, [0.0, -1.0, -1.0, -1.0]),
        ({"method": "w_reinforce"}, [0.1, -1.0, -1.0, -1.0]),
        ({"method": "nsr", "advantage": "dr_grpo"}, [0.5, -0.5, 0.0, 0.0]),
        ({"method": "grpo"}, [0.5 / 0.5**0.5, -0.5 / 0.5**0.5, 0.0, 0.0]),  # sample std
    ):
        plan = RunPlan.from_config(TrainConfig(device="cpu", **options))
        assert plan.config.advantage == options.get("advantage", plan.method.advantage)
        step = TrainingStep(plan, SimpleNamespace(device=torch.device("cpu")))
        advantages, _ = step.advantages(rollout, rewards)
        assert advantages.tolist() == pytest.approx(want, abs=1e-5)


def test_groups_of_equal_rewards_carry_signal_under_w_reinforce_but_not_grpo():
    """The learning-signal health check reads `no_signal_share` (all-zero advantages): under
    W-REINFORCE an all-correct or all-wrong group still moves the policy."""
    import torch

    from ict.loss import compute_advantages

    rewards = torch.tensor([1.0, 1.0, 0.0, 0.0, 1.0, 0.0])
    groups = torch.tensor([0, 0, 1, 1, 2, 2])
    _, grpo = compute_advantages(rewards, groups, mode="grpo")
    _, wr = compute_advantages(rewards, groups, mode="w_reinforce")
    assert grpo["zero_variance_share"] == wr["zero_variance_share"] == 2 / 3
    assert grpo["no_signal_share"] == 2 / 3 and wr["no_signal_share"] == 0.0
