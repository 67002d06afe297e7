"""Hypothesis properties of the token statistics: bounds, symmetry, chunk invariance, hidden path."""

import math

import torch
from hypothesis import given
from hypothesis import strategies as st

from ict.head import LogitHead
from ict.stats import REFERENCES, token_stats, token_stats_from_hidden
from ict.stats import logit_sources as sources_mod


@st.composite
def batches(draw, dtype=torch.float32):
    seed = draw(st.integers(0, 2**31 - 1))
    B, T, V = draw(st.integers(1, 4)), draw(st.integers(1, 6)), draw(st.integers(2, 40))
    scale = draw(st.sampled_from([0.0, 0.1, 1.0, 5.0, 30.0]))
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(B, T, V, generator=g) * scale
    if draw(st.booleans()):  # mask some vocabulary entries with -inf, keeping one finite per row
        drop = torch.rand(B, T, V, generator=g) < 0.3
        drop[..., 0] = False
        logits = logits.masked_fill(drop, -math.inf)
    tokens = torch.randint(0, V, (B, T), generator=g)
    mask = torch.rand(B, T, generator=g) < 0.8
    groups = torch.randint(0, 2, (B,), generator=g)
    return logits.to(dtype), tokens, mask, groups


def _kw(reference, logits, groups):
    if reference in ("group_mean", "group_position"):
        return {"group_ids": groups}
    if reference == "reference_policy":
        return {"reference_logits": logits.flip(1)}
    return {}


@given(batches(), st.sampled_from(REFERENCES), st.sampled_from([0.5, 1.0, 2.0]))
def test_bounds(batch, reference, temperature):
    logits, tokens, mask, groups = batch
    V = logits.shape[-1]
    s = token_stats(
        logits,
        tokens,
        mask,
        reference=reference,
        temperature=temperature,
        **_kw(reference, logits, groups),
    )
    eps = 1e-6
    assert torch.all(s.renyi2 >= 0) and torch.all(s.renyi2 <= s.entropy + eps)
    assert torch.all(s.entropy <= math.log(V) + eps)
    assert torch.all(s.js >= 0) and torch.all(s.js <= math.log(2) + eps)
    assert torch.all(s.logprob <= eps)
    for x in (s.entropy, s.renyi2, s.logprob, s.js):
        assert torch.all(x[~mask] == 0)


@given(batches(dtype=torch.float64), st.integers(0, 2**31 - 1))
def test_js_symmetric_as_a_function(batch, seed):
    """JS(p, q) == JS(q, p): swap policy and reference-policy logits."""
    logits, tokens, mask, _ = batch
    other = (
        torch.randn(
            logits.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64
        )
        * 3
    )
    a = token_stats(logits, tokens, mask, reference="reference_policy", reference_logits=other)
    b = token_stats(other, tokens, mask, reference="reference_policy", reference_logits=logits)
    torch.testing.assert_close(a.js, b.js, atol=1e-6, rtol=0)


@given(batches(), st.sampled_from(REFERENCES), st.integers(1, 7))
def test_chunk_size_does_not_change_results(batch, reference, chunk_size):
    logits, tokens, mask, groups = batch
    kw = _kw(reference, logits, groups)
    a = token_stats(logits, tokens, mask, reference=reference, chunk_size=chunk_size, **kw)
    b = token_stats(logits, tokens, mask, reference=reference, **kw)
    for f in ("entropy", "renyi2", "logprob", "js"):
        torch.testing.assert_close(getattr(a, f), getattr(b, f), atol=2e-6, rtol=0, equal_nan=False)


@given(st.integers(0, 2**31 - 1), st.sampled_from(REFERENCES), st.integers(1, 5), st.booleans())
def test_hidden_path_equals_logits_path(seed, reference, chunk_size, with_bias):
    g = torch.Generator().manual_seed(seed)
    B, T, D, V = 3, 5, 8, 33
    hidden = torch.randn(B, T, D, generator=g, dtype=torch.float64)
    W = torch.randn(V, D, generator=g, dtype=torch.float64)
    bias = torch.randn(V, generator=g, dtype=torch.float64) if with_bias else None
    ref_hidden = torch.randn(B, T, D, generator=g, dtype=torch.float64)
    tokens = torch.randint(0, V, (B, T), generator=g)
    mask = torch.rand(B, T, generator=g) < 0.7
    groups = torch.tensor([0, 1, 0])
    logits = hidden @ W.T + (bias if with_bias else 0)
    kw_h, kw_l = {}, {}
    if reference in ("group_mean", "group_position"):
        kw_h = kw_l = {"group_ids": groups}
    if reference == "reference_policy":
        kw_h = {"reference_hidden": ref_hidden}
        kw_l = {"reference_logits": ref_hidden @ W.T + (bias if with_bias else 0)}
    a = token_stats_from_hidden(
        hidden,
        LogitHead(W, bias),
        tokens,
        mask,
        reference=reference,
        temperature=0.8,
        chunk_size=chunk_size,
        **kw_h,
    )
    b = token_stats(logits, tokens, mask, reference=reference, temperature=0.8, **kw_l)
    for f in ("entropy", "renyi2", "logprob", "js"):
        torch.testing.assert_close(getattr(a, f), getattr(b, f), atol=1e-6, rtol=0)


