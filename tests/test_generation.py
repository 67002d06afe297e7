import torch

from ict.generation import generate
from ict.models import format_prompt
from ict.testing import tiny_model_and_tokenizer


def _prompts(tokenizer):
    return [format_prompt(tokenizer, "1+2="), format_prompt(tokenizer, "a much longer prompt")]


def test_layout_masks_and_reproducibility():
    model, tok = tiny_model_and_tokenizer()
    prompts = _prompts(tok)
    r = generate(model, tok, prompts, num_samples=3, max_new_tokens=10, seed=3, batch_size=4)
    assert r.input_ids.shape[0] == 6 and len(r) == 6
    assert r.prompt_index.tolist() == [0, 0, 0, 1, 1, 1]
    # no response token inside the prompt block; masks agree with attention
    assert not r.response_mask[:, : r.prompt_length].any()
    assert torch.equal(
        r.attention_mask[:, r.prompt_length :].bool(), r.response_mask[:, r.prompt_length :]
    )
    # response tokens are contiguous from the start of the response block
    resp = r.response_mask[:, r.prompt_length :]
    lengths = resp.sum(1)
    assert torch.equal(resp, torch.arange(resp.shape[1])[None] < lengths[:, None])
    # decoded texts match the masked tokens
    for row, text in zip(range(6), r.texts, strict=True):
        ids = r.input_ids[row][r.response_mask[row]]
        assert tok.decode(ids, skip_special_tokens=True) == text
    again = generate(model, tok, prompts, num_samples=3, max_new_tokens=10, seed=3, batch_size=4)
    assert torch.equal(r.input_ids, again.input_ids)
    other = generate(model, tok, prompts, num_samples=3, max_new_tokens=10, seed=4, batch_size=4)
    assert not torch.equal(r.input_ids, other.input_ids)


def test_global_rng_untouched_and_greedy_is_deterministic():
    model, tok = tiny_model_and_tokenizer()
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    generate(model, tok, _prompts(tok), num_samples=2, max_new_tokens=5, seed=0)
    assert torch.equal(torch.rand(3), expected)
    a = generate(model, tok, _prompts(tok), num_samples=2, max_new_tokens=6, temperature=0, seed=0)
    b = generate(model, tok, _prompts(tok), num_samples=2, max_new_tokens=6, temperature=0, seed=9)
    assert torch.equal(a.input_ids, b.input_ids)
    assert torch.equal(a.input_ids[0], a.input_ids[1])  # greedy: both samples identical


def test_eos_ends_response_and_is_included():
    model, tok = tiny_model_and_tokenizer()
    # an LM head that always prefers EOS: every response is exactly [EOS]
    head = torch.nn.Linear(model.config.hidden_size, model.config.vocab_size, bias=True)
    with torch.no_grad():
        head.weight.zero_()
        head.bias.zero_()
        head.bias[tok.eos_token_id] = 100.0
    model.lm_head = head
    r = generate(model, tok, _prompts(tok), num_samples=2, max_new_tokens=5, seed=0)
    assert r.response_lengths.tolist() == [1, 1, 1, 1]
    assert (r.input_ids[:, r.prompt_length] == tok.eos_token_id).all()
    assert r.texts == ["", "", "", ""]


def test_stop_string_truncates_response():
    model, tok = tiny_model_and_tokenizer()
    r = generate(model, tok, _prompts(tok), num_samples=4, max_new_tokens=30, seed=0)
    # choose a character that appears mid-response in some sample, then stop on it
    text = next(t for t in r.texts if len(t) > 3)
    stop_char = text[2]
    s = generate(
        model, tok, _prompts(tok), num_samples=4, max_new_tokens=30, seed=0, stop=[stop_char]
    )
    for full, cut in zip(r.texts, s.texts, strict=True):
        if stop_char in full:
            assert cut == full[: full.index(stop_char) + 1]
        else:
            assert cut == full


def test_shared_prompt_cache_gives_the_same_samples():
    model, tok = tiny_model_and_tokenizer(seed=2)
    model.double()  # float64: the two paths agree to rounding, so sampled tokens agree
    prompts = _prompts(tok) + [format_prompt(tok, "7")]  # three lengths: left padding differs
    kwargs = dict(num_samples=3, max_new_tokens=12, seed=5, batch_size=6)
    shared = generate(model, tok, prompts, share_prompt=True, **kwargs)
    plain = generate(model, tok, prompts, share_prompt=False, **kwargs)
    assert torch.equal(shared.input_ids, plain.input_ids)
    assert shared.texts == plain.texts
    greedy = dict(kwargs, temperature=0)
    assert torch.equal(
        generate(model, tok, prompts, share_prompt=True, **greedy).input_ids,
        generate(model, tok, prompts, share_prompt=False, **greedy).input_ids,
    )


def test_shared_prompt_feeds_each_prompt_once():
    model, tok = tiny_model_and_tokenizer()
    seen = []
    model.model.embed_tokens.register_forward_hook(
        lambda mod, inp, out: seen.append(tuple(inp[0].shape))
    )
    prompts = _prompts(tok)
    width = tok(prompts, padding=True, return_tensors="pt")["input_ids"].shape[1]
    generate(model, tok, prompts, num_samples=4, max_new_tokens=3, batch_size=8)
    assert seen[0] == (2, width - 1)  # the distinct prompts, once, without their last token
    assert seen[1] == (8, 1)  # then every sample starts from the last prompt token
