"""The registered policy losses against ict.loss.policy_loss and against a hand computation."""

import pytest
import torch

pytest.importorskip("verl")
from verl_helpers import actor_config  # noqa: E402

from ict.errors import ConfigError  # noqa: E402
from ict.integrations.verl import loss as verl_loss  # noqa: E402
from ict.loss import policy_loss, row_counts  # noqa: E402

pytestmark = pytest.mark.verl

AGG = {"token_mean": "token-mean", "seq_mean_token_mean": "seq-mean-token-mean",
       "seq_mean_token_sum_norm": "seq-mean-token-sum-norm"}  # fmt: skip


def _counts(selected, mask, normalize_by):
    """The mini-batch's (normaliser tokens, rows with one): the sums of the per-row counts the
    driver ships (ict.loss.row_counts, the step run's)."""
    counts = row_counts(mask, selected, normalize_by=normalize_by)
    return int(counts.tokens.sum()), int(counts.rows.sum())


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
    n_sel, n_rows = _counts(selected, mask, normalize_by)
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
    n_sel, n_rows = _counts(selected, mask, "selected")
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


def _covariance_batch(seed, B=8, R=40):
    """Ratios e^u with u uniform in [-2, 2] (so both clips and verl's dual clip c = 3 bind),
    advantages of both signs (2 N(0, 1) per response), ragged responses."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(10, R + 1, (B,), generator=g)
    mask = torch.arange(R)[None, :] < lengths[:, None]
    old = -torch.rand(B, R, generator=g) * 6
    new = (old + (torch.rand(B, R, generator=g) * 4 - 2)).requires_grad_(True)
    adv = (torch.randn(B, 1, generator=g) * 2).expand(B, R).contiguous()
    return old, new, adv, mask


@pytest.mark.parametrize("mode", ["clip_cov", "kl_cov"])
@pytest.mark.parametrize("agg", sorted(AGG))
@pytest.mark.parametrize("clip", [(0.2, 0.28), (1.0, 1.0)], ids=["clip_0.2_0.28", "clip_1_1"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_registered_covariance_losses_equal_verls_own(mode, agg, clip, seed):
    """The registered plugin losses `ict_clip_cov` / `ict_kl_cov` (through verl's policy-loss
    registry, with the selection and settings the engine hook hands them) against verl's own
    `compute_policy_loss_clip_cov` / `_kl_cov`, under verl's own actor config (its dual clip
    c = 3 included, which verl's covariance losses do not apply): value and gradient, on batches
    whose ratios reach e^2 with negative advantages, where the ratio clip and the dual clip bind.
    Clip-Cov's draw: the same seeded global generator. Clip range 1/1 is Clip-Cov's authors'."""
    from verl.trainer.ppo.core_algos import get_policy_loss_fn
    from verl.workers.config import PolicyLossConfig

    from ict.loss import CovarianceOptions

    old, new, adv, mask = _covariance_batch(seed)
    ratios = dict(clip_cov_ratio=0.05, kl_cov_ratio=0.05)
    config = actor_config(
        clip_ratio_low=clip[0], clip_ratio_high=clip[1], clip_ratio_c=3.0,
        policy_loss=PolicyLossConfig(loss_mode=mode, ppo_kl_coef=1.0, **ratios),
    )  # fmt: skip
    B = mask.shape[0]
    config.global_batch_info.update(
        dp_size=1, batch_num_tokens=int(mask.sum()), global_batch_size=B, loss_scale_factor=None
    )
    rho, A = torch.exp(new - old).detach()[mask], adv[mask]
    assert ((A < 0) & (rho > 3.0)).any()  # where the dual clip would bind
    assert ((A > 0) & (rho > 1 + clip[1])).any() or clip[1] == 1.0  # the ratio clip binds
    torch.manual_seed(11 + seed)
    ref, _ = get_policy_loss_fn(mode)(old, new, adv, mask.float(), AGG[agg], config)
    (ref_grad,) = torch.autograd.grad(ref, new)

    n_sel, n_rows = _counts(mask, mask, "selected")
    selection = verl_loss.MicroBatchSelection(
        mask.clone(), "selected", n_sel, n_rows, loss_agg=None, loss_mode=mode,
        covariance=CovarianceOptions(kl_cov_coef=1.0, **ratios),
    )  # fmt: skip
    verl_loss.take_step_counts()  # nothing left over from other tests
    with verl_loss.micro_batch(selection):
        torch.manual_seed(11 + seed)
        ours, _ = get_policy_loss_fn(f"ict_{mode}")(old, new, adv, mask.long(), AGG[agg], config)
    (grad,) = torch.autograd.grad(ours, new)
    counts = verl_loss.take_step_counts()
    assert counts["loss_mode/changed_tokens"] == max(1, int(0.05 * int(mask.sum())))
    torch.testing.assert_close(ours.detach(), ref.detach(), rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-6, atol=1e-7)
    # ict.loss's own function (the native trainer's) gives the same, with the same clip range
    torch.manual_seed(11 + seed)
    native, native_metrics = policy_loss(
        new, old, adv, mask, None, loss_mode=mode, loss_agg=agg, eps_low=clip[0],
        eps_high=clip[1], max_response_length=mask.shape[1], **ratios,
    )  # fmt: skip
    torch.testing.assert_close(native.detach(), ref.detach(), rtol=1e-6, atol=1e-7)
    # the step's clip fraction (ratio clip region over M), as the native loss reports it
    assert counts["clip_fraction"] == pytest.approx(native_metrics["clip_fraction"])
    assert native_metrics["clip_fraction"] > 0 or clip == (1.0, 1.0)


