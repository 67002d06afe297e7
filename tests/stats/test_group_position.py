"""reference="group_position" (the paper's score): JS / KL to the mean of the group's distributions at
the same aligned response position, checked against SciPy on ragged groups and by properties."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import jensenshannon
from scipy.special import softmax
from scipy.stats import entropy

from ict.errors import ConfigError, DataError
from ict.head import LogitHead
from ict.stats import logit_sources as sources_mod
from ict.stats import token_stats, token_stats_from_hidden

from .reference_impl import reference_stats

FIELDS = ("entropy", "renyi2", "logprob", "js", "kl")
GP = {"reference": "group_position"}


def _ragged(seed=0, V=17, dtype=torch.float64):
    """6 rows x 9 columns: group 5 has 3 rows whose responses start at columns 0, 3, 1 with 6, 4, 7
    valid positions (padding on both sides, one hole); group 2 has 2 rows; group 9 has one row."""
    g = torch.Generator().manual_seed(seed)
    B, T = 6, 9
    logits = (torch.randn(B, T, V, generator=g, dtype=torch.float64) * 3).to(dtype)
    tokens = torch.randint(0, V, (B, T), generator=g)
    mask = torch.zeros(B, T, dtype=torch.bool)
    mask[0, 0:6] = True
    mask[1, 3:7] = True
    mask[2, 1:9] = True
    mask[2, 4] = False  # a hole: alignment counts valid positions, not columns
    mask[3, 2:5] = True
    mask[4, 0:5] = True
    mask[5, 4:8] = True
    group_ids = torch.tensor([5, 5, 5, 2, 2, 9])
    return logits, tokens, mask, group_ids


def _aligned(mask):
    """Hand-written alignment: for each row, its valid columns in order."""
    return [[t for t in range(mask.shape[1]) if mask[b, t]] for b in range(mask.shape[0])]


def test_ragged_groups_against_scipy_by_hand():
    logits, tokens, mask, gid = _ragged()
    s = token_stats(logits, tokens, mask, group_ids=gid, divergence="kl", chunk_size=4, **GP)
    P = softmax(logits.numpy(), axis=-1)
    cols = _aligned(mask)
    checked_zero = 0
    for b in range(6):
        for k, t in enumerate(cols[b]):
            peers = [j for j in range(6) if gid[j] == gid[b] and len(cols[j]) > k]
            r = np.mean([P[j, cols[j][k]] for j in peers], axis=0)
            p = P[b, t]
            assert s.entropy[b, t].item() == pytest.approx(entropy(p), abs=1e-6)
            assert s.js[b, t].item() == pytest.approx(jensenshannon(p, r) ** 2, abs=1e-6)
            assert s.kl[b, t].item() == pytest.approx(entropy(p, r), abs=1e-6)
            if len(peers) == 1:  # one-row group, or a position only this row reaches
                assert s.js[b, t].item() == 0.0 and s.kl[b, t].item() == 0.0
                checked_zero += 1
            else:
                assert s.js[b, t].item() > 1e-3
    # row 2's k = 6 (rows 0 and 2 share k = 4, 5), row 4's k = 3, 4, the one-row group 9's 4
    assert checked_zero == 1 + 2 + 4
    for f in FIELDS:
        assert torch.all(getattr(s, f)[~mask] == 0)


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 5, None])
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_loop_reference_float64(chunk_size, seed):
    logits, tokens, mask, gid = _ragged(seed)
    s = token_stats(
        logits, tokens, mask, group_ids=gid, divergence="kl", chunk_size=chunk_size, **GP
    )
    ref = reference_stats(logits, tokens, mask, group_ids=gid.numpy(), **GP)
    for f in FIELDS:
        assert getattr(s, f).dtype == torch.float32
        np.testing.assert_allclose(getattr(s, f).double().numpy(), ref[f], atol=1e-6, err_msg=f)


@pytest.mark.parametrize("temperature", [0.6, 1.0, 1.7])
def test_float32_and_bf16_with_temperature(temperature):
    for dtype, atol in ((torch.float32, 3e-5), (torch.bfloat16, 3e-5)):
        logits, tokens, mask, gid = _ragged(3, V=101, dtype=dtype)
        s = token_stats(
            logits, tokens, mask, group_ids=gid, temperature=temperature, divergence="kl", **GP
        )
        # the reference sees exactly the (rounded) input values, upcast
        ref = reference_stats(
            logits.double(), tokens, mask, temperature=temperature, group_ids=gid.numpy(), **GP
        )
        for f in FIELDS:
            np.testing.assert_allclose(
                getattr(s, f).double().numpy(), ref[f], atol=atol, err_msg=f"{dtype} {f}"
            )


def test_default_is_js_only_and_kl_does_not_change_js():
    logits, tokens, mask, gid = _ragged()
    a = token_stats(logits, tokens, mask, group_ids=gid, **GP)
    b = token_stats(logits, tokens, mask, group_ids=gid, divergence="kl", **GP)
    assert a.kl is None and b.kl is not None and b.kl.dtype == torch.float32
    torch.testing.assert_close(a.js, b.js, atol=0, rtol=0)
    assert not torch.allclose(b.kl, b.js)  # a different divergence, not a copy


def test_minus_inf_vocabulary_entries_give_finite_kl():
    logits, tokens, mask, gid = _ragged(V=12)
    logits[..., :5] = -math.inf  # masked for every row: r = 0 where p = 0
    logits[0, :, 7] = -math.inf  # masked for one row only: p = 0 < r
    tokens = tokens.clamp(min=8)
    s = token_stats(logits, tokens, mask, group_ids=gid, divergence="kl", **GP)
    ref = reference_stats(logits, tokens, mask, group_ids=gid.numpy(), **GP)
    for f in FIELDS:
        assert torch.isfinite(getattr(s, f)).all(), f
        np.testing.assert_allclose(getattr(s, f).double().numpy(), ref[f], atol=1e-6, err_msg=f)


def test_alignment_ignores_where_a_response_starts():
    """Moving a row's response (and its logits) to other columns leaves every score unchanged."""
    logits, tokens, mask, gid = _ragged()
    a = token_stats(logits, tokens, mask, group_ids=gid, divergence="kl", **GP)
    shifted_l, shifted_t, shifted_m = logits.clone(), tokens.clone(), mask.clone()
    shifted_l[1] = logits[1].roll(2, dims=0)
    shifted_t[1] = tokens[1].roll(2)
    shifted_m[1] = mask[1].roll(2)  # columns 3..6 -> 5..8
    b = token_stats(shifted_l, shifted_t, shifted_m, group_ids=gid, divergence="kl", **GP)
    for f in FIELDS:
        torch.testing.assert_close(getattr(b, f)[1].roll(-2), getattr(a, f)[1], atol=1e-7, rtol=0)
        torch.testing.assert_close(getattr(b, f)[[0, 2]], getattr(a, f)[[0, 2]], atol=1e-7, rtol=0)


