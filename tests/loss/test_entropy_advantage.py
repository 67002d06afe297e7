"""Entropy-based advantage shaping (Cheng et al., arXiv 2506.14758): A + min(alpha H, |A| / kappa),
H detached. Value and gradient by hand, the cited defaults, the refusal without entropy. No public
code: the definition is the paper's eqs. 5-6 and its one-line listing."""

import pytest
import torch

from ict.errors import ConfigError
from ict.loss import (
    ENTROPY_ADVANTAGE_ALPHA,
    ENTROPY_ADVANTAGE_KAPPA,
    LossConfig,
    policy_loss,
    shape_advantages,
)
from ict.methods import METHODS

A = torch.tensor([1.0, -1.0, 0.0])
H = torch.tensor([[0.5, 3.0], [1.0, 4.0], [2.0, 2.0]])
# alpha 0.4, kappa 2: row 0: 1 + min(0.2, 0.5), 1 + min(1.2, 0.5); row 1: -1 + min(0.4, 0.5),
# -1 + min(1.6, 0.5) (never past |A| / 2: the sign stays); row 2: A = 0 stays 0
SHAPED = [[1.2, 1.5], [-0.6, -0.5], [0.0, 0.0]]


def test_shaping_by_hand():
    got = shape_advantages(A[:, None].expand(3, 2), H, 0.4)
    torch.testing.assert_close(got, torch.tensor(SHAPED))


def test_the_defaults_are_the_papers():
    """arXiv 2506.14758 v3, sec. 4: kappa 2 throughout, alpha 0.4 for GRPO; Table 4: clip 0.2 /
    0.28, token-level loss, no entropy or KL loss."""
    assert (ENTROPY_ADVANTAGE_ALPHA, ENTROPY_ADVANTAGE_KAPPA) == (0.4, 2.0)
    m = METHODS["entropy_advantage"].resolved()
    assert (m.selector, m.advantage, m.entropy_advantage, m.entropy_coef) == (
        "every",
        "grpo",
        0.4,
        0.0,
    )
    assert (m.loss_agg, m.eps_low, m.eps_high, m.loss_mode) == ("token_mean", 0.2, 0.28, "vanilla")
    assert METHODS["grpo"].resolved().entropy_advantage == 0.0


def test_loss_and_gradient_by_hand_and_no_entropy_gradient():
    """Ratio 1, token mean over 6 tokens: loss = -sum(shaped) / 6, d loss / d logprob =
    -shaped / 6; the entropy gets no gradient (detached), unlike an entropy bonus."""
    mask = torch.ones(3, 2, dtype=torch.bool)
    old = -torch.rand(3, 2, generator=torch.Generator().manual_seed(0))
    logprob = old.clone().requires_grad_(True)
    entropy = H.clone().requires_grad_(True)
    config = LossConfig(loss_agg="token_mean", entropy_advantage=0.4)
    loss, _ = policy_loss(logprob, old, A, mask, None, config, entropy=entropy)
    assert loss.item() == pytest.approx(-sum(map(sum, SHAPED)) / 6)
    loss.backward()
    torch.testing.assert_close(logprob.grad, -torch.tensor(SHAPED) / 6)
    assert entropy.grad is None
    # off: the plain loss
    plain, _ = policy_loss(old.clone(), old, A, mask, None, LossConfig(loss_agg="token_mean"))
    assert plain.item() == pytest.approx(0.0)


def test_shaping_without_entropy_or_with_a_bad_alpha_is_refused():
    mask = torch.ones(3, 2, dtype=torch.bool)
    with pytest.raises(ConfigError, match="entropy_advantage != 0 needs entropy="):
        policy_loss(H, H, A, mask, None, LossConfig(entropy_advantage=0.4))
    with pytest.raises(ConfigError, match="entropy_advantage.*must be a finite number >= 0"):
        LossConfig(entropy_advantage=-1.0)
    from ict.train.config import TrainConfig

    with pytest.raises(ConfigError, match="entropy_advantage=-0.1 must be a finite number"):
        TrainConfig(entropy_advantage=-0.1)


def test_the_native_run_resolves_and_reads_the_entropy():
    from ict.train.config import TrainConfig
    from ict.train.plan import RunPlan

    plan = RunPlan.from_config(TrainConfig(device="cpu", method="entropy_advantage"))
    assert plan.loss.entropy_advantage == 0.4 and plan.loss.needs_entropy
    plan = RunPlan.from_config(TrainConfig(device="cpu", method="ict", entropy_advantage=0.1))
    assert plan.loss.entropy_advantage == 0.1
    assert not RunPlan.from_config(TrainConfig(device="cpu")).loss.needs_entropy