def test_the_vanilla_plugin_loss_keeps_verls_dual_clip():
    """`ict_grpo` (vanilla) applies verl's clip_ratio_c as verl's vanilla loss does: at ratio 4.48
    and A = -1 the loss is c = 3 (not 4.48) and the token has no gradient."""
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    old = torch.zeros(1, 1)
    new = torch.full((1, 1), 1.5, requires_grad=True)  # rho = e^1.5 = 4.48
    adv, mask = torch.tensor([[-1.0]]), torch.ones(1, 1, dtype=torch.bool)
    config = actor_config()
    config.global_batch_info.update(
        dp_size=1, batch_num_tokens=1, global_batch_size=1, loss_scale_factor=None
    )
    selection = verl_loss.MicroBatchSelection(mask.clone(), "selected", 1, 1)
    with verl_loss.micro_batch(selection):
        ours, _ = get_policy_loss_fn("ict_grpo")(old, new, adv, mask, "token-mean", config)
    want, _ = get_policy_loss_fn("vanilla")(old, new, adv, mask, "token-mean", config)
    assert ours.item() == pytest.approx(3.0) and want.item() == pytest.approx(3.0)
    (grad,) = torch.autograd.grad(ours, new)
    assert float(grad) == 0.0


def test_low_var_kl_is_verls_kl_penalty():
    """ict.loss's `low_var_kl` (the paper preset's KL term, verl's GRPO recipe) against verl's own
    `kl_penalty(..., "low_var_kl")`: value and gradient, with log-ratios reaching +-25 so that
    both clamps (d to [-20, 20], k3 to [-10, 10]) bind; and through policy_loss's KL term."""
    from verl.trainer.ppo.core_algos import kl_penalty

    from ict.loss import KL_ESTIMATORS

    g = torch.Generator().manual_seed(0)
    logprob = (-torch.rand(6, 9, generator=g) * 5).requires_grad_(True)
    ref = logprob.detach() + torch.linspace(-25, 25, 54).view(6, 9)
    theirs = kl_penalty(logprob, ref, "low_var_kl")
    ours = KL_ESTIMATORS["low_var_kl"]((ref - logprob).clamp(-20, 20))
    assert (theirs == 10).any() and (theirs < 1).any()  # the clamp binds, and small values too
    torch.testing.assert_close(ours, theirs)
    (g_ours,) = torch.autograd.grad(ours.sum(), logprob)
    (g_theirs,) = torch.autograd.grad(kl_penalty(logprob, ref, "low_var_kl").sum(), logprob)
    torch.testing.assert_close(g_ours, g_theirs)
    mask = torch.ones(6, 9, dtype=torch.bool)
    _, metrics = policy_loss(logprob, logprob.detach(), torch.zeros(6), mask, None,
                             ref_logprob=ref, kl_coef=0.001, kl_estimator="low_var_kl")  # fmt: skip
    assert metrics["kl"] == pytest.approx(float(theirs.detach().mean()), rel=1e-6)
