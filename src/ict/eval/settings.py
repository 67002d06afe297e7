"""What decides an evaluation's samples and numbers: `EvalSettings` (torch-free).

Every evaluation in `ict` (`ict eval`, the trainer's before/after and periodic evaluations, the
grid's start-point and final evaluations) is one `ict.eval.runner.Evaluation` with these settings;
the settings are stored with every result. A trained run's settings are derived from its training
config (`ict.train.evaluation.eval_settings`): the rollouts' temperature, top-p, stop strings,
response budget, generation batch size and prompt rendering, `eval_seed`, `eval_size` problems of
`eval_num_samples` samples.

Sampling seeds: problems are processed in fixed chunks of `max(1, batch_size // n)` consecutive
problems, and chunk c of benchmark `label` is sampled with `chunk_seed(seed, label, c)`. So the
samples depend on (seed, label, batch_size, n) and the model, not on which evaluation asked, and a
cached evaluation resumes where it stopped.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field

from ict.data import SPLITS
from ict.errors import ConfigError
from ict.eval.metrics import DEFAULT_KS

BACKENDS = ("hf", "vllm")


@dataclass
class EvalSettings:
    """How an evaluation samples and summarises (reported with every number).

    n: samples per problem; k: the pass@k reported (each <= n); temperature, top_p,
    max_new_tokens, stop: sampling (stop strings end a response and are kept in it); batch_size:
    sequences generated at once (it also fixes the chunking, so the sampling seeds); seed: the
    evaluation seed (sampling, and the bootstrap over problems); limit: problems per task (None:
    the task's default); split: which problems ("eval" held-out, "validation", "train");
    chat_template, system_prompt: how prompts are rendered (the tokenizer's chat template only
    when chat_template and the tokenizer has one); backend: "hf" or "vllm"; num_bootstrap:
    resamples of the intervals over problems."""

    n: int = 16
    k: list[int] = field(default_factory=lambda: list(DEFAULT_KS))
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 256
    batch_size: int = 32
    seed: int = 0
    limit: int | None = None
    split: str = "eval"
    stop: list[str] = field(default_factory=lambda: ["</answer>"])
    chat_template: bool = True
    system_prompt: str | None = None
    backend: str = "hf"
    num_bootstrap: int = 1000

    def __post_init__(self) -> None:
        self.k, self.stop = [int(k) for k in self.k], [str(s) for s in self.stop]

    def validate(self) -> None:
        """ConfigError naming the first bad setting and the fix."""
        if self.n < 1:
            raise ConfigError(f"--n must be >= 1, got {self.n}")
        bad = [k for k in self.k if not 1 <= k <= self.n]
        if bad or not self.k:
            raise ConfigError(
                f"every k must be in 1..n={self.n}; got {bad or 'none'}: raise --n or lower --k"
            )
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ConfigError("need --temperature >= 0 and 0 < --top-p <= 1")
        if self.temperature == 0 and self.n > 1:
            raise ConfigError("--temperature 0 (greedy) gives n identical samples; use --n 1 --k 1")
        if self.limit is not None and self.limit < 1:
            raise ConfigError(f"--limit must be >= 1, got {self.limit}")
        if self.max_new_tokens < 1 or self.batch_size < 1:
            raise ConfigError("--max-new-tokens and --batch-size must be >= 1")
        if self.split not in SPLITS:
            raise ConfigError(f"split={self.split!r} is not one of {', '.join(SPLITS)}")
        if self.backend not in BACKENDS:
            raise ConfigError(f"backend={self.backend!r} is not one of {', '.join(BACKENDS)}")

    @classmethod
    def from_sampling(cls, sampling, **fields) -> EvalSettings:
        """Settings that sample as `sampling` does (an ict.generation.Sampling: temperature,
        top-p, response budget, generation batch, stop strings, prompt rendering); `fields`: the
        others (n, k, seed, limit, ...)."""
        values = dataclasses.asdict(sampling)
        return cls(**{**values, "stop": list(sampling.stop)}, **fields)

    def sampling(self):
        """These settings' ict.generation.Sampling (imports torch: not on `--help`'s path)."""
        from ict.generation import Sampling

        return Sampling.of(self)

    def replace(self, **changes) -> EvalSettings:
        """A copy with `changes` (EvalSettings fields) applied."""
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> EvalSettings:
        """The settings a result file stored (`as_dict`); keys that are not fields are ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def fingerprint(self, label: str, model: str) -> str:
        """Hash of what decides one benchmark's samples: the model, the label and every setting
        but limit, k and the bootstrap (a cache holds samples of one fingerprint)."""
        keep = {k: v for k, v in self.as_dict().items() if k not in ("limit", "k", "num_bootstrap")}
        payload = json.dumps([label, model, keep], sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


def chunk_seed(seed: int, label: str, chunk: int) -> int:
    """A 31-bit sampling seed for one chunk of one benchmark (see the module docstring)."""
    digest = hashlib.sha256(f"{seed}|{label}|{chunk}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF
