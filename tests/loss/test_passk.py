"""Pass@k Training's analytic advantage (Chen et al., arXiv 2508.10751): by hand, against an
enumeration of every k-subset of the group (what the analytic form is the limit of), and against
the authors' function on every correct count.

fixtures/passk_reference.json was computed at development time by running the authors'
`calc_adv` (RUCAIBox/Passk_Training, `code/passk_adv.py`, commit in the file's `provenance`) as is,
on groups of 5, 8 and 16 responses with k 2 and 4; their code is not in this repository.
"""

import itertools
import json
import math
from pathlib import Path

import pytest
import torch

from ict.errors import ConfigError, DataError
from ict.loss import ADVANTAGE_ESTIMATORS, PASSK_K, compute_advantages, group_stats
from ict.methods import METHODS

FIXTURE = Path(__file__).parent / "fixtures" / "passk_reference.json"


def _passk(rewards, k):
    rewards = torch.tensor(rewards, dtype=torch.float64)
    groups = group_stats(rewards, torch.zeros(len(rewards), dtype=torch.long))
    return ADVANTAGE_ESTIMATORS["passk"](rewards, groups, eps=1e-6, k=k)


def test_by_hand():
    """N = 8, one correct, k = 4: rho = 1 - C(7,4)/C(8,4) = 1/2, sigma = 1/2; A+ = 1;
    A- = (1/2 - C(6,3)/C(7,3)) / (1/2) = (1/2 - 4/7) * 2 = -1/7 (each up to the 1e-6)."""
    adv = _passk([1.0] + [0.0] * 7, 4)
    assert adv[0].item() == pytest.approx(0.5 / (0.5 + 1e-6))
    assert adv[1:].tolist() == pytest.approx([(0.5 - 4 / 7) / (0.5 + 1e-6)] * 7)


@pytest.mark.parametrize("n, k", [(6, 2), (8, 4), (7, 3)])
def test_equals_the_mean_group_advantage_over_every_k_subset(n, k):
    """The analytic advantage of a response is the mean, over the C(n-1, k-1) k-subsets holding
    it, of the subset's GRPO advantage (max reward - mean) / std over all C(n, k) subsets
    (the paper's eqs. 7-15); enumerated here exactly, without the 1e-6."""
    for c in range(1, n):
        rewards = [1.0] * c + [0.0] * (n - c)
        subsets = list(itertools.combinations(range(n), k))
        scores = [max(rewards[i] for i in s) for s in subsets]
        mean = sum(scores) / len(scores)
        std = math.sqrt(sum((x - mean) ** 2 for x in scores) / len(scores))
        if std == 0:  # fewer than k wrong answers: every subset passes, no signal
            assert _passk(rewards, k).tolist() == [0.0] * n
            continue
        want = []
        for i in range(n):
            mine = [(x - mean) / std for s, x in zip(subsets, scores, strict=True) if i in s]
            want.append(sum(mine) / len(mine))
        got = _passk(rewards, k)
        scale = std / (std + 1e-6)  # the authors' sigma + 1e-6
        assert got.tolist() == pytest.approx([w * scale for w in want], rel=1e-9, abs=1e-12)


def test_equal_to_the_authors_function():
    reference = json.loads(FIXTURE.read_text())
    assert reference["provenance"]["repo"] == "RUCAIBox/Passk_Training"
    assert len(reference["cases"]) == 41
    for case in reference["cases"]:
        got = _passk(case["rewards"], case["k"])
        assert got.tolist() == pytest.approx(case["advantages"], rel=1e-6, abs=1e-9), case


def test_groups_batched_and_refusals():
    rewards = torch.tensor([1.0, 0, 0, 0, 1, 1, 0, 1])
    adv, _ = compute_advantages(rewards, torch.tensor([3, 3, 3, 3, 7, 7, 7, 7]), mode="passk")
    assert adv[:4].tolist() == pytest.approx(_passk([1.0, 0, 0, 0], PASSK_K).tolist())
    assert adv[4:].tolist() == pytest.approx(_passk([1.0, 1, 0, 1], PASSK_K).tolist())
    with pytest.raises(
        DataError, match="needs at least k = 4 responses per prompt, got a group of 2"
    ):
        compute_advantages(rewards[:2], torch.tensor([0, 0]), mode="passk")
    with pytest.raises(DataError, match="advantage 'passk' needs 0/1 rewards"):
        compute_advantages(torch.tensor([1.0, 0.5, 0, 0]), torch.zeros(4, dtype=torch.long),
                           mode="passk")  # fmt: skip


def test_method_defaults_and_engine_checks():
    from ict.train.config import TrainConfig

    assert PASSK_K == 4
    m = METHODS["passk"].resolved()
    assert (m.selector, m.advantage, m.loss_agg, m.eps_low, m.eps_high) == (
        "every",
        "passk",
        "token_mean",
        0.2,
        0.28,
    )
    assert m.entropy_coef == 0.0 and m.entropy_advantage == 0.0
    with pytest.raises(ConfigError, match="'passk' \\(pass@4\\) needs num_generations >= 4, got 2"):
        TrainConfig(method="passk", num_generations=2)
    with pytest.raises(
        ConfigError, match="'grpo_passk' is verl's own estimator.*use advantage='passk'"
    ):
        TrainConfig(advantage="grpo_passk")
