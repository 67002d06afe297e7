"""ict.fast: with the fast path on, `ict.generation.generate` samples exactly what HF `generate`
samples (same ids, masks and texts), and it falls back to HF where it does not apply."""

import pytest
import torch

import ict.generation as generation
from ict.fast import fast_path, lean_for, why_not
from ict.fast.generate import decode, eos_of
from ict.fast.llama import LeanLlama
from ict.testing import tiny_model_and_tokenizer

PROMPTS = ["Q:4705+3862\nA:", "Q:1+2\nA:", "a much longer prompt than the others", "x"]


def eos_prone_model(**config):
    """The tiny Llama with its EOS logit raised, so that rows end at different steps."""
    model, tok = tiny_model_and_tokenizer(seed=1, **config)
    with torch.no_grad():
        w = model.lm_head.weight
        ids = torch.randint(10, 90, (8, 12), generator=torch.Generator().manual_seed(0))
        h = model(input_ids=ids, output_hidden_states=True).hidden_states[-1].flatten(0, 1)
        w[tok.eos_token_id] = h.mean(0) / h.mean(0).norm() * 6 * w.norm(dim=1).mean()
    return model, tok


def both_paths(model, tok, prompts, **kw):
    with fast_path(False):
        slow = generation.generate(model, tok, prompts, **kw)
    with fast_path(True):
        fast = generation.generate(model, tok, prompts, **kw)
    return slow, fast


def assert_same_rollout(slow, fast):
    assert torch.equal(slow.input_ids, fast.input_ids)
    assert torch.equal(slow.response_mask, fast.response_mask)
    assert torch.equal(slow.attention_mask, fast.attention_mask)
    assert slow.texts == fast.texts and slow.prompt_length == fast.prompt_length


@pytest.mark.parametrize(
    "kw",
    [
        dict(num_samples=4, temperature=1.0, batch_size=8),  # two batches, shared prompts
        dict(num_samples=3, temperature=0.7, top_p=0.9, batch_size=64),  # warpers
        dict(num_samples=1, temperature=1.0, batch_size=2),  # no group to share
        dict(num_samples=1, temperature=0.0, batch_size=64),  # greedy
        dict(num_samples=2, temperature=1.0, batch_size=4, stop=["+"]),  # stop strings
    ],
)
def test_fast_sampling_equals_hf_generate(kw):
    model, tok = eos_prone_model()
    slow, fast = both_paths(model, tok, PROMPTS, max_new_tokens=12, seed=5, **kw)
    assert_same_rollout(slow, fast)
    lengths = fast.response_lengths
    if kw["temperature"] > 0:  # rows end at different steps: EOS handling is exercised
        assert lengths.min() < lengths.max()


def test_fast_path_replaces_hf_generate(monkeypatch):
    """Not a vacuous equality: with the path on, HF `generate` is never called."""
    model, tok = eos_prone_model()

    def refuse(*a, **k):
        raise AssertionError("HF generate called while the fast path is on")

    monkeypatch.setattr(generation, "_generate_shared_prompts", refuse)
    with fast_path():
        out = generation.generate(model, tok, PROMPTS[:2], num_samples=2, max_new_tokens=6)
    assert out.input_ids.shape[0] == 4
    with pytest.raises(AssertionError, match="HF generate called"):
        generation.generate(model, tok, PROMPTS[:2], num_samples=2, max_new_tokens=6)


def test_decode_logits_and_hidden_match_the_model():
    """Each step's logits are the model's own next-token logits for the sampled prefix, and the
    kept hidden states are its final hidden states there (float32 rounding)."""
    model, tok = eos_prone_model()
    tok.padding_side = "left"
    enc = tok(PROMPTS[:2], return_tensors="pt", padding=True, add_special_tokens=False)
    torch.manual_seed(0)
    ids, hidden = decode(
        LeanLlama(model), enc["input_ids"], enc["attention_mask"], 3, temperature=1.0, top_p=1.0,
        max_new_tokens=5, pad_id=tok.pad_token_id, eos_ids=[], keep_hidden=True,
    )  # fmt: skip
    p = enc["input_ids"].shape[1]
    attn = torch.cat(
        [enc["attention_mask"].repeat_interleave(3, 0), torch.ones(6, ids.shape[1] - p)], 1
    ).long()
    with torch.no_grad():
        out = model(
            input_ids=ids, attention_mask=attn, position_ids=(attn.cumsum(-1) - 1).clamp(min=0),
            output_hidden_states=True,
        )  # fmt: skip
    expected = out.hidden_states[-1][:, p - 1 : -1]
    torch.testing.assert_close(hidden, expected, atol=1e-5, rtol=1e-5)


def test_unsupported_models_and_settings_fall_back_to_hf():
    model, tok = tiny_model_and_tokenizer(seed=0)
    assert why_not(model) is None and eos_of(model) == [tok.eos_token_id]
    model.generation_config.min_new_tokens = 3
    assert "min_new_tokens" in why_not(model)
    with fast_path():
        assert (
            lean_for(model) is None
        )  # HF generate applies min_new_tokens; the lean loop would not
        out = generation.generate(model, tok, PROMPTS[:1], num_samples=2, max_new_tokens=5)
    assert out.response_lengths.min() >= 3
    biased, _ = tiny_model_and_tokenizer(seed=0)
    biased.config.attention_bias = True
    assert "attention bias" in why_not(biased)
    eager, _ = tiny_model_and_tokenizer(seed=0)
    eager.config._attn_implementation = "eager"
    assert "attention other than sdpa" in why_not(eager)
    assert lean_for(tiny_model_and_tokenizer()[0]) is None  # the path is off by default
    half, _ = tiny_model_and_tokenizer(seed=0)
    assert "bfloat16" in why_not(half.to(torch.bfloat16))
    with fast_path(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert lean_for(tiny_model_and_tokenizer()[0]) is None
