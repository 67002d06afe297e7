"""policy_loss against hand-computed 2x3 cases, finite differences and edge cases."""

import math

import pytest
import torch

from ict.errors import ConfigError, DataError
from ict.loss import LOSS_AGGREGATIONS, policy_loss

# old log-probs 0, so rho = exp(logprob). eps_low .2, eps_high .28 -> clip range [.8, 1.28].
RHO = [[1.5, 0.7, 1.1], [0.5, 1.4, 1.0]]
ADV = torch.tensor([1.0, -2.0])
MASK = torch.tensor([[1, 1, 1], [1, 1, 0]], dtype=torch.bool)  # (1,2) is padding
SEL = torch.tensor([[1, 1, 0], [1, 1, 1]], dtype=torch.bool)  # M = (0,0) (0,1) (1,0) (1,1)
# per-token l = -min(rho A, clip(rho) A):
# (0,0) -min(1.5, 1.28) = -1.28 (high clip)   (0,1) -min(.7, .8) = -.7   (0,2) -1.1
# (1,0) -min(-1, -1.6) = 1.6 (low clip)       (1,1) -min(-2.8, -2.56) = 2.8
L = [[-1.28, -0.7, -1.1], [1.6, 2.8, None]]


def inputs(dtype=torch.float32):
    logprob = torch.tensor(RHO, dtype=dtype).log().requires_grad_(True)
    return logprob, torch.zeros(2, 3, dtype=dtype)


def run(**kw):
    logprob, old = inputs()
    kw.setdefault("selected", SEL)
    kw.setdefault("loss_agg", "token_mean")  # the hand-computed cases below are token means
    return policy_loss(logprob, old, ADV, MASK, **kw)


def test_token_mean_selected_and_metrics():
    loss, m = run()
    assert loss.item() == pytest.approx((-1.28 - 0.7 + 1.6 + 2.8) / 4)
    assert m["loss"] == pytest.approx(0.605) and m["pg_loss"] == pytest.approx(0.605)
    assert m["clip_fraction"] == 0.5 and m["clip/low"] == 0.25 and m["clip/high"] == 0.25
    assert m["dual_clip_fraction"] == 0.0
    assert m["selected_fraction"] == pytest.approx(4 / 5)
    assert m["ratio/mean"] == pytest.approx((1.5 + 0.7 + 0.5 + 1.4) / 4)
    assert all(isinstance(v, float) for v in m.values())
    assert "kl" not in m and "entropy" not in m


def test_gradient_by_hand():
    logprob, old = inputs()
    loss, _ = policy_loss(logprob, old, ADV, MASK, SEL, loss_agg="token_mean")
    loss.backward()
    # d l / d logprob = -A rho where unclipped, 0 where clipped or unselected; / |M| = 4
    expected = [[0.0, -0.7 / 4, 0.0], [0.0, 2.8 / 4, 0.0]]
    assert logprob.grad.tolist() == [pytest.approx(r) for r in expected]


def test_normalize_by_valid():
    loss, _ = run(normalize_by="valid")
    assert loss.item() == pytest.approx(2.42 / 5)  # 5 valid tokens


def test_seq_mean_token_mean():
    loss, _ = run(loss_agg="seq_mean_token_mean", normalize_by="valid")
    assert loss.item() == pytest.approx(((-1.28 - 0.7) / 3 + (1.6 + 2.8) / 2) / 2)
    sel = torch.tensor([[1, 1, 1], [1, 0, 0]], dtype=torch.bool)
    loss, _ = run(selected=sel, loss_agg="seq_mean_token_mean")
    assert loss.item() == pytest.approx(((-1.28 - 0.7 - 1.1) / 3 + 1.6 / 1) / 2)
    # a response with no selected token is left out of the mean (normalize_by="selected")
    sel = torch.tensor([[1, 1, 0], [0, 0, 0]], dtype=torch.bool)
    loss, _ = run(selected=sel, loss_agg="seq_mean_token_mean")
    assert loss.item() == pytest.approx((-1.28 - 0.7) / 2)


def test_seq_mean_token_sum_norm():
    loss, _ = run(loss_agg="seq_mean_token_sum_norm")
    assert loss.item() == pytest.approx(2.42 / (2 * 3))
    loss, _ = run(loss_agg="seq_mean_token_sum_norm", max_response_length=4)
    assert loss.item() == pytest.approx(2.42 / (2 * 4))


def test_dual_clip():
    loss, m = run(dual_clip=1.2)  # -cA = 2.4 for row 1: (1,1) 2.8 -> 2.4, (1,0) 1.6 stays
    assert loss.item() == pytest.approx((-1.28 - 0.7 + 1.6 + 2.4) / 4)
    assert m["dual_clip_fraction"] == 0.25
    loss, m = run(dual_clip=3.0)  # -cA = 6: no effect
    assert loss.item() == pytest.approx(0.605) and m["dual_clip_fraction"] == 0.0


