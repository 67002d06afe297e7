"""An interrupted evaluation keeps every problem it finished, however few, and resumes from them
to the same result: the batched path writes a problem to the cache as soon as all its samples
ended, while the rest of its batch decodes on (ict.fast.batched.decode_keyed's `on_done`)."""

import pytest
import torch

from ict.eval.backends import BatchedSampler
from ict.fast.batched import decode_keyed
from ict.fast.keyed import row_keys
from ict.fast.llama import LeanLlama
from ict.files import read_jsonl
from ict.testing import tiny_model_and_tokenizer
from tests.eval.test_batched import _evaluate, _items, _prompts, _settings

EARLY_EOS = list(range(3, 40))  # many ids end a response: most rows end in a few steps


def test_on_done_gives_each_prompt_as_soon_as_its_rows_ended():
    model, tokenizer = tiny_model_and_tokenizer(seed=3)
    ids, attn = _prompts(tokenizer)
    keys = row_keys(torch.arange(100, 106), 4)
    args = dict(temperature=1.3, top_p=1.0, max_new_tokens=12, pad_id=0)
    lean = LeanLlama(model)
    seen = {}
    whole = decode_keyed(
        lean, ids, attn, 4, keys, eos_ids=EARLY_EOS, compact_at=0.5, **args,
        on_done=lambda i, rows: seen.setdefault(i, rows.clone()),
    )  # fmt: skip
    assert torch.equal(whole, decode_keyed(lean, ids, attn, 4, keys, eos_ids=EARLY_EOS, **args))
    assert seen, "no prompt ended early"
    assert any(rows.shape[1] < whole.shape[1] for rows in seen.values())  # before the batch ended
    for i, rows in seen.items():
        final = whole[i * 4 : (i + 1) * 4]
        assert torch.equal(final[:, : rows.shape[1]], rows)
        assert (final[:, rows.shape[1] :] == 0).all()  # only padding after it


class Interrupted(Exception):
    pass


class StopAfter:
    """A stepper that stops the decoding (as Ctrl-C would) after `steps` steps."""

    def __init__(self, inner, steps):
        self.inner, self.left = inner, steps

    def start(self, *args, **kwargs):
        return self.inner.start(*args, **kwargs)

    def step(self, state, tokens):
        self.left -= 1
        if self.left < 0:
            raise Interrupted
        return self.inner.step(state, tokens)


def test_an_evaluation_interrupted_in_its_first_batch_resumes_from_what_it_finished(tmp_path):
    model, tokenizer = tiny_model_and_tokenizer(seed=1)
    model.generation_config.eos_token_id = EARLY_EOS
    items, settings = _items(12), _settings(max_new_tokens=10)
    whole = _evaluate(model, tokenizer, items, settings)

    class Interrupting(BatchedSampler):
        def _stepper(self):
            stepper, autocast = super()._stepper()
            return StopAfter(stepper, 4), autocast

    from ict.eval import run_eval

    out = tmp_path / "eval"
    sampler = Interrupting(model, tokenizer, settings)
    assert sampler.problems_per_batch([i.messages for i in items], settings.n) >= len(items)
    with pytest.raises(Interrupted):  # in the first (and only) batch
        run_eval(sampler, ["chars"], settings, model="tiny", items={"chars": items}, out_dir=out)
    kept = read_jsonl(out / "samples" / "chars.jsonl")
    assert 0 < len(kept) < len(items)  # the problems whose samples had all ended
    resumed = _evaluate(model, tokenizer, items, settings, out_dir=out)
    assert resumed["per_problem"] == whole["per_problem"]
    assert resumed["benchmarks"] == whole["benchmarks"]