def test_group_larger_than_chunk_size_is_correct_and_bounded(monkeypatch):
    """A chunk holds whole (group, position) cells: with G = 5 > chunk_size = 2 every fill covers
    exactly one cell (5 rows), and the result equals the unchunked one."""
    seen = []
    original = sources_mod.HiddenSource.fill

    def spy(self, rows, positions, out):
        seen.append((rows.numel(), out.shape[0]))
        return original(self, rows, positions, out)

    monkeypatch.setattr(sources_mod.HiddenSource, "fill", spy)
    g = torch.Generator().manual_seed(0)
    hidden, W = (
        torch.randn(7, 4, 6, generator=g, dtype=torch.float64),
        torch.randn(20, 6, generator=g, dtype=torch.float64),
    )
    tokens = torch.randint(0, 20, (7, 4), generator=g)
    mask = torch.ones(7, 4, dtype=torch.bool)
    gid = torch.tensor([0, 0, 0, 0, 0, 1, 1])
    a = token_stats_from_hidden(
        hidden, LogitHead(W), tokens, mask, group_ids=gid, chunk_size=2, **GP
    )
    assert sorted(set(seen)) == [(2, 5), (5, 5)]  # group 0: one 5-row cell per fill; group 1: 2
    assert len(seen) == 8
    seen.clear()
    b = token_stats_from_hidden(
        hidden, LogitHead(W), tokens, mask, group_ids=gid, chunk_size=10, **GP
    )
    assert max(n for n, _ in seen) <= 10 and len(seen) == 3  # cells packed: 10 + 10 + 8 rows
    torch.testing.assert_close(a.js, b.js, atol=1e-7, rtol=0)
    ref = reference_stats(hidden @ W.T, tokens, mask, group_ids=gid.numpy(), **GP)
    np.testing.assert_allclose(a.js.double().numpy(), ref["js"], atol=1e-6)