def test_denominator_override():
    loss, _ = run(denominator=10)
    assert loss.item() == pytest.approx(2.42 / 10)
    loss, _ = run(loss_agg="seq_mean_token_mean", denominator=4)  # 4 responses in all
    assert loss.item() == pytest.approx(((-1.28 - 0.7) / 2 + (1.6 + 2.8) / 2) / 4)


def k3(r):  # d = log pi_ref - log pi = -log r with ref log-prob 0
    return math.exp(-math.log(r)) + math.log(r) - 1


def test_kl_k3_on_selected_and_valid():
    ref = torch.zeros(2, 3)
    sel_kl = [k3(r) for r in (1.5, 0.7, 0.5, 1.4)]
    loss, m = run(ref_logprob=ref, kl_coef=0.1)
    assert m["kl"] == pytest.approx(sum(sel_kl) / 4)
    assert loss.item() == pytest.approx(0.605 + 0.1 * sum(sel_kl) / 4)
    loss, m = run(ref_logprob=ref, kl_coef=0.1, kl_on="valid")
    valid_kl = sel_kl + [k3(1.1)]
    assert m["kl"] == pytest.approx(sum(valid_kl) / 5)
    assert loss.item() == pytest.approx(0.605 + 0.1 * sum(valid_kl) / 5)
    _, m = run(ref_logprob=ref)  # kl_coef 0: reported, not added
    assert m["loss"] == pytest.approx(0.605) and m["kl"] == pytest.approx(sum(sel_kl) / 4)


def test_kl_k1():
    loss, m = run(ref_logprob=torch.zeros(2, 3), kl_coef=0.5, kl_estimator="k1")
    k1 = sum(math.log(r) for r in (1.5, 0.7, 0.5, 1.4)) / 4  # log pi - log pi_ref
    assert m["kl"] == pytest.approx(k1)
    assert loss.item() == pytest.approx(0.605 + 0.5 * k1)


def test_kl_low_var_is_k3_clamped_at_ten():
    """verl's low_var_kl: k3 where k3 <= 10 (equal to k3 here), clamped to 10 above it, with no
    gradient there; d = log pi_ref - log pi."""
    loss, m = run(ref_logprob=torch.zeros(2, 3), kl_coef=0.1, kl_estimator="low_var_kl")
    _, m3 = run(ref_logprob=torch.zeros(2, 3), kl_coef=0.1, kl_estimator="k3")
    assert m["kl"] == pytest.approx(m3["kl"]) and m["kl"] < 10
    # one token with d = 4: k3 = e^4 - 5 = 49.6 -> 10, and its KL gradient is 0
    logprob = torch.tensor([[-4.0]], requires_grad=True)
    one = torch.ones(1, 1, dtype=torch.bool)
    kw = dict(ref_logprob=torch.zeros(1, 1), kl_coef=1.0, loss_agg="token_mean")
    loss, m = policy_loss(logprob, logprob.detach(), torch.zeros(1), one, None, **kw,
                          kl_estimator="low_var_kl")  # fmt: skip
    assert m["kl"] == pytest.approx(10.0)
    (grad,) = torch.autograd.grad(loss, logprob)
    assert float(grad) == 0.0
    loss3, m3 = policy_loss(logprob, logprob.detach(), torch.zeros(1), one, None, **kw)
    assert m3["kl"] == pytest.approx(math.exp(4) - 5)
    (grad3,) = torch.autograd.grad(loss3, logprob)
    assert float(grad3) == pytest.approx(-(math.exp(4) - 1))  # d k3 / d logprob = -(e^d - 1)


def test_eps_low_one_means_no_lower_clip():
    """eps_low = 1 (Clip-Cov's authors' clip range 1/1): the clip range is [0, 2]; a ratio of
    0.1 with A < 0 is not clipped (the loss is -A rho, with its gradient)."""
    logprob = torch.tensor([[math.log(0.1)]], requires_grad=True)
    one = torch.ones(1, 1, dtype=torch.bool)
    loss, m = policy_loss(logprob, torch.zeros(1, 1), torch.tensor([-1.0]), one, None,
                          eps_low=1.0, eps_high=1.0)  # fmt: skip
    assert loss.item() == pytest.approx(0.1) and m["clip_fraction"] == 0.0
    (grad,) = torch.autograd.grad(loss, logprob)
    assert float(grad) == pytest.approx(0.1)


def test_entropy_bonus():
    ent = torch.tensor([[1.0, 2.0, 5.0], [3.0, 4.0, 9.0]])
    loss, m = run(entropy=ent, entropy_coef=0.01)
    assert m["entropy"] == pytest.approx(2.5)  # mean over M: (1 + 2 + 3 + 4) / 4
    assert loss.item() == pytest.approx(0.605 - 0.01 * 2.5)


