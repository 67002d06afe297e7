"""The batched evaluation path: keyed sampling draws from the model's distribution, its samples do
not depend on the batches, the evaluation resumes exactly and never mixes with the chunked path,
and the two paths give the same pass@k distribution over 512 problems."""

import numpy as np
import pytest
import torch
from scipy import stats

from ict.data import Item
from ict.errors import ConfigError
from ict.eval import EvalSettings, run_eval
from ict.eval.backends import BatchedSampler, HFSampler, hf_sampler
from ict.fast.batched import DecodeTrace, HFStepper, decode_keyed, rows_per_batch
from ict.fast.keyed import row_keys, sample_rows, uniforms
from ict.fast.llama import LeanLlama
from ict.generation import generate
from ict.testing import tiny_model_and_tokenizer


def test_uniforms_are_uniform_and_independent_across_steps_and_rows():
    keys = row_keys(torch.arange(500), 40)  # 20 000 rows
    u0, u1 = uniforms(keys, 0), uniforms(keys, 1)
    assert u0.dtype == torch.float64 and 0 <= u0.min() and u0.max() < 1
    assert stats.kstest(u0.numpy(), "uniform").pvalue > 1e-3
    assert stats.kstest(u1.numpy(), "uniform").pvalue > 1e-3
    assert abs(stats.pearsonr(u0.numpy(), u1.numpy()).statistic) < 0.03
    # neighbouring keys (samples j, j + 1 of a problem) are not correlated either
    assert abs(stats.pearsonr(u0[:-1].numpy(), u0[1:].numpy()).statistic) < 0.03
    assert len(set(keys.tolist())) == len(keys)


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (1.5, 1.0), (0.7, 0.8)])
def test_inverse_cdf_sampling_draws_the_softmax_distribution(temperature, top_p):
    from ict.fast.keyed import top_p_mask

    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, -3.0])
    rows = 30_000
    tokens = sample_rows(
        logits.expand(rows, -1).contiguous(), uniforms(row_keys(torch.arange(rows), 1), 3),
        temperature=temperature, top_p=top_p,
    )  # fmt: skip
    probs = torch.softmax(top_p_mask((logits / temperature)[None], top_p)[0], -1).double()
    counts = torch.bincount(tokens, minlength=len(logits)).double()
    assert counts[probs == 0].sum() == 0  # nothing outside the nucleus
    keep = probs > 0
    chi2 = stats.chisquare(counts[keep].numpy(), (probs[keep] * rows).numpy())
    assert chi2.pvalue > 1e-3


def test_greedy_is_argmax():
    logits = torch.randn(7, 11)
    assert torch.equal(
        sample_rows(logits, torch.rand(7, dtype=torch.float64), temperature=0, top_p=1),
        logits.argmax(-1),
    )


def _prompts(tokenizer, count=6):
    texts = [f"Q:{i}+{3 * i}\nA:" + "x" * (i % 3) for i in range(count)]
    tokenizer.padding_side = "left"
    enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    return enc["input_ids"], enc["attention_mask"]


def _decode(stepper, ids, attn, keys, n=4, **kw):
    args = dict(temperature=1.3, top_p=1.0, max_new_tokens=12, pad_id=0, eos_ids=[2])
    return decode_keyed(stepper, ids, attn, n, keys, **{**args, **kw})


def test_samples_do_not_depend_on_batches_compaction_or_the_stepper():
    model, tokenizer = tiny_model_and_tokenizer(seed=3)
    model.generation_config.eos_token_id = 2
    ids, attn = _prompts(tokenizer)
    keys = row_keys(torch.arange(100, 106), 4)
    lean = LeanLlama(model)
    whole = _decode(lean, ids, attn, keys)
    # rows leave the batch as soon as they end (some do, early)
    trace = DecodeTrace()
    again = _decode(lean, ids, attn, keys, trace=trace, compact_at=0.99)
    assert torch.equal(whole, again) and min(trace.rows) < max(trace.rows)
    assert torch.equal(whole, _decode(lean, ids, attn, keys, compact_at=0.0))
    # in three batches of two prompts (each batch padded to its own width)
    parts = []
    for first in range(0, 6, 2):
        a = attn[first : first + 2]
        cut = int((a.sum(0) == 0).sum())  # columns that are padding in both rows
        parts.append(_decode(lean, ids[first : first + 2, cut:], a[:, cut:], keys[first * 4 :][:8]))
    width = max(p.shape[1] for p in parts)
    parts = [torch.nn.functional.pad(p, (0, width - p.shape[1])) for p in parts]
    assert torch.equal(torch.cat(parts)[:, : whole.shape[1]], whole)
    # the model's own forward and cache (the path of models LeanLlama does not run)
    assert torch.equal(_decode(HFStepper(model), ids, attn, keys), whole)
    # other keys, other samples
    assert not torch.equal(_decode(lean, ids, attn, keys + 1), whole)


def test_rows_per_batch_follows_the_memory_budget():
    model, _ = tiny_model_and_tokenizer(seed=0)
    c = model.config
    per_row = 2 * c.num_hidden_layers * c.num_key_value_heads * 8 * 100 * 4
    per_row += 16 * c.vocab_size + 16 * c.intermediate_size
    assert rows_per_batch(model, 100, 64) == 64 * 2**20 // per_row
    assert rows_per_batch(model, 100, 1e-9) == 1


