"""ict.stats against the loop-per-position SciPy reference (tests/stats/reference_impl.py)."""

import math

import numpy as np
import pytest
import torch

from ict.stats import REFERENCES, token_stats

from .reference_impl import reference_stats

FIELDS = ("entropy", "renyi2", "logprob", "js")


def _case(seed=0, B=4, T=6, V=23, scale=3.0, p_valid=0.7, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    logits = (torch.randn(B, T, V, generator=g, dtype=torch.float64) * scale).to(dtype)
    tokens = torch.randint(0, V, (B, T), generator=g)
    mask = torch.rand(B, T, generator=g) < p_valid
    mask[0, 0] = True  # at least one valid position
    return logits, tokens, mask


def _kwargs(reference, B, logits, seed=1):
    if reference in ("group_mean", "group_position"):
        return {"group_ids": torch.arange(B) // 2}
    if reference == "reference_policy":
        g = torch.Generator().manual_seed(seed)
        return {
            "reference_logits": torch.randn(logits.shape, generator=g, dtype=torch.float64).to(
                logits.dtype
            )
            * 2
        }
    return {}


def _compare(stats, ref, mask, atol):
    for f in FIELDS:
        got = getattr(stats, f).double().numpy()
        assert getattr(stats, f).dtype == torch.float32
        np.testing.assert_allclose(got, ref[f], atol=atol, rtol=0, err_msg=f)
        assert np.all(got[~mask.numpy()] == 0.0), f"{f} not zero at masked positions"


@pytest.mark.parametrize("reference", REFERENCES)
@pytest.mark.parametrize("chunk_size", [1, 3, None])
def test_every_reference_matches_loop_reference_float64(reference, chunk_size):
    logits, tokens, mask = _case(seed=hash(reference) % 1000)
    kw = _kwargs(reference, logits.shape[0], logits)
    stats = token_stats(logits, tokens, mask, reference=reference, chunk_size=chunk_size, **kw)
    ref = reference_stats(
        logits, tokens, mask, reference=reference, **{k: v.numpy() for k, v in kw.items()}
    )
    _compare(stats, ref, mask, atol=1e-6)  # float32 output of a float64 computation


@pytest.mark.parametrize("reference", REFERENCES)
def test_float32_and_temperature(reference):
    logits, tokens, mask = _case(seed=7, V=101, dtype=torch.float32)
    kw = _kwargs(reference, logits.shape[0], logits)
    stats = token_stats(
        logits, tokens, mask, reference=reference, temperature=0.7, chunk_size=2, **kw
    )
    ref = reference_stats(
        logits.double(),
        tokens,
        mask,
        temperature=0.7,
        reference=reference,
        **{k: v.double().numpy() if v.is_floating_point() else v.numpy() for k, v in kw.items()},
    )
    _compare(stats, ref, mask, atol=2e-5)


def test_bf16_input_accumulates_in_float32():
    logits, tokens, mask = _case(seed=3, V=64, dtype=torch.bfloat16)
    stats = token_stats(logits, tokens, mask)
    # the reference sees exactly the bf16 values, upcast
    ref = reference_stats(logits.double(), tokens, mask)
    _compare(stats, ref, mask, atol=2e-5)


def test_adversarial_rows():
    V = 40
    rows = torch.zeros(6, V, dtype=torch.float64)
    rows[0, 5] = 1e4  # one-hot in float arithmetic
    rows[1, 5] = 12.0  # peaked
    rows[2] = 0.0  # uniform
    rows[3, : V // 2] = -math.inf  # half the vocabulary masked, uniform on the rest
    rows[4] = torch.linspace(-3, 3, V, dtype=torch.float64) + 1e4  # large logits, offset only
    rows[5] = torch.linspace(-3, 3, V, dtype=torch.float64)
    logits = rows[None]
    tokens = torch.tensor([[5, 0, 1, 30, 2, 2]])
    mask = torch.ones(1, 6, dtype=torch.bool)
    for dtype, atol in ((torch.float64, 1e-6), (torch.float32, 3e-5)):
        for reference in ("batch_mean", "previous_token"):
            stats = token_stats(logits.to(dtype), tokens, mask, reference=reference)
            # the reference sees the same (rounded) input values
            ref = reference_stats(logits.to(dtype).double(), tokens, mask, reference=reference)
            _compare(stats, ref, mask, atol)
    stats = token_stats(logits.float(), tokens, mask)
    assert stats.entropy[0, 0] == 0 and stats.renyi2[0, 0] == 0 and stats.logprob[0, 0] == 0
    assert stats.entropy[0, 2] == pytest.approx(math.log(V), abs=1e-5)
    assert stats.renyi2[0, 2] == pytest.approx(math.log(V), abs=1e-5)
    assert stats.entropy[0, 3] == pytest.approx(math.log(V // 2), abs=1e-5)
    # logits shifted by a constant give the same distribution (float64: 1e4 + x is exact enough)
    stats64 = token_stats(logits, tokens, mask)
    assert stats64.entropy[0, 4] == pytest.approx(stats64.entropy[0, 5].item(), abs=1e-6)
    assert stats64.js[0, 4] == pytest.approx(stats64.js[0, 5].item(), abs=1e-6)
    # a token whose logit is -inf has probability 0
    masked_tok = token_stats(logits, torch.tensor([[5, 0, 1, 3, 2, 2]]), mask)
    assert masked_tok.logprob[0, 3] == -math.inf and masked_tok.prob[0, 3] == 0


def test_mask_zeros_and_empty_mask():
    logits, tokens, mask = _case(seed=2)
    for reference in ("batch_mean", "previous_token"):
        stats = token_stats(logits, tokens, torch.zeros_like(mask), reference=reference)
        for f in FIELDS:
            assert torch.equal(getattr(stats, f), torch.zeros(mask.shape))
    stats = token_stats(logits, tokens, mask)
    assert torch.all(stats.prob[~mask] == 0)
    assert torch.allclose(stats.prob[mask], stats.logprob[mask].exp())


def test_previous_token_uses_last_prompt_position():
    """Full prompt+response layout: the first response token (t=3) is compared with the
    distribution at t=2, a prompt position where mask is False; t=0 valid gives JS = 0."""
    V = 5
    logits = torch.zeros(2, 5, V, dtype=torch.float64)
    logits[0, 2] = torch.tensor([5.0, 0, 0, 0, 0])  # prompt position
    logits[0, 3] = torch.tensor([0.0, 0, 0, 0, 5])
    logits[1, 0] = torch.tensor([0.0, 3, 0, 0, 0])
    mask = torch.tensor([[0, 0, 0, 1, 1], [1, 1, 0, 0, 0]], dtype=torch.bool)
    tokens = torch.zeros(2, 5, dtype=torch.long)
    stats = token_stats(logits, tokens, mask, reference="previous_token")
    p = torch.softmax(logits.double(), -1)

    def js(a, b):
        m = (a + b) / 2
        h = lambda x: -(x * x.log()).sum()  # noqa: E731 (no zeros here)
        return (h(m) - h(a) / 2 - h(b) / 2).item()

    assert stats.js[0, 3].item() == pytest.approx(js(p[0, 3], p[0, 2]), abs=1e-6)
    assert stats.js[0, 4].item() == pytest.approx(js(p[0, 4], p[0, 3]), abs=1e-6)
    assert stats.js[1, 0].item() == 0.0
    assert stats.js[1, 1].item() == pytest.approx(js(p[1, 1], p[1, 0]), abs=1e-6)


def test_non_contiguous_logits_are_not_copied_whole():
    """logits[:, :-1] of a model output (non-mergeable strides) gives the same result."""
    logits, tokens, mask = _case(seed=4, T=7)
    sliced = logits[:, :-1]
    stats = token_stats(sliced, tokens[:, :-1], mask[:, :-1], chunk_size=2)
    ref = token_stats(sliced.contiguous(), tokens[:, :-1], mask[:, :-1])
    for f in FIELDS:
        torch.testing.assert_close(getattr(stats, f), getattr(ref, f), atol=1e-7, rtol=0)
