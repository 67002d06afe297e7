"""The loss modes (ict.loss.modes): Clip-Cov and KL-Cov against hand computations.

verl's own `core_algos` implementations are checked in tests/integrations/verl_plugin/
test_verl_loss.py (the verl environment)."""

import math

import numpy as np
import pytest
import torch

from ict.errors import ConfigError
from ict.loss import LossConfig, policy_loss
from ict.loss.modes import (
    CovarianceOptions,
    clip_cov_cut,
    kl_cov_picked,
    token_covariance,
)


def test_token_covariance_matches_numpy():
    g = torch.Generator().manual_seed(0)
    lp = -torch.rand(3, 5, generator=g) * 4
    adv = torch.randn(3, 1, generator=g).expand(3, 5)
    mask = torch.rand(3, 5, generator=g) > 0.3
    cov = token_covariance(lp, adv, mask)
    m = mask.numpy()
    a, logp = adv.numpy()[m], lp.numpy()[m]
    expected = (a - a.mean()) * (logp - logp.mean())
    np.testing.assert_allclose(cov.numpy()[m], expected, rtol=1e-5, atol=1e-7)
    assert (cov[~mask] == 0).all()


def _one_row():
    """One response of 4 tokens, A = +1 except the last (its own group: A varies per token)."""
    lp = torch.tensor([[-0.1, -2.0, -0.5, -3.0]], requires_grad=True)
    old = torch.tensor([[-0.2, -1.9, -0.5, -3.1]])
    adv = torch.tensor([[1.0, 1.0, 1.0, -1.0]])
    mask = torch.ones(1, 4, dtype=torch.bool)
    return lp, old, adv, mask


def test_kl_cov_penalises_the_highest_covariance_token_by_hand():
    lp, old, adv, mask = _one_row()
    # cov by hand: mean A = 0.5, mean lp = -1.4; (0.5)(1.3), (0.5)(-0.6), (0.5)(0.9), (-1.5)(-1.6)
    cov = [0.65, -0.3, 0.45, 2.4]
    opts = CovarianceOptions(kl_cov_ratio=0.25)  # max(1, int(4 * 0.25)) = 1 token
    picked = kl_cov_picked(lp, adv, mask, opts)
    assert picked.tolist() == [[False, False, False, True]] and int(np.argmax(cov)) == 3
    config = LossConfig(loss_agg="token_mean", loss_mode="kl_cov", kl_cov_ratio=0.25)
    loss, metrics = policy_loss(lp, old, adv, mask, None, config)
    log_ratio = [0.1, -0.1, 0.0, 0.1]
    terms = [-a * math.exp(r) for a, r in zip([1, 1, 1, -1], log_ratio, strict=True)]
    terms[3] += 1.0 * abs(log_ratio[3])  # the KL-Cov penalty, coefficient 1
    assert float(loss.detach()) == pytest.approx(sum(terms) / 4, rel=1e-6)
    assert metrics["loss_mode/changed_tokens"] == 1 and metrics["loss_mode/nominal_rate"] == 0.25
    assert metrics["loss_mode/changed_rate"] == pytest.approx(0.25)
    # no ratio clip in KL-Cov: token 0's ratio e^0.1 is inside the clip anyway; check the gradient
    (grad,) = torch.autograd.grad(loss, lp)
    expected = [-math.exp(0.1) / 4, -math.exp(-0.1) / 4, -1 / 4, (math.exp(0.1) + 1) / 4]
    np.testing.assert_allclose(grad[0].numpy(), expected, rtol=1e-5)


def test_clip_cov_cuts_only_window_tokens_not_already_clipped():
    lp, old, adv, mask = _one_row()
    # covariance 0.65, -0.3, 0.45, 2.4: only token 3 lies in (1, 5); make it ratio-clipped and
    # nothing may be cut, then unclipped and it must be the one cut
    opts = CovarianceOptions(clip_cov_ratio=0.5)  # up to 2 tokens
    clipped = torch.tensor([[False, False, False, True]])
    assert not clip_cov_cut(lp, adv, mask, clipped, opts).any()
    cut = clip_cov_cut(lp, adv, mask, torch.zeros_like(mask), opts)
    assert cut.tolist() == [[False, False, False, True]]

    config = LossConfig(loss_agg="token_mean", loss_mode="clip_cov", clip_cov_ratio=0.5)
    loss, metrics = policy_loss(lp, old, adv, mask, None, config)
    vanilla, _ = policy_loss(lp, old, adv, mask, None, LossConfig(loss_agg="token_mean"))
    (grad,) = torch.autograd.grad(loss, lp)
    (grad_vanilla,) = torch.autograd.grad(vanilla, lp)
    assert grad[0, 3] == 0 and grad_vanilla[0, 3] != 0  # the cut token's gradient is gone
    torch.testing.assert_close(grad[0, :3], grad_vanilla[0, :3])
    # its loss term is 0: -A rho for token 3 was +e^0.1, the rest is unchanged
    assert float((vanilla - loss).detach()) == pytest.approx(math.exp(0.1) / 4, rel=1e-6)
    assert metrics["loss_mode/changed_tokens"] == 1
    assert metrics["loss_mode/changed_rate"] == pytest.approx(0.25)
    assert metrics["loss_mode/nominal_rate"] == 0.5


