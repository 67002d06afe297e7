"""Samplers: chat messages -> n sampled responses per prompt, as (text, number of tokens).

`HFSampler` uses `ict.generation.generate` (batched HF `generate`, any device); `VLLMSampler`
uses vLLM when it is installed (GPU users). Both are deterministic given `seed` per call, so the
eval cache (one call per fixed chunk of problems) does not change what is sampled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from ict.errors import ConfigError

Messages = list[dict]


class Sampler(Protocol):
    """Samples `n` responses for each prompt; returns, per prompt, n (text, token count) pairs."""

    def sample(
        self, prompts: list[Messages], *, n: int, seed: int
    ) -> list[list[tuple[str, int]]]: ...


@dataclass
class HFSampler:
    """Hugging Face generation through `ict.generation.generate` (model and tokenizer in memory)."""

    model: object
    tokenizer: object
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 256
    batch_size: int = 32
    stop: list[str] = field(default_factory=lambda: ["</answer>"])

    def sample(self, prompts: list[Messages], *, n: int, seed: int) -> list[list[tuple[str, int]]]:
        from ict.generation import generate
        from ict.models import format_prompt

        rendered = [format_prompt(self.tokenizer, messages) for messages in prompts]
        rollout = generate(
            self.model,
            self.tokenizer,
            rendered,
            num_samples=n,
            temperature=self.temperature,
            top_p=self.top_p,
            max_new_tokens=self.max_new_tokens,
            batch_size=self.batch_size,
            seed=seed,
            stop=self.stop,
        )
        lengths = rollout.response_mask.sum(dim=1).tolist()
        index = rollout.prompt_index.tolist()
        out: list[list[tuple[str, int]]] = [[] for _ in prompts]
        for row, text in enumerate(rollout.texts):
            out[index[row]].append((text, int(lengths[row])))
        return out


def vllm_available() -> bool:
    try:
        import vllm  # noqa: F401
    except ImportError:
        return False
    return True


class VLLMSampler:
    """vLLM generation (`--backend vllm`); same output as `HFSampler`. Needs `pip install vllm`."""

    def __init__(
        self,
        model_path: str,
        *,
        temperature=1.0,
        top_p=1.0,
        max_new_tokens=256,
        stop: list[str] | None = None,
        **llm_kwargs,
    ):
        if not vllm_available():
            raise ConfigError(
                "--backend vllm needs vLLM, which is not installed: pip install vllm "
                "(GPU machines), or use the default --backend hf"
            )
        from vllm import LLM

        self.llm = LLM(model=model_path, **llm_kwargs)
        self.tokenizer = self.llm.get_tokenizer()
        self.temperature, self.top_p, self.max_new_tokens = temperature, top_p, max_new_tokens
        self.stop = ["</answer>"] if stop is None else stop

    def sample(self, prompts: list[Messages], *, n: int, seed: int) -> list[list[tuple[str, int]]]:
        from vllm import SamplingParams

        from ict.models import format_prompt

        params = SamplingParams(
            n=n,
            temperature=self.temperature,
            top_p=self.top_p,
            max_tokens=self.max_new_tokens,
            seed=seed,
            stop=self.stop,
            include_stop_str_in_output=True,
        )
        rendered = [format_prompt(self.tokenizer, messages) for messages in prompts]
        outputs = self.llm.generate(rendered, params, use_tqdm=False)
        return [[(o.text, len(o.token_ids)) for o in out.outputs] for out in outputs]
