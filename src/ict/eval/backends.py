"""Samplers: chat messages -> n sampled responses per prompt, as (text, number of tokens).

A sampler is anything with `sample(prompts, *, n, seed)` (`Sampler`); an evaluation builds one per
model with a `SamplerFactory` `(model, tokenizer, settings) -> Sampler`, which tests replace with a
scripted one (`Evaluation(sampler_factory=...)`, `train(..., sampler_factory=...)`).

`BatchedSampler` (the batched path, `EvalSettings.sampler` "batched") decodes thousands of
samples at once with keyed random numbers (ict.fast.batched); `HFSampler` (the chunked path) uses
`ict.generation.generate` (batched HF `generate`, any device); `hf_sampler` is the factory of
both; `VLLMSampler` uses vLLM when it is installed (GPU users). Both render prompts as training
does (`ict.models.format_prompt` with the settings' chat_template and system_prompt) and are
deterministic given `seed` per call, so the eval cache (one call per fixed chunk of problems) does
not change what is sampled.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ict.errors import ConfigError
from ict.eval.settings import EvalSettings
from ict.models import format_prompt

Messages = list[dict]


class Sampler(Protocol):
    """Samples `n` responses for each prompt; returns, per prompt, n (text, token count) pairs."""

    def sample(
        self, prompts: list[Messages], *, n: int, seed: int
    ) -> list[list[tuple[str, int]]]: ...


SamplerFactory = Callable[[Any, Any, EvalSettings], Sampler]  # (model, tokenizer, settings)


@dataclass
class HFSampler:
    """Hugging Face generation through `ict.generation` (model and tokenizer in memory):
    `sampling` (an ict.generation.Sampling) renders the prompts and samples."""

    model: object
    tokenizer: object
    sampling: object

    def sample(self, prompts: list[Messages], *, n: int, seed: int) -> list[list[tuple[str, int]]]:
        rendered = self.sampling.render(self.tokenizer, prompts)
        rollout = self.sampling.sample(
            self.model, self.tokenizer, rendered, num_samples=n, seed=seed
        )
        lengths = rollout.response_mask.sum(dim=1).tolist()
        index = rollout.prompt_index.tolist()
        out: list[list[tuple[str, int]]] = [[] for _ in prompts]
        for row, text in enumerate(rollout.texts):
            out[index[row]].append((text, int(lengths[row])))
        return out


def hf_sampler(model, tokenizer, settings: EvalSettings):
    """The default SamplerFactory (a model in memory): the batched path's `BatchedSampler` when
    `settings.sampler` is "batched", else the chunked path's `HFSampler` with the sampling of
    `settings`."""
    if settings.sampler == "batched":
        return BatchedSampler(model, tokenizer, settings)
    return HFSampler(model, tokenizer, settings.sampling())


def on_device(device: str, factory: SamplerFactory | None = None) -> SamplerFactory:
    """A SamplerFactory that samples with a copy of the model moved to `device` (`factory`'s
    sampler, default `hf_sampler`): e.g. CPU-trained cells of a grid evaluated on a GPU, where
    the batched path decodes many thousands of rows at once. The model itself stays where it is;
    a model already on `device` is used as it is."""
    import copy

    import torch

    inner = factory or hf_sampler
    target = torch.device(device)

    def make(model, tokenizer, settings: EvalSettings):
        here = next(model.parameters()).device
        if here.type == target.type and (target.index is None or here.index == target.index):
            return inner(model, tokenizer, settings)
        return inner(copy.deepcopy(model).to(target), tokenizer, settings)

    return make


class BatchedSampler:
    """The batched path (`EvalSettings.sampler` "batched"): `sample_keyed` decodes many problems'
    samples at once (ict.fast.batched: as many rows as `settings.memory_mb` holds, finished rows
    dropped), each sample with its own keyed random numbers, so the samples do not depend on the
    batches. Toy Llama models decode with `LeanLlama` (float32, or bfloat16 matmuls with
    `settings.dtype` "bf16"); other models with their own forward and cache (`HFStepper`, under
    bf16 autocast with "bf16"). `traces` collects each batch's `DecodeTrace` (FLOP counts).

    `problems_per_batch(prompts, n)`: how many of these prompts' problems one batch holds."""

    def __init__(self, model, tokenizer, settings: EvalSettings):
        self.model, self.tokenizer, self.settings = model, tokenizer, settings
        self.sampling = settings.sampling()
        self.traces: list = []

    def _encode(self, prompts: list[Messages]):
        rendered = self.sampling.render(self.tokenizer, prompts)
        old_side = self.tokenizer.padding_side
        self.tokenizer.padding_side = "left"
        try:
            encoded = self.tokenizer(
                rendered, return_tensors="pt", padding=True, add_special_tokens=False
            )
        finally:
            self.tokenizer.padding_side = old_side
        return encoded["input_ids"], encoded["attention_mask"]

    def problems_per_batch(self, prompts: list[Messages], n: int) -> int:
        """Problems of `n` samples whose decoding fits `settings.memory_mb` (at least 1)."""
        from ict.fast.batched import rows_per_batch

        width = self._encode(prompts)[0].shape[1] + self.settings.max_new_tokens
        per_element = 2 if self.settings.dtype == "bf16" else 4
        rows = rows_per_batch(self.model, width, self.settings.memory_mb, per_element)
        return max(1, rows // n)

    def _stepper(self):
        import torch

        from ict.fast.batched import HFStepper
        from ict.fast.generate import unsupported_sampling
        from ict.fast.llama import LeanLlama, unsupported

        bf16 = self.settings.dtype == "bf16"
        if unsupported(self.model) is None and unsupported_sampling(self.model) is None:
            return LeanLlama(self.model, torch.bfloat16 if bf16 else None), None
        device = next(self.model.parameters()).device
        autocast = torch.autocast(device.type, dtype=torch.bfloat16) if bf16 else None
        return HFStepper(self.model), autocast

    def sample_keyed(
        self,
        prompts: list[Messages],
        *,
        n: int,
        seeds: list[int],
        on_done: Callable[[int, list[tuple[str, int]]], None] | None = None,
    ) -> list[list[tuple[str, int]]]:
        """n (text, token count) samples of each prompt, sample j of prompt i keyed by
        (seeds[i], j) (ict.fast.keyed), decoded as one batch. `on_done(i, samples)`: prompt i's
        samples as soon as every one of them has ended at an EOS, while the batch decodes on."""
        from contextlib import nullcontext

        import torch

        from ict.fast.batched import DecodeTrace, decode_keyed
        from ict.fast.keyed import row_keys
        from ict.generation import eos_and_pad, response_texts

        model, s = self.model, self.settings
        device = next(model.parameters()).device
        eos_ids, pad_id = eos_and_pad(model, self.tokenizer)
        ids, attn = self._encode(prompts)
        stepper, autocast = self._stepper()
        trace = DecodeTrace()
        stop = list(s.stop)

        def done(i: int, rows) -> None:
            texts, lengths = response_texts(rows.cpu(), self.tokenizer, eos_ids, stop)
            on_done(i, list(zip(texts, lengths, strict=True)))

        was_training = model.training
        model.eval()
        try:
            with autocast or nullcontext():
                tokens = decode_keyed(
                    stepper, ids.to(device), attn.to(device), n,
                    row_keys(torch.tensor(seeds, dtype=torch.long), n),
                    temperature=s.temperature, top_p=s.top_p, max_new_tokens=s.max_new_tokens,
                    pad_id=pad_id, eos_ids=sorted(eos_ids), trace=trace,
                    on_done=done if on_done is not None else None,
                )  # fmt: skip
        finally:
            model.train(was_training)
        self.traces.append(trace)
        texts, lengths = response_texts(tokens.cpu(), self.tokenizer, eos_ids, stop)
        return [
            list(zip(texts[i * n : (i + 1) * n], lengths[i * n : (i + 1) * n], strict=True))
            for i in range(len(prompts))
        ]

    def sample(self, prompts: list[Messages], *, n: int, seed: int) -> list[list[tuple[str, int]]]:
        """The Sampler protocol: problem i of this call keyed by derive_seed(seed, i)."""
        from ict.seeds import derive_seed

        return self.sample_keyed(
            prompts, n=n, seeds=[derive_seed(seed, i) & 0x7FFFFFFF for i in range(len(prompts))]
        )


def vllm_available() -> bool:
    try:
        import vllm  # noqa: F401
    except ImportError:
        return False
    return True


class VLLMSampler:
    """vLLM generation (`--backend vllm`); same output as `HFSampler`. Needs `pip install vllm`."""

    def __init__(self, model_path: str, settings: EvalSettings, **llm_kwargs):
        if not vllm_available():
            raise ConfigError(
                "--backend vllm needs vLLM, which is not installed: pip install vllm "
                "(GPU machines), or use the default --backend hf"
            )
        from vllm import LLM

        self.llm = LLM(model=model_path, **llm_kwargs)
        self.tokenizer = self.llm.get_tokenizer()
        self.settings = settings

    def sample(self, prompts: list[Messages], *, n: int, seed: int) -> list[list[tuple[str, int]]]:
        from vllm import SamplingParams

        s = self.settings
        params = SamplingParams(
            n=n,
            temperature=s.temperature,
            top_p=s.top_p,
            max_tokens=s.max_new_tokens,
            seed=seed,
            stop=list(s.stop),
            include_stop_str_in_output=True,
        )
        rendered = [
            format_prompt(self.tokenizer, m, system=s.system_prompt, chat_template=s.chat_template)
            for m in prompts
        ]
        outputs = self.llm.generate(rendered, params, use_tqdm=False)
        return [[(o.text, len(o.token_ids)) for o in out.outputs] for out in outputs]
