"""Batched sampling with Hugging Face `generate`, returned as padded tensors for training/eval.

Layout of a `Rollout` (N = number of prompts x samples per prompt):
    input_ids [N, P + R]: prompt left-padded to P tokens, then the response right-padded to R.
    response_mask [N, P + R] bool: True on sampled response tokens, up to and including the first
        EOS, or up to the end of the first stop string.
    attention_mask [N, P + R]: prompt tokens and response_mask.
Position t of `input_ids` is predicted by the model output at t - 1 (see docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from ict.models import format_prompt
from ict.seeds import derive_seed


@dataclass
class Rollout:
    """Sampled responses; see the module docstring for the layout."""

    prompt_index: torch.Tensor  # [N] long: index into the prompts list
    input_ids: torch.Tensor  # [N, P + R] long
    attention_mask: torch.Tensor  # [N, P + R] long
    response_mask: torch.Tensor  # [N, P + R] bool
    prompt_length: int  # P, the padded prompt width
    texts: list[str]  # decoded responses (special tokens skipped)
    prompts: list[str]  # the rendered prompts, one per prompt index

    @property
    def response_lengths(self) -> torch.Tensor:
        """[N] long: number of response tokens of each sample."""
        return self.response_mask.sum(dim=1)

    def __len__(self) -> int:
        return self.input_ids.shape[0]


@dataclass(frozen=True)
class Sampling:
    """How responses are sampled and prompts rendered: one value for a run's rollouts, and the
    base of its evaluations' settings (ict.train.evaluation).

    temperature (0: greedy), top_p, max_new_tokens, batch_size (sequences generated at once),
    stop (strings that end a response, kept in it); chat_template, system_prompt: the rendering
    (ict.models.format_prompt: the tokenizer's chat template only when chat_template and the
    tokenizer has one)."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 128
    batch_size: int = 32
    stop: tuple[str, ...] = ()
    chat_template: bool = True
    system_prompt: str | None = None

    @classmethod
    def of(cls, source, **overrides) -> Sampling:
        """The Sampling of any object that holds its fields under their names (an
        ict.eval.EvalSettings, a TrainConfig); `overrides`: the values of fields it names
        otherwise (a TrainConfig's `generation_batch_size` is `batch_size`)."""
        values = {
            f.name: overrides[f.name] if f.name in overrides else getattr(source, f.name)
            for f in dataclasses.fields(cls)
        }
        return cls(**{**values, "stop": tuple(values["stop"])})

    def render(self, tokenizer, prompts: list) -> list[str]:
        """The prompt texts (each a string or chat messages) as the model reads them."""
        return [
            format_prompt(tokenizer, p, system=self.system_prompt, chat_template=self.chat_template)
            for p in prompts
        ]

    def sample(self, model, tokenizer, rendered: list[str], *, num_samples: int, seed: int):
        """`generate` with these settings: `num_samples` responses per rendered prompt."""
        return generate(
            model, tokenizer, rendered, num_samples=num_samples, temperature=self.temperature,
            top_p=self.top_p, max_new_tokens=self.max_new_tokens, batch_size=self.batch_size,
            seed=seed, stop=list(self.stop),
        )  # fmt: skip


def _stop_length(ids: list[int], tokenizer, stop: list[str]) -> int | None:
    """Shortest prefix length of `ids` whose decoded text contains a stop string; None if none does.

    Binary search: the decoded text of a longer prefix contains that of a shorter one.
    """

    def contains_stop(length: int) -> bool:
        text = tokenizer.decode(ids[:length], skip_special_tokens=True)
        return any(s in text for s in stop)

    if not contains_stop(len(ids)):
        return None
    low, high = 1, len(ids)
    while low < high:
        mid = (low + high) // 2
        if contains_stop(mid):
            high = mid
        else:
            low = mid + 1
    return low


