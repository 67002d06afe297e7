"""Old-policy statistics from verl-layout logits: the rows, and the values against references."""

import math

import pytest
import torch

pytest.importorskip("verl")
from verl_helpers import packed_logits, verl_batch  # noqa: E402

from ict.integrations.verl.hooks import _OldPolicyPass, score_micro_batch  # noqa: E402
from ict.integrations.verl.stats import chunked_token_stats, response_rows  # noqa: E402

pytestmark = pytest.mark.verl


def _batch(B=3, R=5, V=11, seed=0):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, V, (B, R), generator=g)
    lengths = torch.tensor([R, 2, 4])[:B]
    mask = torch.arange(R)[None, :] < lengths[:, None]
    logits = torch.randn(B, R, V, generator=g) * 2
    return tokens, mask, logits, [3, 1, 2][:B]


@pytest.mark.parametrize("padded", [False, True])
def test_rows_match_verls_no_padding_2_padding(padded):
    """A value placed at each scored row comes back at its (row, column) through verl's own
    no_padding_2_padding, the conversion verl applies to log_probs."""
    from verl.workers.utils.padding import no_padding_2_padding

    tokens, mask, _, prompt_lens = _batch()
    td = verl_batch(prompt_lens, tokens, mask, vocab=11)
    seq_lens = td["input_ids"].offsets().diff()
    L = int(seq_lens.max())
    rows = response_rows(seq_lens, mask.sum(-1), mask, padded_width=L if padded else None)
    assert rows.flat.numel() == int(mask.sum())
    code = (rows.batch * 100 + rows.column + 1).float()  # distinct per (row, column)
    packed = torch.zeros(int(seq_lens.sum()))
    packed[rows.packed] = code
    nested = torch.nested.nested_tensor_from_jagged(packed, td["input_ids"].offsets())
    back = no_padding_2_padding(nested, td)
    want = torch.where(mask, torch.arange(3)[:, None] * 100 + torch.arange(5)[None, :] + 1, 0)
    assert torch.equal(back, want.float())
    if padded:  # flat index into [B, L] is b * L + t
        assert torch.equal(
            rows.flat, rows.batch * L + (rows.packed - (seq_lens.cumsum(0) - seq_lens)[rows.batch])
        )


def test_chunked_stats_match_scipy_and_are_chunk_invariant():
    from scipy.spatial.distance import jensenshannon
    from scipy.stats import entropy as scipy_entropy

    g = torch.Generator().manual_seed(3)
    logits = torch.randn(9, 13, generator=g, dtype=torch.float64).float() * 2
    rows = torch.tensor([0, 2, 3, 7, 8])
    T = torch.full((5,), 0.7)
    first = chunked_token_stats(logits, rows, T, chunk_size=2)
    p = torch.softmax(logits[rows].double() / 0.7, -1)
    assert torch.allclose(first["prob_sum"].double(), p.sum(0), atol=1e-6)
    r = first["prob_sum"] / 5
    second = chunked_token_stats(logits, rows, T, reference=r, chunk_size=3)
    for i in range(5):
        pi = p[i].numpy()
        assert first["entropy"][i].item() == pytest.approx(scipy_entropy(pi), abs=1e-5)
        assert first["renyi2"][i].item() == pytest.approx(-math.log((pi**2).sum()), abs=1e-5)
        assert second["js"][i].item() == pytest.approx(
            jensenshannon(pi, r.double().numpy()) ** 2, abs=1e-5
        )
    assert torch.allclose(second["entropy"], first["entropy"])  # chunk size does not matter


@pytest.mark.parametrize("padded", [False, True])
def test_two_pass_scores_match_ict_stats_batch_mean(padded):
    """Pass 1 (H, H2, sum p) + reference + pass 2 (JS) on the verl layout give ict.stats.token_stats
    with reference=batch_mean on the [B, R] layout, at temperature 0.8."""
    from verl.workers.utils.padding import no_padding_2_padding

    from ict.stats import token_stats

    tokens, mask, logits, prompt_lens = _batch(seed=5)
    td = verl_batch(prompt_lens, tokens, mask, vocab=11)
    td["temperature"] = torch.full((3,), 0.8)
    if padded:
        from verl.utils import tensordict_utils as tu

        tu.assign_non_tensor(td, use_remove_padding=False)
    full = packed_logits(td, logits, padded=padded)
    first = _OldPolicyPass(chunk_size=4)
    out1 = score_micro_batch(first, full, td)
    second = _OldPolicyPass(chunk_size=4, reference=first.prob_sum / first.count)
    out2 = score_micro_batch(second, full, td)
    offsets = td["input_ids"].offsets()

    def padded_(values):
        return no_padding_2_padding(torch.nested.nested_tensor_from_jagged(values, offsets), td)

    want = token_stats(logits, tokens, mask, temperature=0.8, reference="batch_mean")
    torch.testing.assert_close(padded_(out1["ict_entropy"]), want.entropy, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(padded_(out1["ict_renyi2"]), want.renyi2, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(padded_(out2["ict_js"]), want.js, atol=1e-5, rtol=1e-5)
    assert first.count == int(mask.sum())
