"""Samplers: chat messages -> n sampled responses per prompt, as (text, number of tokens).

A sampler is anything with `sample(prompts, *, n, seed)` (`Sampler`); an evaluation builds one per
model with a `SamplerFactory` `(model, tokenizer, settings) -> Sampler`, which tests replace with a
scripted one (`Evaluation(sampler_factory=...)`, `train(..., sampler_factory=...)`).

`HFSampler` uses `ict.generation.generate` (batched HF `generate`, any device; `hf_sampler` is its
factory); `VLLMSampler` uses vLLM when it is installed (GPU users). Both render prompts as training
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


def hf_sampler(model, tokenizer, settings: EvalSettings) -> HFSampler:
    """The default SamplerFactory: an HFSampler for `model` with the sampling of `settings`."""
    return HFSampler(model, tokenizer, settings.sampling())


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