def test_clip_cov_draws_with_the_given_generator():
    g = torch.Generator().manual_seed(1)
    lp = -torch.rand(8, 40, generator=g) * 6
    adv = torch.randn(8, 1, generator=g).expand(8, 40) * 3
    mask = torch.ones(8, 40, dtype=torch.bool)
    opts = CovarianceOptions(clip_cov_ratio=0.01)  # 3 of 320 tokens
    none = torch.zeros_like(mask)
    cov = token_covariance(lp, adv, mask)
    window = (cov > 1) & (cov < 5)
    assert int(window.sum()) > 3  # a real draw
    cuts = [
        clip_cov_cut(lp, adv, mask, none, opts, generator=torch.Generator().manual_seed(s))
        for s in (7, 7, 8)
    ]
    assert all(int(c.sum()) == 3 and not (c & ~window).any() for c in cuts)
    assert torch.equal(cuts[0], cuts[1]) and not torch.equal(cuts[0], cuts[2])


def test_empty_mask_and_vanilla_are_unchanged():
    lp, old, adv, mask = _one_row()
    empty = torch.zeros_like(mask)
    assert not kl_cov_picked(lp, adv, empty, CovarianceOptions()).any()
    assert not clip_cov_cut(lp, adv, empty, empty, CovarianceOptions()).any()
    for mode in ("clip_cov", "kl_cov"):
        loss, _ = policy_loss(lp, old, adv, empty, None, LossConfig(loss_mode=mode))
        assert float(loss.detach()) == 0.0


def test_the_count_floor_of_one_token():
    """max(1, int(r |M|)): at the published ratios one token per loss call until |M| reaches
    1 / r (5,000 tokens for Clip-Cov's 2e-4, 500 for KL-Cov's 2e-3); the metrics report it."""
    from ict.loss.modes import loss_mode_metrics, mode_count

    assert [mode_count(2e-4, n) for n in (1, 4999, 5000, 10_000)] == [1, 1, 1, 2]
    assert [mode_count(2e-3, n) for n in (1, 499, 500, 1499, 1500)] == [1, 1, 1, 2, 3]
    lp, old, adv, mask = _one_row()
    _, metrics = policy_loss(lp, old, adv, mask, None, LossConfig(loss_mode="kl_cov"))
    assert metrics["loss_mode/changed_tokens"] == 1  # 4 tokens x 2e-3 -> the floor
    assert metrics["loss_mode/changed_rate"] == 0.25 == 125 * metrics["loss_mode/nominal_rate"]
    assert loss_mode_metrics("vanilla", CovarianceOptions(), 0, 4) == {}
    summed = loss_mode_metrics("clip_cov", CovarianceOptions(), 3, 0)
    assert summed["loss_mode/changed_tokens"] == 3 and math.isnan(summed["loss_mode/changed_rate"])


def test_reads_every_row_for_covariance_modes():
    assert not LossConfig().reads_every_valid_token
    assert LossConfig(loss_mode="clip_cov").reads_every_valid_token
    assert LossConfig(loss_mode="kl_cov").reads_every_valid_token


@pytest.mark.parametrize(
    "settings, words",
    [
        ({"loss_mode": "clipcov"}, "unknown loss_mode"),
        ({"clip_cov_ratio": 0.0}, "clip_cov_ratio must be in (0, 1]"),
        ({"kl_cov_ratio": 2.0}, "kl_cov_ratio must be in (0, 1]"),
        ({"clip_cov_lb": 5.0, "clip_cov_ub": 1.0}, "clip_cov_lb must be below clip_cov_ub"),
        ({"kl_cov_coef": -1.0}, "kl_cov_coef must be >= 0"),
    ],
)
def test_bad_settings_are_one_line(settings, words):
    with pytest.raises(ConfigError, match=None) as err:
        LossConfig(**settings)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_methods_resolve_their_loss():
    from ict.methods import get_method

    assert get_method("clip_cov").resolved().loss_mode == "clip_cov"
    assert get_method("kl_cov").resolved().loss_mode == "kl_cov"
    bonus = get_method("entropy_bonus").resolved()
    assert bonus.entropy_coef > 0 and bonus.loss_mode == "vanilla" and bonus.selector == "every"
    assert get_method("ict").resolved().entropy_coef == 0.0