class CharItem(Item):
    """A problem judged right when the response holds a character of `answer` (which the tiny
    model samples with a probability that differs by prompt)."""

    def reward(self, response, verifier=None):
        return float(any(c in response for c in self.answer))


class FirstCharItem(Item):
    """A problem judged right when the response starts with `answer`."""

    def reward(self, response, verifier=None):
        return float(response[:1] == self.answer)


def _items(count):
    letters = "abcdefghijklmnopqrstuvwxyz0123456789"
    return [
        CharItem(
            str(i), "chars", f"Q:{i}", letters[i % 9 :][:12], [{"role": "user", "content": f"{i}:"}]
        )
        for i in range(count)
    ]


def _settings(**kw):
    base = dict(
        n=8, k=[1, 4], temperature=1.0, max_new_tokens=6, batch_size=64, stop=[],
        chat_template=False, num_bootstrap=50, seed=11,
    )  # fmt: skip
    return EvalSettings(**{**base, **kw})


def _evaluate(model, tokenizer, items, settings, **kw):
    sampler = hf_sampler(model, tokenizer, settings)
    return run_eval(sampler, ["chars"], settings, model="tiny", items={"chars": items}, **kw)


def test_hf_sampler_picks_the_path_of_the_settings():
    model, tokenizer = tiny_model_and_tokenizer(seed=0)
    assert isinstance(hf_sampler(model, tokenizer, _settings()), BatchedSampler)
    assert isinstance(hf_sampler(model, tokenizer, _settings(sampler="chunked")), HFSampler)
    with pytest.raises(ConfigError, match="sampler"):
        _settings(sampler="fast").validate()
    with pytest.raises(ConfigError, match="needs sampler=batched"):
        _settings(sampler="chunked", dtype="bf16").validate()


def test_stored_settings_without_a_sampler_are_the_chunked_path():
    old = _settings().as_dict()
    for name in ("sampler", "memory_mb", "dtype"):
        old.pop(name)
    assert EvalSettings.from_dict(old) == _settings(sampler="chunked")
    # the chunked path's fingerprint is the one it had before the batched path existed
    assert _settings(sampler="chunked").sample_settings() == {
        k: v for k, v in old.items() if k not in ("limit", "k", "num_bootstrap")
    }
    # the batched path's samples do not depend on the batch size or the budget
    a, b = _settings(), _settings(batch_size=7, memory_mb=3)
    assert a.fingerprint("x", "m") == b.fingerprint("x", "m") and a.same_result(b)
    assert a.fingerprint("x", "m") != _settings(sampler="chunked").fingerprint("x", "m")
    assert a.fingerprint("x", "m") != _settings(dtype="bf16").fingerprint("x", "m")


def test_batched_evaluation_resumes_exactly_whatever_the_budget(tmp_path):
    model, tokenizer = tiny_model_and_tokenizer(seed=1)
    items = _items(12)
    whole = _evaluate(model, tokenizer, items, _settings())
    # a first run that stopped after 5 problems (its cache holds them), resumed with a budget
    # that batches the rest otherwise: the same result
    out = tmp_path / "eval"
    _evaluate(model, tokenizer, items[:5], _settings(memory_mb=1), out_dir=out)
    resumed = _evaluate(model, tokenizer, items, _settings(memory_mb=1), out_dir=out)
    assert resumed["per_problem"] == whole["per_problem"]
    assert resumed["benchmarks"] == whole["benchmarks"]
    # the chunked path never reads the batched path's samples
    with pytest.raises(ConfigError, match="other settings"):
        _evaluate(model, tokenizer, items, _settings(sampler="chunked"), out_dir=out)


def _pass_at(result, k):
    from ict.eval.metrics import pass_at_k_per_problem

    per = result["per_problem"]["chars"]
    return pass_at_k_per_problem(np.array(per["n"]), np.array(per["correct"]), k)


def test_the_two_paths_give_the_same_pass_at_k_over_512_problems():
    """Paired by problem (each problem has its own probability of a right sample), the batched
    and the chunked path's pass@1 and pass@4 differ by no more than sampling noise, while the same
    test tells the chunked path at temperature 1 from the chunked path at temperature 1.3 (its power)."""
    model, tokenizer = tiny_model_and_tokenizer(seed=0)
    with torch.no_grad():  # peaked next-token distributions, so that sampling settings matter
        model.lm_head.weight.mul_(20.0)
    items = _items(512)
    # right: the response starts with the model's most likely first character for the prompt
    rendered = _settings().sampling().render(tokenizer, [it.messages for it in items])
    first = generate(model, tokenizer, rendered, temperature=0, max_new_tokens=1).texts
    items = [FirstCharItem(**{**vars(it), "answer": c}) for it, c in zip(items, first, strict=True)]
    chunked = _evaluate(model, tokenizer, items, _settings(sampler="chunked"))
    batched = _evaluate(model, tokenizer, items, _settings())
    other = _evaluate(model, tokenizer, items, _settings(sampler="chunked", temperature=1.3))
    for k in (1, 4):
        a, b, h = _pass_at(chunked, k), _pass_at(batched, k), _pass_at(other, k)
        assert 0.1 < a.mean() < 0.9  # the event is neither rare nor certain
        assert stats.ttest_rel(a, b).pvalue > 1e-3, (k, a.mean(), b.mean())
        assert stats.ttest_rel(a, h).pvalue < 1e-3, (k, a.mean(), h.mean())
