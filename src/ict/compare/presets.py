"""Grid presets for `ict compare`: what is trained, for how long, and how it is evaluated.

- toy:    a tiny transformer warm-started by supervised learning on two-number addition (cached),
          then RL-tuned with every method (the paper's ICT and batch-mean ICT included), 5 seeds.
- quick:  the toy task and warm start with 10 RL steps and 2 seeds: a few minutes, for first contact
          (the paper's 10-step dense warm-up is cut to 3 steps there, for every method).
- smollm: the embedded default model (SmolLM2-135M-Instruct) on reasoning-gym chain_sum; about an
          hour per seed on 2 CPU cores (minutes on a GPU).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ict.compare.toy import ToyTask, WarmStart
from ict.errors import ConfigError

# the baselines, the paper's ICT and this project's earlier batch-mean guess (ict.methods)
METHODS = ["grpo", "entropy", "stapo", "random", "ict", "ict_batch_mean"]


@dataclass
class EvalSpec:
    """Final held-out evaluation of every cell: `size` problems, `n` samples each, pass@k for `ks`."""

    size: int = 100
    n: int = 8
    ks: tuple[int, ...] = (1, 2, 4, 8)
    temperature: float = 1.0
    seed: int = 1234


@dataclass
class Preset:
    name: str
    description: str
    train: dict  # TrainConfig overrides shared by every cell
    eval: EvalSpec
    methods: list[str] = field(default_factory=lambda: list(METHODS))
    seeds: int = 3
    toy: ToyTask | None = None  # None: the task comes from train["task"] via ict.data
    warm: WarmStart | None = None


_TOY_TRAIN = dict(
    chat_template=False,
    stop=[],
    max_new_tokens=12,
    temperature=1.0,
    prompts_per_step=16,
    num_generations=8,
    generation_batch_size=128,
    micro_batch_size=128,
    learning_rate=2e-4,
    warmup_steps=0,
    max_steps=60,
    save_every=20,
    keep_last=1,
    log_samples_every=10,
    num_log_samples=4,
    plots=False,
    progress=False,
    device="cpu",
    autocast="off",
    task="toy:add",
    task_config={},
)


def get_preset(name: str) -> Preset:
    """A fresh Preset by name; ConfigError listing the names when unknown."""
    if name == "toy":
        return Preset(
            "toy",
            "Toy task: a+b with a, b in 0..99 (prompt 'Q:a+b\\nA:', response 'a+b=sum'), a 2-layer "
            "64-wide transformer warm-started from scratch by supervised learning until about half "
            "of its sampled answers are right, then RL-tuned for 60 steps (16 prompts x 8 samples).",
            dict(_TOY_TRAIN),
            EvalSpec(),
            seeds=5,
            toy=ToyTask(),
            warm=WarmStart(),
        )
    if name == "quick":
        # 10 steps would all be the paper's dense warm-up (Theta = 10): cut it to 3 so ICT's
        # selection is exercised; an explicit value applies to every method (baselines included)
        train = dict(
            _TOY_TRAIN, max_steps=10, save_every=5, log_samples_every=2, dense_warmup_steps=3
        )
        return Preset(
            "quick",
            "Quick check: the toy preset's task and (cached) warm start with 10 RL steps per cell; "
            "for CI and first contact, not for conclusions.",
            train,
            EvalSpec(size=50, n=4, ks=(1, 4)),
            seeds=2,
            toy=ToyTask(),
            warm=WarmStart(),
        )
    if name == "smollm":
        return Preset(
            "smollm",
            "Embedded default model SmolLM2-135M-Instruct on reasoning-gym chain_sum (2 terms), "
            "12 RL steps of 8 prompts x 8 samples per cell.",
            dict(
                max_steps=12,
                prompts_per_step=8,
                num_generations=8,
                save_every=4,
                keep_last=1,
                plots=False,
                progress=False,
                log_samples_every=4,
            ),
            EvalSpec(size=32, n=8, ks=(1, 4, 8)),
        )
    raise ConfigError(f"unknown preset {name!r}; choose one of toy, quick, smollm")
