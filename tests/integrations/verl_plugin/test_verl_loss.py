"""The registered policy losses against ict.loss.policy_loss and against a hand computation."""

import pytest
import torch

pytest.importorskip("verl")
from verl_helpers import actor_config  # noqa: E402

from ict.errors import ConfigError  # noqa: E402
from ict.integrations.verl import loss as verl_loss  # noqa: E402
from ict.loss import policy_loss  # noqa: E402

pytestmark = pytest.mark.verl

AGG = {"token_mean": "token-mean", "seq_mean_token_mean": "seq-mean-token-mean",
       "seq_mean_token_sum_norm": "seq-mean-token-sum-norm"}  # fmt: skip


def _inputs(B=6, R=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([5, 1, 3, 5, 2, 4])[:B]
    mask = torch.arange(R)[None, :] < lengths[:, None]
    old = -torch.rand(B, R, generator=g) * 3 * mask
    new = (old + (torch.rand(B, R, generator=g) - 0.5) * 1.2 * mask).requires_grad_(True)
    adv = torch.randn(B, generator=g)
    selected = (torch.rand(B, R, generator=g) < 0.4) & mask
    selected[3] = False  # a response with no selected token
    return old, new, adv, mask, selected


def _verl_loss(
    name,
    old,
    new,
    adv,
    mask,
    selected,
    agg,
    normalize_by,
    *,
    micro_batches=1,
    dp_size=1,
    config=None,
):
    """verl's way: the mini-batch split into micro-batches, each normalised by global counts."""
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    config = config or actor_config()
    fn = get_policy_loss_fn(name)
    n_sel, n_rows = verl_loss.local_counts(selected, mask, normalize_by)
    B = mask.shape[0]
    config.global_batch_info.update(
        dp_size=dp_size,
        batch_num_tokens=int(mask.sum()),
        global_batch_size=B,
        loss_scale_factor=None,
    )
    total, metrics = 0.0, []
    for rows in torch.arange(B).chunk(micro_batches):
        sel = verl_loss.MicroBatchSelection(selected[rows], normalize_by, n_sel, n_rows)
        with verl_loss.micro_batch(sel):
            loss, m = fn(
                old_log_prob=old[rows], log_prob=new[rows], advantages=(adv[:, None] * mask)[rows],
                response_mask=mask[rows].long(), loss_agg_mode=AGG[agg], config=config,
            )  # fmt: skip
        total = total + loss
        metrics.append(m)
    return total, metrics


@pytest.mark.parametrize("agg", sorted(AGG))
@pytest.mark.parametrize("normalize_by", ["selected", "valid"])
@pytest.mark.parametrize("micro_batches", [1, 3])
def test_matches_native_policy_loss_value_and_gradient(agg, normalize_by, micro_batches):
    old, new, adv, mask, selected = _inputs()
    want, _ = policy_loss(
        new,
        old,
        adv,
        mask,
        selected,
        eps_low=0.2,
        eps_high=0.28,
        dual_clip=3.0,
        loss_agg=agg,
        normalize_by=normalize_by,
        max_response_length=mask.shape[1],
    )
    (want_grad,) = torch.autograd.grad(want, new)
    got, _ = _verl_loss(
        "ict", old, new, adv, mask, selected, agg, normalize_by, micro_batches=micro_batches
    )
    (got_grad,) = torch.autograd.grad(got, new)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(got_grad, want_grad, atol=1e-6, rtol=1e-5)
    assert got_grad[~(selected & mask)].abs().max() == 0  # unselected tokens get no gradient


def test_data_parallel_ranks_average_to_the_full_batch():
    """Two DP ranks with global counts: verl scales each rank by dp_size, FSDP averages the
    gradients; the average equals the single-process loss on the whole batch."""
    old, new, adv, mask, selected = _inputs()
    want, _ = _verl_loss("ict", old, new, adv, mask, selected, "token_mean", "selected")
    n_sel, n_rows = verl_loss.local_counts(selected, mask, "selected")
    config = actor_config()
    config.global_batch_info.update(
        dp_size=2, batch_num_tokens=int(mask.sum()), global_batch_size=6, loss_scale_factor=None
    )
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    parts = []
    for rows in (torch.arange(0, 3), torch.arange(3, 6)):
        with verl_loss.micro_batch(
            verl_loss.MicroBatchSelection(selected[rows], "selected", n_sel, n_rows)
        ):
            loss, _ = get_policy_loss_fn("ict_entropy")(
                old[rows], new[rows], (adv[:, None] * mask)[rows], mask[rows], "token-mean", config
            )
        parts.append(loss)
    torch.testing.assert_close((parts[0] + parts[1]) / 2, want)


def test_hand_computed_two_tokens():
    """Two valid tokens, one selected: loss = -min(rho A, clip(rho) A) of that token alone."""
    old = torch.tensor([[-1.0, -2.0]])
    new = torch.tensor([[-0.5, -2.0]])  # rho = e^0.5 = 1.6487 on token 0
    adv = torch.tensor([1.0])
    mask = torch.tensor([[True, True]])
    selected = torch.tensor([[True, False]])
    got, metrics = _verl_loss("ict", old, new, adv, mask, selected, "token_mean", "selected")
    assert got.item() == pytest.approx(-1.28)  # clipped at 1 + 0.28
    assert metrics[0]["actor/pg_clipfrac"] == 1.0 and metrics[0]["ict/selected_fraction"] == 0.5
    got_valid, _ = _verl_loss("ict", old, new, adv, mask, selected, "token_mean", "valid")
    assert got_valid.item() == pytest.approx(-1.28 / 2)


def test_grpo_selection_reproduces_verls_vanilla_loss():
    """ict_grpo with every token selected is verl's own `vanilla` PPO loss (same config)."""
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    old, new, adv, mask, _ = _inputs(seed=4)
    config = actor_config()
    config.global_batch_info.update(
        dp_size=1, batch_num_tokens=int(mask.sum()), global_batch_size=6, loss_scale_factor=None
    )
    want, want_m = get_policy_loss_fn("vanilla")(
        old, new, adv[:, None] * mask, mask, "token-mean", config
    )
    got, got_m = _verl_loss(
        "ict_grpo", old, new, adv, mask, mask.clone(), "token_mean", "selected", config=config
    )
    torch.testing.assert_close(got, want)
    assert got_m[0]["actor/pg_clipfrac"] == pytest.approx(want_m["actor/pg_clipfrac"])
    assert got_m[0]["actor/pg_clipfrac_lower"] == pytest.approx(want_m["actor/pg_clipfrac_lower"])


def test_missing_selection_is_a_clear_error():
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    old, new, adv, mask, _ = _inputs()
    with verl_loss.micro_batch(None), pytest.raises(ConfigError, match="no token selection"):
        get_policy_loss_fn("ict")(old, new, adv[:, None] * mask, mask, "token-mean", actor_config())


@pytest.mark.parametrize("mode", ["clip_cov", "kl_cov"])
@pytest.mark.parametrize("agg", ["token_mean", "seq_mean_token_mean"])
def test_covariance_modes_match_verls_core_algos(mode, agg):
    """ict.loss's Clip-Cov / KL-Cov (the one definition every engine calls) against verl's own
    `compute_policy_loss_clip_cov` / `_kl_cov`: value and gradient, with ratios large enough that
    several tokens are drawn (Clip-Cov's draw: the same seeded global generator, as verl)."""
    from verl.trainer.ppo.core_algos import get_policy_loss_fn
    from verl.workers.config import PolicyLossConfig

    g = torch.Generator().manual_seed(3)
    B, R = 8, 30
    lengths = torch.randint(5, R + 1, (B,), generator=g)
    mask = torch.arange(R)[None, :] < lengths[:, None]
    old = -torch.rand(B, R, generator=g) * 6
    new = (old + (torch.rand(B, R, generator=g) - 0.5) * 0.8).requires_grad_(True)
    adv = (torch.randn(B, 1, generator=g) * 2).expand(B, R).contiguous()
    ratios = dict(clip_cov_ratio=0.03, kl_cov_ratio=0.03)
    config = actor_config(policy_loss=PolicyLossConfig(loss_mode=mode, ppo_kl_coef=1.0, **ratios))
    config.global_batch_info.update(
        dp_size=1, batch_num_tokens=int(mask.sum()), global_batch_size=B, loss_scale_factor=None
    )
    torch.manual_seed(11)
    ref, _ = get_policy_loss_fn(mode)(old, new, adv, mask.float(), AGG[agg], config)
    (ref_grad,) = torch.autograd.grad(ref, new)
    torch.manual_seed(11)
    ours, metrics = policy_loss(
        new, old, adv, mask, None, loss_mode=mode, loss_agg=agg, eps_low=0.2, eps_high=0.28,
        **ratios,
    )  # fmt: skip
    (grad,) = torch.autograd.grad(ours, new)
    assert metrics["loss_mode_fraction"] > 0.01  # several tokens changed, not a vacuous match
    torch.testing.assert_close(ours.detach(), ref.detach(), rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-6, atol=1e-7)
