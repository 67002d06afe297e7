"""Large-batch sampling for evaluation: keyed random numbers, finished rows dropped.

`decode_keyed(stepper, prompt_ids, prompt_attn, n, keys, ...)` samples n continuations of each
left-padded prompt [U, P] as `ict.fast.generate.decode` does (each prompt's first P - 1 tokens
once, their keys/values repeated n times into a static cache, one token per row per step), with
two differences that make a batch of thousands of rows cheap and its samples independent of the
batch:

- each row draws its tokens with its own counter-based uniforms (ict.fast.keyed: row key x step),
  so the samples do not depend on the batch's size or order;
- rows that ended (EOS) leave the batch: when the live rows fall to `compact_at` of the batch's
  rows, the cache keeps only them (`stepper`'s `select`), so finished rows cost nothing later.

A stepper has `start(ids, attn, samples=, max_new_tokens=) -> state`, `step(state, tokens) ->
(logits [M, V] float32, ...)` and `state.select(rows)`: `LeanLlama` (the toy models; float32 or
bfloat16 matmuls) or `HFStepper` (any Hugging Face causal LM with a `Cache` that can select
rows, under the caller's autocast).

`rows_per_batch(model, width, budget_mb)`: how many rows of `width` columns a memory budget holds
(key/value cache, logits and the widest activations).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ict.fast.keyed import sample_rows, uniforms


@dataclass
class DecodeTrace:
    """What a decoding computed (benchmarks/roofline.py counts FLOPs from it): per step, the rows
    run and the cache columns they attended to; the prompts and their padded width."""

    prompts: int = 0
    prompt_width: int = 0
    rows: list[int] = field(default_factory=list)
    columns: list[int] = field(default_factory=list)


class HFStepper:
    """A Hugging Face causal LM as a stepper: the prompt prefix once per prompt, its cache repeated
    per sample (`Cache.batch_repeat_interleave`), one forward per token, finished rows removed with
    `Cache.batch_select_indices`."""

    def __init__(self, model):
        self.model = model

    @torch.no_grad()
    def start(self, prompt_ids, prompt_attn, *, samples: int, max_new_tokens: int):
        from transformers import DynamicCache

        cache = DynamicCache(config=self.model.config)
        if prompt_ids.shape[1] > 1:
            attn = prompt_attn[:, :-1]
            positions = (attn.long().cumsum(-1) - 1).clamp(min=0)
            out = self.model(
                input_ids=prompt_ids[:, :-1], attention_mask=attn, position_ids=positions,
                cache=cache, use_cache=True, logits_to_keep=1,
            )  # fmt: skip
            del out  # the cache was filled in place
            cache.batch_repeat_interleave(samples)
        attn = prompt_attn.long().repeat_interleave(samples, 0)
        return _HFState(cache, attn, attn.sum(-1) - 1, attn.shape[1] - 1)

    @torch.no_grad()
    def step(self, state: _HFState, tokens: torch.Tensor):
        out = self.model(
            input_ids=tokens[:, None], attention_mask=state.attn,
            position_ids=state.position[:, None], cache=state.cache, use_cache=True,
        )  # fmt: skip
        state.attn = torch.cat([state.attn, state.attn.new_ones(state.attn.shape[0], 1)], 1)
        state.position = state.position + 1
        state.column += 1
        return out.logits[:, -1].float(), None


class _HFState:
    def __init__(self, cache, attn, position, column):
        self.cache, self.attn, self.position, self.column = cache, attn, position, column

    def select(self, rows: torch.Tensor) -> None:
        self.cache.batch_select_indices(rows)
        self.attn, self.position = self.attn[rows], self.position[rows]


@torch.no_grad()
def decode_keyed(
    stepper,
    prompt_ids: torch.Tensor,
    prompt_attn: torch.Tensor,
    num_samples: int,
    keys: torch.Tensor,
    *,
    temperature: float,
    top_p: float,
    max_new_tokens: int,
    pad_id: int,
    eos_ids: list[int],
    compact_at: float = 0.75,
    trace: DecodeTrace | None = None,
    on_done: Callable[[int, torch.Tensor], None] | None = None,
) -> torch.Tensor:
    """Sampled tokens [U * G, R] of `num_samples` (G) samples of each prompt [U, P] (rows of
    prompt i: i*G .. i*G + G - 1), each row drawn with its key `keys` [U * G]; pad after a row's
    EOS (kept), R = the steps until every row ended or the budget.

    `on_done(i, tokens [G, r])`: called as soon as every row of prompt i has ended at an EOS
    (r = the steps so far; the rows equal the returned ones up to their padding), while the
    other prompts decode on, so that a caller keeps what is finished (an evaluation's cache)."""
    u_prompts = prompt_ids.shape[0]
    n = u_prompts * num_samples
    state = stepper.start(
        prompt_ids, prompt_attn, samples=num_samples, max_new_tokens=max_new_tokens
    )
    device = prompt_ids.device
    out = torch.full((n, max_new_tokens), pad_id, dtype=torch.long, device=device)
    eos = torch.tensor(eos_ids, dtype=torch.long, device=device)
    rows = torch.arange(n, device=device)  # the original row of each row in the batch
    alive = torch.ones(n, dtype=torch.bool, device=device)  # rows of the batch still sampling
    tokens = prompt_ids[:, -1].repeat_interleave(num_samples)
    keys = keys.long().to(device)
    live, steps = n, 0
    ended = torch.zeros(n, dtype=torch.bool, device=device)  # by original row
    reported = torch.zeros(u_prompts, dtype=torch.bool)  # prompts given to on_done
    if trace is not None:
        trace.prompts, trace.prompt_width = u_prompts, prompt_ids.shape[1]
    for step in range(max_new_tokens):
        if trace is not None:
            trace.rows.append(int(rows.shape[0]))
            trace.columns.append(int(state.column) + 1)
        logits = stepper.step(state, tokens)[0]
        tokens = sample_rows(
            logits, uniforms(keys[rows], step), temperature=temperature, top_p=top_p
        )
        steps = step + 1
        if live == rows.shape[0]:
            out[rows, step] = tokens
        else:
            out[rows[alive], step] = tokens[alive]
        if not eos.numel():
            continue
        alive &= ~torch.isin(tokens, eos)
        live = int(alive.sum())
        if on_done is not None and live < rows.shape[0]:
            ended[rows[~alive]] = True
            finished = ended.view(u_prompts, num_samples).all(1).cpu() & ~reported
            for i in finished.nonzero().squeeze(1).tolist():
                on_done(i, out[i * num_samples : (i + 1) * num_samples, :steps])
            reported |= finished
        if live == 0:
            break
        if live <= compact_at * rows.shape[0]:
            keep = alive.nonzero().squeeze(1)
            state.select(keep)
            rows, tokens = rows[keep], tokens[keep]
            alive = torch.ones(live, dtype=torch.bool, device=device)
    return out[:, :steps]


def rows_per_batch(model, width: int, budget_mb: float, dtype_bytes: int = 4) -> int:
    """Rows of `width` (prompt + response) columns whose decoding fits in `budget_mb` MiB: per row
    the key/value cache of every layer, the logits (and the sampler's copies: 4 x vocab) and the
    widest activations (4 x the MLP width); at least 1."""
    c = model.config
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    kv_heads = getattr(c, "num_key_value_heads", None) or c.num_attention_heads
    cache = 2 * c.num_hidden_layers * kv_heads * head_dim * width * dtype_bytes
    work = 4 * 4 * c.vocab_size + 4 * 4 * c.intermediate_size
    return max(1, int(budget_mb * 2**20 // (cache + work)))