def test_all_masked_is_zero_and_backpropagates():
    logprob = torch.full((2, 3), float("nan"), requires_grad=True)  # garbage on padding
    old = torch.tensor([[0.0, float("inf"), 0.0], [0.0, 0.0, 0.0]])
    adv = torch.tensor([float("nan"), 1.0])
    for agg in LOSS_AGGREGATIONS:
        loss, m = policy_loss(
            logprob, old, adv, torch.zeros(2, 3, dtype=torch.bool), loss_agg=agg,
            ref_logprob=torch.zeros(2, 3), kl_coef=0.1, entropy=torch.ones(2, 3), entropy_coef=0.1,
        )  # fmt: skip
        assert loss.item() == 0.0 and loss.requires_grad
        loss.backward()
        assert torch.equal(logprob.grad, torch.zeros(2, 3))
        logprob.grad = None
        assert all(not math.isnan(v) for v in m.values())
        assert m["selected_fraction"] == 0.0


def test_padding_garbage_does_not_leak():
    logprob, old = inputs()
    logprob.data[1, 2] = float("nan")
    loss, _ = policy_loss(logprob, old, ADV, MASK, SEL)
    loss.backward()
    assert loss.item() == pytest.approx(0.605) and not torch.isnan(logprob.grad).any()


@pytest.mark.parametrize("agg", sorted(LOSS_AGGREGATIONS))
@pytest.mark.parametrize("adv_shape", ["row", "token"])
def test_gradcheck(agg, adv_shape):
    g = torch.Generator().manual_seed(1)
    B, T = 3, 5
    old = torch.randn(B, T, generator=g, dtype=torch.float64) * 0.1
    # ratios away from the clip bounds (finite differences must not cross a kink)
    offsets = torch.tensor([-0.6, -0.05, 0.05, 0.6, 0.1], dtype=torch.float64).repeat(B, 1)
    logprob = (old + offsets).requires_grad_(True)
    entropy = torch.rand(B, T, generator=g, dtype=torch.float64).requires_grad_(True)
    adv = torch.randn(B if adv_shape == "row" else (B, T), generator=g, dtype=torch.float64)
    mask = torch.rand(B, T, generator=g) < 0.8
    sel = torch.rand(B, T, generator=g) < 0.6
    ref = old + torch.randn(B, T, generator=g, dtype=torch.float64) * 0.2

    def f(lp, ent):
        loss, _ = policy_loss(
            lp, old, adv, mask, sel, loss_agg=agg, dual_clip=3.0, ref_logprob=ref, kl_coef=0.05,
            entropy=ent, entropy_coef=0.01,
        )  # fmt: skip
        return loss

    assert torch.autograd.gradcheck(f, (logprob, entropy))


def test_per_token_advantages():
    adv = torch.tensor([[1.0, -1.0, 5.0], [2.0, -2.0, 5.0]])
    loss, _ = policy_loss(*inputs(), adv, MASK, SEL)
    # (0,0) -min(1.5, 1.28) = -1.28; (0,1) -min(-.7, -.8) = .8 (low clip); (1,0) -min(1, 1.6) = -1;
    # (1,1) -min(-2.8, -2.56) = 2.8
    assert loss.item() == pytest.approx((-1.28 + 0.8 - 1.0 + 2.8) / 4)


@pytest.mark.parametrize(
    "kw,error,match",
    [
        (dict(loss_agg="sum"), ConfigError, r"unknown loss_agg 'sum'.*token_mean"),
        (dict(normalize_by="all"), ConfigError, r"unknown normalize_by.*'valid'"),
        (dict(kl_estimator="k2", ref_logprob=torch.zeros(2, 3)), ConfigError, r"k1"),
        (dict(kl_on="prompt"), ConfigError, "unknown kl_on"),
        (dict(kl_coef=0.1), ConfigError, "needs ref_logprob"),
        (dict(entropy_coef=0.1), ConfigError, "needs entropy"),
        (dict(dual_clip=1.0), ConfigError, "dual_clip must be > 1"),
        (dict(eps_low=1.01), ConfigError, "eps_low"),
        (dict(loss_mode="clip_cov", dual_clip=3.0), ConfigError, "has no dual clip"),
        (dict(max_response_length=0), ConfigError, "max_response_length"),
        (dict(denominator=-1), ConfigError, "denominator"),
        (dict(ref_logprob=torch.zeros(2, 4)), DataError, "ref_logprob must have"),
        (dict(selected=torch.ones(3, 3, dtype=torch.bool)), DataError, "selected must have"),
    ],
)
def test_errors(kw, error, match):
    with pytest.raises(error, match=match):
        run(**kw)


def test_bad_advantage_shape():
    with pytest.raises(DataError, match="advantages must be"):
        policy_loss(*inputs(), torch.ones(3), MASK)