def eos_and_pad(model, tokenizer) -> tuple[set[int], int]:
    """(the ids that end a response: the tokenizer's EOS and the generation config's, the pad id:
    the tokenizer's, else an EOS)."""
    eos_ids = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    gen_eos = getattr(model.generation_config, "eos_token_id", None)
    eos_ids |= set(
        gen_eos if isinstance(gen_eos, list) else [gen_eos] if gen_eos is not None else []
    )
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else next(iter(eos_ids))
    return eos_ids, pad_id


def response_texts(
    response_ids: torch.Tensor, tokenizer, eos_ids: set[int], stop: list[str]
) -> tuple[list[str], list[int]]:
    """(decoded texts, token counts) of sampled rows `response_ids` [N, R]: each row through its
    first EOS or the end of its first stop string, special tokens skipped."""
    lengths = _response_lengths(response_ids, tokenizer, eos_ids, stop)
    texts = tokenizer.batch_decode(
        [row[:n] for row, n in zip(response_ids.tolist(), lengths, strict=True)],
        skip_special_tokens=True,
    )
    return texts, lengths


def _response_lengths(response_ids, tokenizer, eos_ids: set[int], stop: list[str]) -> list[int]:
    """Number of sampled tokens per row of `response_ids` [N, R]: through the first EOS, or
    through the end of the first stop string."""
    n, width = response_ids.shape
    is_eos = torch.zeros_like(response_ids, dtype=torch.bool)
    for eos in eos_ids:
        is_eos |= response_ids == eos
    has_eos = is_eos.any(dim=1)
    first_eos = torch.where(has_eos, is_eos.float().argmax(dim=1) + 1, torch.full((n,), width))
    lengths = first_eos.tolist()
    if not stop:
        return lengths
    for row in range(n):
        ids = response_ids[row, : lengths[row]].tolist()
        lengths[row] = _stop_length(ids, tokenizer, stop) or lengths[row]
    return lengths


def _generate_shared_prompts(model, ids, attn, num_samples, share_prompt, sampling):
    """`model.generate` for `ids` [U, P] with `num_samples` samples each -> [U * num_samples, P + R].

    With `share_prompt`, the first P - 1 prompt tokens are encoded once per prompt and their KV cache
    is repeated; generate then feeds only the last prompt token. Positions follow the attention mask,
    as in `generate` itself, so left padding gives the same positions on both paths.
    """
    expanded_ids = ids.repeat_interleave(num_samples, dim=0)
    expanded_attn = attn.repeat_interleave(num_samples, dim=0)
    if not share_prompt or num_samples == 1 or ids.shape[1] < 2:
        return model.generate(input_ids=expanded_ids, attention_mask=expanded_attn, **sampling)
    prefix_attn = attn[:, :-1]
    positions = (prefix_attn.cumsum(-1) - 1).clamp(min=0)
    prefix = model(
        input_ids=ids[:, :-1], attention_mask=prefix_attn, position_ids=positions, use_cache=True
    )
    # transformers >= 5 names the cache `cache`; older releases `past_key_values`
    cache_key = "cache" if "cache" in prefix else "past_key_values"
    cache = prefix[cache_key]
    cache.batch_repeat_interleave(num_samples)
    return model.generate(
        input_ids=expanded_ids, attention_mask=expanded_attn, **{cache_key: cache}, **sampling
    )


def _fast_sampler(model, sampling: dict, pad_id: int):
    """`ict.fast.generate.decode` bound to the sampling settings when the fast path is on and
    supports `model` (ict.fast); else None (HF `generate`)."""
    from ict.fast import lean_for

    lean = lean_for(model)
    if lean is None:
        return None
    from functools import partial

    from ict.fast.generate import decode, eos_of

    return partial(
        decode, lean, temperature=sampling.get("temperature", 0.0) if sampling["do_sample"] else 0.0,
        top_p=sampling.get("top_p", 1.0), max_new_tokens=sampling["max_new_tokens"],
        pad_id=pad_id, eos_ids=eos_of(model),
    )  # fmt: skip


