"""The library entry points the README shows say what is wrong in one line when given the wrong
type or shape (instead of a torch error from deep inside)."""

from __future__ import annotations

import pytest
import torch

from ict.errors import DataError
from ict.head import LogitHead
from ict.loss import LossConfig, compute_advantages, policy_loss
from ict.stats import token_stats_from_hidden

B, T, D, V = 4, 5, 8, 11


@pytest.fixture
def batch():
    g = torch.Generator().manual_seed(0)
    return {
        "hidden": torch.randn(B, T, D, generator=g),
        "weight": torch.randn(V, D, generator=g),
        "tokens": torch.randint(0, V, (B, T), generator=g),
        "mask": torch.ones(B, T, dtype=torch.bool),
        "groups": torch.tensor([0, 0, 1, 1]),
        "logprob": torch.randn(B, T, generator=g).requires_grad_(),
        "rewards": torch.tensor([1.0, 0.0, 1.0, 0.0]),
    }


def _one_line(err: pytest.ExceptionInfo) -> str:
    text = str(err.value)
    assert "\n" not in text
    return text


def test_policy_loss_given_compute_advantages_tuple_names_the_fix(batch):
    result = compute_advantages(batch["rewards"], batch["groups"])
    lp = batch["logprob"]
    with pytest.raises(DataError) as err:
        policy_loss(lp, lp.detach(), result, batch["mask"])
    assert "compute_advantages returns (advantages, info)" in _one_line(err)
    advantages, _ = result  # the fix the message names works
    loss, _ = policy_loss(lp, lp.detach(), advantages, batch["mask"])
    loss.backward()
    assert torch.isfinite(loss)


def test_policy_loss_other_wrong_inputs(batch):
    lp, adv = batch["logprob"], compute_advantages(batch["rewards"], batch["groups"])[0]
    with pytest.raises(DataError, match="advantages must be a tensor") as err:
        policy_loss(lp, lp.detach(), {"a": 1}, batch["mask"])
    _one_line(err)
    with pytest.raises(DataError, match="mask is required"):
        policy_loss(lp, lp.detach(), adv, None)
    with pytest.raises(DataError, match="pass the LossConfig as config="):
        policy_loss(lp, lp.detach(), adv, batch["mask"], LossConfig())
    # a list of advantages still works as before (converted)
    loss, _ = policy_loss(lp, lp.detach(), adv.tolist(), batch["mask"])
    assert torch.isfinite(loss)


def test_token_stats_given_the_head_module_names_the_weight(batch):
    head = torch.nn.Linear(D, V, bias=False)
    with pytest.raises(DataError) as err:
        token_stats_from_hidden(batch["hidden"], head, batch["tokens"], batch["mask"])
    assert "model.lm_head.weight" in _one_line(err) and "got Linear" in str(err.value)


def test_token_stats_given_a_list_of_group_ids(batch):
    with pytest.raises(DataError, match=r"group_ids must be an integer tensor \[B\], got list"):
        token_stats_from_hidden(
            batch["hidden"], LogitHead(batch["weight"]), batch["tokens"], batch["mask"],
            reference="group_position", group_ids=[0, 0, 1, 1],
        )  # fmt: skip