# ---------------------------------------------------------------------------------------------
# Properties


@st.composite
def grouped(draw, dtype=torch.float32):
    seed = draw(st.integers(0, 2**31 - 1))
    B, T, V = draw(st.integers(1, 6)), draw(st.integers(1, 7)), draw(st.integers(2, 30))
    scale = draw(st.sampled_from([0.0, 0.1, 1.0, 5.0, 30.0]))
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(B, T, V, generator=g) * scale
    if draw(st.booleans()):
        drop = torch.rand(B, T, V, generator=g) < 0.3
        drop[..., 0] = False
        logits = logits.masked_fill(drop, -math.inf)
    tokens = torch.randint(0, V, (B, T), generator=g)
    mask = torch.rand(B, T, generator=g) < 0.75
    gid = torch.randint(0, 3, (B,), generator=g) * 10 + 4  # sparse, unsorted ids
    return logits.to(dtype), tokens, mask, gid


@settings(deadline=None, max_examples=60)
@given(grouped(), st.sampled_from([0.5, 1.0, 2.0]))
def test_bounds(batch, temperature):
    logits, tokens, mask, gid = batch
    s = token_stats(
        logits, tokens, mask, group_ids=gid, temperature=temperature, divergence="kl", **GP
    )
    n_max = int(torch.bincount(torch.unique(gid, return_inverse=True)[1]).max())
    assert torch.all(s.js >= 0) and torch.all(s.js <= math.log(2) + 1e-6)
    assert torch.all(s.kl >= 0) and torch.all(s.kl <= math.log(n_max) + 1e-5)  # r >= p / G
    for f in FIELDS:
        assert torch.all(getattr(s, f)[~mask] == 0)


@settings(deadline=None, max_examples=40)
@given(grouped(dtype=torch.float64), st.randoms(use_true_random=False))
def test_permuting_rows_permutes_scores(batch, rnd):
    logits, tokens, mask, gid = batch
    perm = list(range(logits.shape[0]))
    rnd.shuffle(perm)
    perm = torch.tensor(perm)
    a = token_stats(logits, tokens, mask, group_ids=gid, divergence="kl", **GP)
    b = token_stats(
        logits[perm], tokens[perm], mask[perm], group_ids=gid[perm], divergence="kl", **GP
    )
    for f in FIELDS:
        torch.testing.assert_close(getattr(b, f), getattr(a, f)[perm], atol=1e-7, rtol=0)


@settings(deadline=None, max_examples=30)
@given(
    st.integers(0, 2**31 - 1), st.integers(2, 5), st.sampled_from([torch.float32, torch.float64])
)
def test_identical_rollouts_score_zero(seed, G, dtype):
    g = torch.Generator().manual_seed(seed)
    row = torch.randn(1, 6, 25, generator=g) * 4
    logits = row.expand(G, -1, -1).to(dtype)
    tokens = torch.randint(0, 25, (1, 6), generator=g).expand(G, -1)
    mask = torch.ones(G, 6, dtype=torch.bool)
    s = token_stats(
        logits, tokens, mask, group_ids=torch.zeros(G, dtype=torch.long), divergence="kl", **GP
    )
    assert s.js.abs().max() <= 1e-6 and s.kl.abs().max() <= 1e-6


