"""Bad input gets a clear error that names the problem (and where it is)."""

import math

import pytest
import torch

from ict.errors import ConfigError, DataError
from ict.head import LogitHead
from ict.stats import masked_mean, token_stats, token_stats_from_hidden


def _inputs(B=2, T=4, V=9):
    logits = torch.randn(B, T, V)
    tokens = torch.zeros(B, T, dtype=torch.long)
    mask = torch.ones(B, T, dtype=torch.bool)
    return logits, tokens, mask


@pytest.mark.parametrize(
    "reference", ["batch_mean", "sequence_mean", "previous_token", "reference_policy"]
)
@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_nan_or_inf_logits_name_row_and_position(reference, bad):
    logits, tokens, mask = _inputs()
    logits[1, 2, 3] = bad
    kw = {"reference_logits": torch.randn(logits.shape)} if reference == "reference_policy" else {}
    with pytest.raises(ValueError, match=r"row 1, position 2"):
        token_stats(logits, tokens, mask, reference=reference, **kw)


def test_all_minus_inf_row_is_an_error_and_masked_nan_is_ignored():
    logits, tokens, mask = _inputs()
    logits[0, 1] = -math.inf
    with pytest.raises(DataError, match=r"row 0, position 1"):
        token_stats(logits, tokens, mask)
    mask[0, 1] = False  # the bad position is not used by batch_mean
    assert torch.isfinite(token_stats(logits, tokens, mask).js).all()


def test_reference_logits_nan_named():
    logits, tokens, mask = _inputs()
    ref = torch.randn(logits.shape)
    ref[0, 3, 0] = math.nan
    with pytest.raises(DataError, match=r"reference logits at \(row 0, position 3\)"):
        token_stats(logits, tokens, mask, reference="reference_policy", reference_logits=ref)


def test_hidden_nan_named():
    hidden, W = torch.randn(2, 3, 4), torch.randn(7, 4)
    hidden[1, 0, 0] = math.nan
    with pytest.raises(DataError, match=r"row 1, position 0"):
        token_stats_from_hidden(
            hidden,
            LogitHead(W),
            torch.zeros(2, 3, dtype=torch.long),
            torch.ones(2, 3, dtype=torch.bool),
        )


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"reference": "batch-mean"}, "unknown reference 'batch-mean'; choose one of batch_mean"),
        ({"temperature": 0.0}, "temperature must be a finite number > 0"),
        ({"temperature": math.nan}, "temperature"),
        ({"reference": "group_mean"}, "needs group_ids"),
        ({"reference": "reference_policy"}, "needs reference_logits"),
        ({"reference_logits": torch.randn(2, 4, 9)}, 'only used with reference="reference_policy"'),
        ({"chunk_size": 0}, "chunk_size must be a positive int"),
    ],
)
def test_config_errors(kwargs, match):
    logits, tokens, mask = _inputs()
    with pytest.raises(ConfigError, match=match):
        token_stats(logits, tokens, mask, **kwargs)


def test_data_errors():
    logits, tokens, mask = _inputs()
    with pytest.raises(DataError, match=r"logits must be \[B, T, V\]"):
        token_stats(logits[0], tokens, mask)
    with pytest.raises(DataError, match=r"must both be \[B, T\]"):
        token_stats(logits, tokens[:, :2], mask)
    bad_tokens = tokens.clone()
    bad_tokens[1, 3] = 9
    with pytest.raises(
        DataError, match=r"token id 9 at \(row 1, position 3\) is outside the vocabulary \[0, 9\)"
    ):
        token_stats(logits, bad_tokens, mask)
    with pytest.raises(DataError, match="group_ids must be an integer tensor of shape"):
        token_stats(
            logits, tokens, mask, reference="group_mean", group_ids=torch.zeros(3, dtype=torch.long)
        )
    with pytest.raises(DataError, match="reference_logits has shape"):
        token_stats(
            logits,
            tokens,
            mask,
            reference="reference_policy",
            reference_logits=torch.randn(2, 4, 8),
        )
    with pytest.raises(DataError, match=r"the head's weight must be \[V, D\]"):
        token_stats_from_hidden(torch.randn(2, 4, 5), LogitHead(torch.randn(9, 4)), tokens, mask)
    with pytest.raises(DataError, match="head must be an ict.head.LogitHead"):
        token_stats_from_hidden(torch.randn(2, 4, 5), torch.randn(9, 5), tokens, mask)


def test_masked_mean():
    x = torch.tensor([[1.0, 2.0, 100.0], [3.0, 4.0, 200.0]])
    m = torch.tensor([[1, 1, 0], [1, 1, 0]], dtype=torch.bool)
    assert masked_mean(x, m).item() == pytest.approx(2.5)
    assert math.isnan(masked_mean(x, torch.zeros_like(m)).item())
    assert masked_mean(x, torch.zeros_like(m), empty=0.0).item() == 0.0
    with pytest.raises(ValueError, match="same shape"):
        masked_mean(x, m[0])