def test_hidden_path_bf16_accumulates_in_float32():
    """bf16 hidden states and weights: the head matmul accumulates in float32 (METHOD.md), so
    the statistics are those of the float32 product of the bf16 values."""
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(2, 6, 16, generator=g).bfloat16()
    W = (torch.randn(50, 16, generator=g) / 4).bfloat16()
    tokens = torch.randint(0, 50, (2, 6), generator=g)
    mask = torch.ones(2, 6, dtype=torch.bool)
    a = token_stats_from_hidden(hidden, LogitHead(W), tokens, mask, chunk_size=4)
    b = token_stats(hidden.float() @ W.float().T, tokens, mask)
    for f in ("entropy", "renyi2", "logprob", "js"):
        torch.testing.assert_close(getattr(a, f), getattr(b, f), atol=1e-5, rtol=0)


def test_hidden_path_never_builds_more_than_chunk_size_rows(monkeypatch):
    """Every LM-head matmul covers at most chunk_size positions, and every [*, V] buffer has at most
    chunk_size rows: record the shapes of all tensors the sources fill."""
    seen = []
    original = sources_mod.HiddenSource.fill

    def spy(self, rows, positions, out):
        seen.append((rows.numel(), out.shape[0]))
        return original(self, rows, positions, out)

    monkeypatch.setattr(sources_mod.HiddenSource, "fill", spy)
    g = torch.Generator().manual_seed(0)
    hidden, W = torch.randn(4, 10, 8, generator=g), torch.randn(30, 8, generator=g)
    tokens = torch.randint(0, 30, (4, 10), generator=g)
    mask = torch.ones(4, 10, dtype=torch.bool)
    for reference in REFERENCES:
        seen.clear()
        kw = {"reference_hidden": hidden} if reference == "reference_policy" else {}
        if reference in ("group_mean", "group_position"):
            kw |= {"group_ids": torch.tensor([0, 0, 1, 1])}
        token_stats_from_hidden(
            hidden, LogitHead(W), tokens, mask, reference=reference, chunk_size=3, **kw
        )
        assert seen and max(max(n, rows) for n, rows in seen) <= 3
        passes = 2 if reference in ("batch_mean", "group_mean", "sequence_mean") else 1
        models = 2 if reference == "reference_policy" else 1
        if reference == "group_position":  # whole (group, k) cells of 2 rows: one per chunk of 3
            assert len(seen) == 2 * 10
            continue
        # number of matmuls: ceil(needed rows / 3) per pass and model
        needed = 40
        assert len(seen) == passes * models * math.ceil(needed / 3)


def test_works_under_no_grad_and_with_requires_grad_inputs():
    logits = torch.randn(2, 3, 7, requires_grad=True)
    tokens = torch.zeros(2, 3, dtype=torch.long)
    mask = torch.ones(2, 3, dtype=torch.bool)
    with torch.no_grad():
        a = token_stats(logits, tokens, mask)
    b = token_stats(logits, tokens, mask)
    assert not b.js.requires_grad
    torch.testing.assert_close(a.js, b.js)


def test_default_chunk_is_bounded_and_scales_with_n():
    from ict.stats.compute import MAX_CHUNK_BYTES, MIN_CHUNK_BYTES, _plan

    cpu, V = torch.device("cpu"), 151936
    for n in (1, 100, 1024, 4096, 10**6):
        fill, block = _plan(None, V, torch.float32, cpu, False, n)
        assert 1 <= block <= fill and fill * V * 4 <= max(MAX_CHUNK_BYTES, V * 4)
        assert fill * V * 4 >= MIN_CHUNK_BYTES - V * 4  # never tiny: few LM-head matmuls
    assert _plan(None, V, torch.float32, cpu, False, 2048)[0] == 128  # N/16 inside the bounds
    assert _plan(None, V, torch.float32, cpu, False, 10**6)[0] == MAX_CHUNK_BYTES // (V * 4)
    # a bf16 LM head adds a [n, V] bf16 matmul result per row: fewer rows, same bytes (1/16 of full)
    assert _plan(None, V, torch.float32, cpu, False, 2048, V * 2)[0] == math.ceil(2048 * 4 / 16 / 6)
    assert (
        _plan(None, V, torch.float32, cpu, True, 4096)[0]
        == _plan(None, V, torch.float32, cpu, True, 4096)[1]
    )
    assert _plan(5, V, torch.float32, torch.device("meta"), False, 4096) == (
        5,
        5,
    )  # non-CPU: block = chunk
