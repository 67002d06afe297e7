"""Advantages against hand-computed group statistics."""

import math

import pytest
import torch

from ict.errors import ConfigError, DataError
from ict.loss import (
    ADVANTAGE_ESTIMATORS,
    compute_advantages,
    zero_variance_rows,
    zero_variance_share,
)

# groups (non-contiguous ids): 5 -> [1, 0, 1, 1]; 2 -> [0, 0] (zero variance); 9 -> [1, 0]
REWARDS = torch.tensor([1.0, 0, 1, 1, 0, 0, 1, 0])
GROUPS = torch.tensor([5, 5, 5, 5, 2, 2, 9, 9])


def test_grpo_sample_std_by_hand():
    adv, info = compute_advantages(REWARDS, GROUPS)
    # group 5: mean .75, sample std sqrt((3 * .25^2 + .75^2) / 3) = .5; group 9: mean .5,
    # sample std sqrt((.5^2 + .5^2) / 1) = sqrt(.5)
    s5, s9 = 0.5, math.sqrt(0.5)
    expected = [0.25 / (s5 + 1e-6), -0.75 / (s5 + 1e-6), 0.25 / (s5 + 1e-6), 0.25 / (s5 + 1e-6),
                0.0, 0.0, 0.5 / (s9 + 1e-6), -0.5 / (s9 + 1e-6)]  # fmt: skip
    assert adv.tolist() == pytest.approx(expected, rel=1e-6)
    assert info == {
        "zero_variance_groups": 1, "num_groups": 3, "zero_variance_share": 1 / 3,
        "no_signal_share": 1 / 3,
    }  # fmt: skip
    assert adv.dtype == torch.float32


def test_grpo_population_std_by_hand():
    adv, _ = compute_advantages(REWARDS, GROUPS, std_unbiased=False)
    s5, s9 = math.sqrt(0.75 / 4), 0.5
    assert adv[0].item() == pytest.approx(0.25 / (s5 + 1e-6), rel=1e-6)
    assert adv[6].item() == pytest.approx(0.5 / (s9 + 1e-6), rel=1e-6)


def test_matches_torch_std_reference():
    g = torch.Generator().manual_seed(0)
    rewards = torch.rand(24, generator=g, dtype=torch.float64)
    groups = torch.arange(24) % 4
    adv, _ = compute_advantages(rewards, groups)
    for k in range(4):
        r = rewards[groups == k]
        ref = (r - r.mean()) / (torch.std(r) + 1e-6)  # torch.std: unbiased, as TRL
        assert torch.allclose(adv[groups == k], ref)


def test_dr_grpo_by_hand():
    adv, info = compute_advantages(REWARDS, GROUPS, mode="dr_grpo")
    assert adv.tolist() == pytest.approx([0.25, -0.75, 0.25, 0.25, 0, 0, 0.5, -0.5])
    assert info["zero_variance_groups"] == 1


def test_zero_variance_groups_are_exactly_zero():
    rewards = torch.tensor([0.1, 0.1, 0.1, 1.0, 0.7])  # equal non-integer rewards; a singleton
    groups = torch.tensor([0, 0, 0, 1, 2])
    adv, info = compute_advantages(rewards, groups)
    assert adv.tolist() == [0.0] * 5 and not torch.isnan(adv).any()
    assert info == {
        "zero_variance_groups": 3, "num_groups": 3, "zero_variance_share": 1.0,
        "no_signal_share": 1.0,
    }  # fmt: skip
    assert zero_variance_rows(REWARDS, GROUPS).tolist() == [False] * 4 + [True, True, False, False]
    # the step metric: groups 5 (1, 0, 1, 1), 7 (1, 1: all equal), 9 (1, 0) -> 1 of 3
    assert zero_variance_share(REWARDS, GROUPS) == pytest.approx(1 / 3)


def test_registry_and_errors():
    assert set(ADVANTAGE_ESTIMATORS) >= {"grpo", "dr_grpo"}
    with pytest.raises(ConfigError, match=r"unknown advantage estimator 'ppo'.*dr_grpo"):
        compute_advantages(REWARDS, GROUPS, mode="ppo")
    with pytest.raises(DataError, match="same length"):
        compute_advantages(REWARDS, GROUPS[:3])
    with pytest.raises(DataError, match="integer"):
        compute_advantages(REWARDS, GROUPS.float())
    with pytest.raises(DataError, match="NaN"):
        compute_advantages(torch.tensor([1.0, float("nan")]), torch.tensor([0, 0]))