@settings(deadline=None, max_examples=40)
@given(grouped(), st.integers(1, 9))
def test_chunk_size_does_not_change_results(batch, chunk_size):
    logits, tokens, mask, gid = batch
    a = token_stats(
        logits, tokens, mask, group_ids=gid, chunk_size=chunk_size, divergence="kl", **GP
    )
    b = token_stats(logits, tokens, mask, group_ids=gid, divergence="kl", **GP)
    c = token_stats(logits, tokens, mask, group_ids=gid, chunk_size=1, divergence="kl", **GP)
    for f in FIELDS:
        torch.testing.assert_close(getattr(a, f), getattr(b, f), atol=2e-6, rtol=0)
        torch.testing.assert_close(getattr(c, f), getattr(b, f), atol=2e-6, rtol=0)


@settings(deadline=None, max_examples=30)
@given(
    st.integers(0, 2**31 - 1),
    st.integers(1, 6),
    st.booleans(),
    st.sampled_from([torch.float32, torch.float64]),
)
def test_hidden_path_equals_logits_path(seed, chunk_size, with_bias, dtype):
    g = torch.Generator().manual_seed(seed)
    B, T, D, V = 5, 6, 8, 33
    hidden = torch.randn(B, T, D, generator=g, dtype=torch.float64).to(dtype)
    W = torch.randn(V, D, generator=g, dtype=torch.float64).to(dtype)
    bias = torch.randn(V, generator=g, dtype=torch.float64).to(dtype) if with_bias else None
    tokens = torch.randint(0, V, (B, T), generator=g)
    mask = torch.rand(B, T, generator=g) < 0.7
    gid = torch.tensor([3, 1, 3, 3, 1])
    logits = hidden @ W.T + (bias if with_bias else 0)
    kw = {"group_ids": gid, "temperature": 0.8, "divergence": "kl", **GP}
    a = token_stats_from_hidden(
        hidden, LogitHead(W, bias), tokens, mask, chunk_size=chunk_size, **kw
    )
    b = token_stats(logits, tokens, mask, **kw)
    atol = 1e-6 if dtype == torch.float64 else 2e-5
    for f in FIELDS:
        torch.testing.assert_close(getattr(a, f), getattr(b, f), atol=atol, rtol=0)


# ---------------------------------------------------------------------------------------------
# Errors


def test_config_and_data_errors():
    logits, tokens, mask, gid = _ragged()
    with pytest.raises(ConfigError, match=r'reference="group_position" needs group_ids=\[B\]'):
        token_stats(logits, tokens, mask, **GP)
    with pytest.raises(
        DataError, match=r"group_ids must be an integer tensor of shape \[B\] = \[6\]"
    ):
        token_stats(logits, tokens, mask, group_ids=gid[:3], **GP)
    with pytest.raises(ConfigError, match=r"unknown divergence 'js2'; choose one of js, kl"):
        token_stats(logits, tokens, mask, group_ids=gid, divergence="js2", **GP)
    with pytest.raises(
        ConfigError,
        match=r'divergence="kl" is implemented for reference="group_position" only, not "batch_mean"',
    ):
        token_stats(logits, tokens, mask, divergence="kl")
    with pytest.raises(ConfigError, match="divergence"):
        token_stats_from_hidden(
            torch.randn(6, 9, 4), LogitHead(torch.randn(17, 4)), tokens, mask, divergence="kl"
        )


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_nan_or_inf_named(bad):
    logits, tokens, mask, gid = _ragged()
    logits[2, 5, 3] = bad
    with pytest.raises(DataError, match=r"row 2, position 5"):
        token_stats(logits, tokens, mask, group_ids=gid, **GP)
    mask[2, 5] = False  # unused position: ignored
    assert torch.isfinite(token_stats(logits, tokens, mask, group_ids=gid, **GP).js).all()


def test_empty_mask():
    logits, tokens, mask, gid = _ragged()
    s = token_stats(logits, tokens, torch.zeros_like(mask), group_ids=gid, divergence="kl", **GP)
    for f in FIELDS:
        assert torch.equal(getattr(s, f), torch.zeros(mask.shape))
