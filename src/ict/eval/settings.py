"""What decides an evaluation's samples and numbers: `EvalSettings` (torch-free).

Every evaluation in `ict` (`ict eval`, the trainer's before/after and periodic evaluations, the
grid's start-point and final evaluations) is one `ict.eval.runner.Evaluation` with these settings;
the settings are stored with every result. A trained run's settings are derived from its training
config (`ict.train.evaluation.eval_settings`): the rollouts' temperature, top-p, stop strings,
response budget, generation batch size and prompt rendering, `eval_seed`, `eval_size` problems of
`eval_num_samples` samples.

Sampling seeds, two paths (`sampler`):

- "batched" (the default): every sample has its own random numbers, keyed by
  `problem_seed(seed, label, index)` and its sample number (ict.fast.keyed), so the samples
  depend on (seed, label, problem index, n) and the model only, not on how problems are batched:
  batches are as large as `memory_mb` allows (ict.fast.batched), finished rows leave the batch, and
  a cached evaluation resumes where it stopped whatever the budget. `dtype` "bf16" runs the
  decoding's matmuls in bfloat16 (a different model numerically: part of the fingerprint).
- "chunked" (the path before it, kept for results made with it): problems are processed in fixed
  chunks of `max(1, batch_size // n)` consecutive problems, chunk c of benchmark `label` sampled
  with `chunk_seed(seed, label, c)` through ict.generation (one torch generator per chunk). The
  samples depend on (seed, label, batch_size, n) and the model. A stored result without a
  `sampler` setting was made by this path (`EvalSettings.from_dict`).

The two paths draw from the same distribution (tests/eval/test_batched.py) but not the same
samples; a samples cache holds one fingerprint, so they never mix.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field

from ict.data import HELDOUT_SPLIT, SPLITS
from ict.errors import ConfigError
from ict.eval.metrics import DEFAULT_KS

BACKENDS = ("hf", "vllm")
SAMPLERS = ("batched", "chunked")  # see the module docstring
DTYPES = ("float32", "bf16")  # of the batched path's decoding
# settings that never change a sample of the batched path (the memory budget only sizes batches)
NOT_SAMPLES = ("limit", "k", "num_bootstrap", "memory_mb")


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
    resamples of the intervals over problems; sampler: "batched" or "chunked" (module
    docstring); memory_mb: the batched path's decoding budget in MiB (it sizes the batches, not
    the samples); dtype: the batched path's matmuls, "float32" or "bf16" (bfloat16 where the CPU
    computes it natively: docs/eval.md measures what it changes)."""

    n: int = 16
    k: list[int] = field(default_factory=lambda: list(DEFAULT_KS))
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 256
    batch_size: int = 32
    seed: int = 0
    limit: int | None = None
    split: str = HELDOUT_SPLIT
    stop: list[str] = field(default_factory=lambda: ["</answer>"])
    chat_template: bool = True
    system_prompt: str | None = None
    backend: str = "hf"
    num_bootstrap: int = 1000
    sampler: str = "batched"
    memory_mb: int = 2048
    dtype: str = "float32"

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
        if self.sampler not in SAMPLERS:
            raise ConfigError(f"sampler={self.sampler!r} is not one of {', '.join(SAMPLERS)}")
        if self.dtype not in DTYPES:
            raise ConfigError(f"dtype={self.dtype!r} is not one of {', '.join(DTYPES)}")
        if self.dtype != "float32" and self.sampler != "batched":
            raise ConfigError(
                f"dtype={self.dtype} needs sampler=batched (the chunked path is float32)"
            )
        if self.memory_mb < 1:
            raise ConfigError(f"memory_mb must be >= 1, got {self.memory_mb}")
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
        """The settings a result file stored (`as_dict`); keys that are not fields are ignored,
        and settings stored without `sampler` (made before it existed) are the chunked path's."""
        names = {f.name for f in dataclasses.fields(cls)}
        data = {"sampler": "chunked", **data}
        return cls(**{k: v for k, v in data.items() if k in names})

    def sample_settings(self) -> dict:
        """The settings that decide the samples (with the model and the label): the chunked
        path's as they were before the batched path existed (so its caches still match), the
        batched path's without `batch_size`, which does not change them."""
        keep = {k: v for k, v in self.as_dict().items() if k not in NOT_SAMPLES}
        if self.sampler == "chunked":
            for name in ("sampler", "dtype"):
                keep.pop(name)
        else:
            keep.pop("batch_size")
        return keep

    def same_result(self, other: EvalSettings) -> bool:
        """Whether `other` gives the same numbers: the same samples (`sample_settings`) and the
        same problems, k and bootstrap."""
        summary = ("limit", "k", "num_bootstrap")
        return self.sample_settings() == other.sample_settings() and all(
            getattr(self, name) == getattr(other, name) for name in summary
        )

    def fingerprint(self, label: str, model: str) -> str:
        """Hash of what decides one benchmark's samples: the model, the label and
        `sample_settings()` (a cache holds samples of one fingerprint)."""
        payload = json.dumps([label, model, self.sample_settings()], sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


def chunk_seed(seed: int, label: str, chunk: int) -> int:
    """A 31-bit sampling seed for one chunk of one benchmark (see the module docstring)."""
    digest = hashlib.sha256(f"{seed}|{label}|{chunk}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def problem_seed(seed: int, label: str, index: int) -> int:
    """A 31-bit seed of problem `index` of benchmark `label` (the batched path's samples of it are
    keyed by this seed and their sample number; see the module docstring)."""
    digest = hashlib.sha256(f"{seed}|{label}|problem {index}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF
