"""Chunked log-probs from hidden states match the full log-softmax, values and gradients."""

import pytest
import torch

from ict.head import LogitHead
from ict.train.logprobs import position_ids_from_mask, shifted_hidden, token_logprobs_from_hidden


def reference(hidden, weight, bias, tokens, mask, temperature):
    logits = (hidden.float() @ weight.float().T + bias) / temperature
    logp = torch.log_softmax(logits, -1)
    chosen = logp.gather(-1, tokens[..., None]).squeeze(-1)
    ent = -(logp.exp() * logp).sum(-1)
    return chosen * mask, ent * mask


@pytest.mark.parametrize("chunk_size", [1, 3, 1000])
def test_matches_full_log_softmax_and_its_gradient(chunk_size):
    g = torch.Generator().manual_seed(0)
    B, T, D, V = 3, 5, 4, 11
    hidden = torch.randn(B, T, D, generator=g, requires_grad=True)
    weight = torch.randn(V, D, generator=g, requires_grad=True)
    bias = torch.randn(V, generator=g)
    tokens = torch.randint(0, V, (B, T), generator=g)
    mask = torch.rand(B, T, generator=g) > 0.4
    lp, ent = token_logprobs_from_hidden(
        hidden,
        LogitHead(weight, bias),
        tokens,
        mask,
        temperature=0.7,
        chunk_size=chunk_size,
        with_entropy=True,
    )
    ref_lp, ref_ent = reference(hidden, weight, bias, tokens, mask, 0.7)
    torch.testing.assert_close(lp, ref_lp)
    torch.testing.assert_close(ent, ref_ent)
    assert (lp[~mask] == 0).all()
    coeff = torch.randn(B, T, generator=g)
    grads = torch.autograd.grad((lp * coeff).sum() + ent.sum(), (hidden, weight))
    ref_grads = torch.autograd.grad((ref_lp * coeff).sum() + ref_ent.sum(), (hidden, weight))
    for a, b in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(a, b)


def test_empty_mask_gives_zeros():
    hidden = torch.randn(2, 3, 4)
    out, ent = token_logprobs_from_hidden(
        hidden,
        LogitHead(torch.randn(7, 4)),
        torch.zeros(2, 3, dtype=torch.long),
        torch.zeros(2, 3, dtype=torch.bool),
    )
    assert out.shape == (2, 3) and (out == 0).all() and ent is None


def test_shift_and_positions():
    h = torch.arange(6.0).reshape(1, 3, 2)
    assert shifted_hidden(h).tolist() == [[[0, 0], [0, 1], [2, 3]]]
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 0]])
    assert position_ids_from_mask(mask).tolist() == [[0, 0, 0, 1, 2], [0, 1, 2, 3, 3]]


def test_policy_logprobs_match_model_logits():
    """On a real (tiny) model: the hidden-state path equals log_softmax of the model's own logits."""
    from ict.testing import tiny_model_and_tokenizer
    from ict.train.logprobs import policy_logprobs

    model, _ = tiny_model_and_tokenizer(seed=0)
    model.eval()
    ids = torch.randint(10, 90, (2, 6), generator=torch.Generator().manual_seed(1))
    attn = torch.ones_like(ids)
    attn[0, :2] = 0  # left padding
    mask = torch.zeros_like(ids, dtype=torch.bool)
    mask[:, 3:] = True
    lp, _ = policy_logprobs(model, ids, attn, mask, temperature=1.0)
    with torch.no_grad():
        logits = model(
            input_ids=ids, attention_mask=attn, position_ids=position_ids_from_mask(attn)
        ).logits
    ref = torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    torch.testing.assert_close(lp[:, 1:][mask[:, 1:]], ref[mask[:, 1:]], atol=1e-5, rtol=1e-5)


def test_shared_prompt_forward_equals_plain_forward_values_and_gradients():
    """Groups of G rows with one left-padded prompt each: prompt computed once, same result."""
    from ict.testing import tiny_model_and_tokenizer
    from ict.train.logprobs import final_hidden, shared_prompt_hidden

    model, _ = tiny_model_and_tokenizer(seed=0)
    g = torch.Generator().manual_seed(0)
    G, P, R = 3, 5, 4
    prompts = torch.randint(10, 90, (2, P), generator=g)
    prompt_attn = torch.ones(2, P, dtype=torch.long)
    prompt_attn[1, :2] = 0  # the second prompt is shorter (left padding)
    ids = torch.cat(
        [prompts.repeat_interleave(G, 0), torch.randint(10, 90, (2 * G, R), generator=g)], 1
    )
    attn = torch.cat(
        [prompt_attn.repeat_interleave(G, 0), torch.ones(2 * G, R, dtype=torch.long)], 1
    )
    attn[0, -2:] = 0  # a response that ended early (right padding)
    weights = torch.randn(2 * G, P + R, 32, generator=g) * attn[..., None]
    outs = []
    for fn in (
        lambda: final_hidden(model, ids, attn),
        lambda: shared_prompt_hidden(model, ids, attn, P, G),
    ):
        model.zero_grad()
        hidden = fn()
        (hidden * weights).sum().backward()
        grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
        outs.append((hidden.detach() * attn[..., None], grads))
    torch.testing.assert_close(outs[0][0], outs[1][0], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(outs[0][1], outs[1][1], atol=1e-5, rtol=1e-4)


def test_update_logprobs_equal_scoring_logprobs_bit_for_bit_with_a_logit_transform():
    """Gemma-2 soft-caps its logits: the update's log-probs (policy_logprobs, with gradient,
    checkpointed) and the scoring pass's (token_logprobs_from_hidden under no_grad, with the
    model's logit_head) are the same bits, so the first importance ratio is exactly 1; both are
    the model's own distribution, not the plain head's."""
    import transformers

    from ict.head import logit_head
    from ict.train.logprobs import final_hidden, policy_logprobs

    torch.manual_seed(0)
    config = transformers.Gemma2Config(
        vocab_size=97,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        final_logit_softcapping=2.0,
    )
    model = transformers.Gemma2ForCausalLM(config)
    with torch.no_grad():
        model.lm_head.weight.mul_(40)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 97, (3, 8), generator=g)
    attn = torch.ones_like(ids)
    attn[1, :3] = 0
    mask = torch.zeros_like(ids, dtype=torch.bool)
    mask[:, 4:] = True
    head = logit_head(model)
    with torch.no_grad():
        hidden = shifted_hidden(final_hidden(model, ids, attn))
        old, _ = token_logprobs_from_hidden(hidden, head, ids, mask, temperature=0.9, chunk_size=5)
        plain, _ = token_logprobs_from_hidden(
            hidden, LogitHead(head.weight), ids, mask, temperature=0.9
        )
    new, _ = policy_logprobs(model, ids, attn, mask, temperature=0.9, chunk_size=5)
    assert new.requires_grad
    assert torch.equal(torch.exp(new.detach() - old)[mask], torch.ones(int(mask.sum())))
    assert (plain - old)[mask].abs().max() > 0.1  # the plain head is another distribution
    with torch.no_grad():
        logits = model(
            input_ids=ids, attention_mask=attn, position_ids=position_ids_from_mask(attn)
        ).logits
    ref = torch.log_softmax(logits[:, :-1] / 0.9, -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    torch.testing.assert_close(old[:, 1:][mask[:, 1:]], ref[mask[:, 1:]], atol=2e-5, rtol=1e-5)