@torch.no_grad()
def generate(
    model,
    tokenizer,
    prompts: list[str],
    *,
    num_samples: int = 1,
    temperature: float = 1.0,
    top_p: float = 1.0,
    max_new_tokens: int = 128,
    batch_size: int = 32,
    seed: int = 0,
    stop: list[str] | None = None,
    share_prompt: bool = True,
) -> Rollout:
    """Sample `num_samples` responses for each already-rendered prompt.

    Args:
        prompts: rendered prompt strings (apply the chat template before; see ict.models.format_prompt).
        num_samples: G, samples per prompt; rows of prompt i are i*G .. i*G + G - 1.
        temperature: 0 means greedy decoding.
        batch_size: sequences generated at once (rounded down to whole groups of num_samples).
        seed: sampling is reproducible from (seed, batch index) and leaves the global RNG untouched.
        stop: strings that end a response (included in it), e.g. ["</answer>"].
        share_prompt: run each prompt through the model once and repeat its KV cache for the
            num_samples samples (the prompt's compute falls by a factor num_samples).
    Returns:
        A `Rollout` whose tensors live on the model's device.
    """
    if not prompts:
        raise ValueError("generate() needs at least one prompt")
    device = next(model.parameters()).device
    eos_ids, pad_id = eos_and_pad(model, tokenizer)
    stop = list(stop or [])

    old_side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    encoded = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    tokenizer.padding_side = old_side
    prompt_ids = encoded["input_ids"].repeat_interleave(num_samples, dim=0)
    prompt_attn = encoded["attention_mask"].repeat_interleave(num_samples, dim=0)
    prompt_index = torch.arange(len(prompts)).repeat_interleave(num_samples)

    sampling = dict(do_sample=temperature > 0, max_new_tokens=max_new_tokens, pad_token_id=pad_id)
    if temperature > 0:
        sampling.update(temperature=temperature, top_p=top_p, top_k=0)
    prompts_per_batch = max(1, batch_size // num_samples)
    was_training = model.training
    model.eval()
    fast = _fast_sampler(model, sampling, pad_id)  # ict.fast, when on and it supports the model
    chunks = []
    for first in range(0, len(prompts), prompts_per_batch):
        ids = encoded["input_ids"][first : first + prompts_per_batch].to(device)
        attn = encoded["attention_mask"][first : first + prompts_per_batch].to(device)
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            torch.manual_seed(derive_seed(seed, first))
            if fast is not None:
                out = fast(ids, attn, num_samples)
            else:
                out = _generate_shared_prompts(
                    model, ids, attn, num_samples, share_prompt, sampling
                )
        chunks.append(out[:, ids.shape[1] :].cpu())
    model.train(was_training)

    width = max(c.shape[1] for c in chunks)
    response_ids = torch.cat(
        [torch.nn.functional.pad(c, (0, width - c.shape[1]), value=pad_id) for c in chunks]
    )
    lengths = torch.tensor(_response_lengths(response_ids, tokenizer, eos_ids, stop))
    resp_mask = torch.arange(width)[None, :] < lengths[:, None]
    response_ids = torch.where(resp_mask, response_ids, torch.full_like(response_ids, pad_id))

    prompt_len = prompt_ids.shape[1]
    input_ids = torch.cat([prompt_ids, response_ids], dim=1)
    response_mask = torch.cat([torch.zeros_like(prompt_ids, dtype=torch.bool), resp_mask], dim=1)
    attention_mask = torch.cat([prompt_attn, resp_mask.long()], dim=1)
    texts = tokenizer.batch_decode(
        [row[: int(n)] for row, n in zip(response_ids, lengths, strict=True)],
        skip_special_tokens=True,
    )
    return Rollout(
        prompt_index=prompt_index.to(device),
        input_ids=input_ids.to(device),
        attention_mask=attention_mask.to(device),
        response_mask=response_mask.to(device),
        prompt_length=prompt_len,
        texts=texts,
        prompts=list(prompts),
    )
