"""Grid presets for `ict compare`: what is trained, for how long, and how it is evaluated.

- toy:    a tiny transformer warm-started by supervised learning on two-number addition (cached),
          then RL-tuned with every method (the paper's ICT and batch-mean ICT included), 5 seeds.
- toy-cot: a reasoning chain on 2 CPU cores: 4-digit addition written digit by digit with explicit
          carries (52-token responses), a tiny transformer warm-started to about half right, then
          RL with every method and the paper's random_sequence control, 5 seeds.
- toy-cot-long: the toy-cot task and warm start for 150 RL steps, to see whether dense GRPO's
          entropy collapses; exploration curves (pass@k for k = 1..64, and pass@1 /
          pass@64 / entropy against step) for GRPO, the paper's ICT, its random control, 20-Entropy,
          Clip-Cov, KL-Cov, an entropy bonus and the branch-attributed ICT (issue 22), 5 seeds.
- quick:  the toy task and warm start with 10 RL steps and 2 seeds: a few minutes, for first contact
          (the paper's 10-step dense warm-up is cut to 3 steps there, for every method).
- smollm: the embedded default model (SmolLM2-135M-Instruct) on the default task; about an
          hour per seed on 2 CPU cores (minutes on a GPU).
- smollm-cot: the same model writing 55-80-token running-total chains (sums of 4-5 one-digit
          numbers); the paper's ICT against GRPO and the random_sequence control first.
- paper:  the paper's set-up (arXiv 2606.19771): Qwen2.5-0.5B-Instruct (1.5B, 7B by `model_size`)
          trained on GSM8K train + MATH train with GRPO, 20-Entropy, STAPO and ICT, 5 seeds,
          evaluated on its seven benchmarks (pass@1, pass@4); GPUs only (docs/paper.md has the
          GPU-hours). `paper_preset(dry_run=True, work_dir=...)`: the same pipeline with the tiny
          offline model and the benchmark fixtures shipped with ict (FIXTURES_DIR), for tests and
          first contact.

Every preset is registered in PRESETS (name -> PresetEntry: a one-line summary, the function that
builds a fresh Preset, the options it takes) with the `register_preset` decorator; `get_preset`,
`ict compare --preset NAME` and `ict compare --help` read that registry. Every task is an ict.data
spec in `train["task"]` (the toy tasks: `toy:add`, `toy:cot`, ict.data.toy); `warm` says
whether the cells start from a supervised warm start (ict.compare.warm_start) instead of `model`.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ict.compare.tuning import TuningSpec
from ict.data import PAPER_BENCHMARKS
from ict.errors import ConfigError
from ict.evidence.endpoints import ALPHA, MARGIN
from ict.testing import save_tiny_model
from ict.train.config import TrainConfig
from ict.train.problems import task_spec

# the benchmark fixture files the paper dry run reads (package data: they ship with the wheel)
FIXTURES_DIR = Path(__file__).resolve().parent / "fixtures" / "benchmarks"

# the baselines, the paper's ICT and this project's earlier batch-mean guess (ict.methods)
METHODS = ["grpo", "entropy", "stapo", "random", "ict", "ict_batch_mean"]

# The paper's two claims as declared endpoints: ICT above GRPO at pass@4 (its headline metric)
# and ICT above its own random control (a random 10% of each response with ICT's warm-up and
# loss) at pass@1. A preset whose grid has no random_sequence declares the first only (no other
# method stands in for the paper's control: `random` draws 10% of the batch, not of each
# response); add it with --methods ...,random_sequence --primary ... (docs/compare.md).
PAPER_CLAIMS = ["ict-grpo@pass@4", "ict-random_sequence@pass@1"]
ICT_VS_GRPO = PAPER_CLAIMS[:1]


@dataclass(frozen=True)
class WarmStart:
    """Supervised warm start of the toy model (all fields enter the cache key)."""

    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 4
    intermediate_size: int = 128
    max_steps: int = 1500
    batch_size: int = 64
    learning_rate: float = 3e-3
    # stop once sampled (T = 1) accuracy on 200 training problems reaches this
    target_accuracy: float = 0.5
    check_every: int = 50
    seed: int = 0


@dataclass
class EvalSpec:
    """Final held-out evaluation of every cell: `size` problems, `n` samples each, pass@k for `ks`.
    Everything else (top-p, stop strings, prompt rendering, generation batch) is the cells' own
    evaluation settings (ict.compare.grid.final_evaluation)."""

    size: int | None = 100  # problems per benchmark (None: all)
    n: int = 8
    ks: tuple[int, ...] = (1, 2, 4, 8)
    temperature: float | None = None  # None: the cells' sampling temperature
    seed: int = 1234
    benchmarks: tuple[str, ...] = ()  # benchmark specs; () = the training task's held-out split
    max_new_tokens: int | None = None  # None: the cells' training response budget


@dataclass
class Preset:
    name: str
    description: str
    train: dict  # TrainConfig overrides shared by every cell
    eval: EvalSpec
    methods: list[str] = field(default_factory=lambda: list(METHODS))
    seeds: int = 3
    warm: WarmStart | None = None  # cells start from a supervised warm start on the task
    method_train: dict[str, dict] = field(default_factory=dict)  # per-method TrainConfig overrides
    data_dir: str | None = None  # benchmark files (ICT_DATA_DIR while the grid runs)
    # declared endpoints (ict.evidence.endpoints), fixed before any cell runs: the comparisons
    # that carry the claims ("A-B@METRIC"; Holm-adjusted as one family), alpha and the
    # equivalence margin (absolute pass@k); every other comparison is exploratory
    primary: list[str] = field(default_factory=list)
    alpha: float = ALPHA
    equivalence_margin: float = MARGIN
    # the tuning stage (ict.compare.tuning): each method's learning rate chosen on validation
    # problems with tuning seeds before the test cells run; None: every method at train's lr
    tuning: TuningSpec | None = None

    def cell_train(self, method: str) -> dict:
        """The TrainConfig fields of a `method` cell: shared settings, then the method's own."""
        return {**self.train, **self.method_train.get(method, {}), "method": method}

    @property
    def task(self) -> str:
        """The cells' ict.data task spec: `train["task"]` (TrainConfig's default task if unset)
        with `train["task_config"]` as options."""
        return task_spec(TrainConfig(**self.train))


@dataclass(frozen=True)
class PresetEntry:
    """A registered preset: `build(**options)` returns a fresh Preset; `options` names the keyword
    options it takes (the paper's model_size, dry_run, work_dir); `summary`: one line for --help."""

    name: str
    summary: str
    build: Callable[..., Preset]
    options: tuple[str, ...] = ()


PRESETS: dict[str, PresetEntry] = {}


def register_preset(name: str, summary: str, *, options: tuple[str, ...] = ()):
    """Decorator: register a function returning a fresh Preset under `name` (see PresetEntry)."""

    def register(build: Callable[..., Preset]) -> Callable[..., Preset]:
        PRESETS[name] = PresetEntry(name, summary, build, tuple(options))
        return build

    return register


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

# toy-cot: the chain task (ict.data.toy.cot), its response budget and whole logged groups
# (16 = 2 groups of 8 per logged step) for the first-divergence evidence (ict.report.positions)
COT_METHODS = ["grpo", "entropy", "stapo", "random", "random_sequence", "ict", "ict_batch_mean"]
_TOY_COT_TRAIN = dict(
    _TOY_TRAIN,
    task="toy:cot",
    max_new_tokens=60,
    prompts_per_step=8,
    num_generations=8,
    generation_batch_size=64,
    micro_batch_size=64,
    learning_rate=2e-4,
    max_steps=40,
    save_every=20,
    log_samples_every=5,
    num_log_samples=16,
)
TOY_COT_WARM = WarmStart(
    hidden_size=128,
    num_layers=3,
    num_heads=4,
    intermediate_size=256,
    max_steps=3000,
    batch_size=64,
    learning_rate=3e-3,
    check_every=100,
)

# toy-cot-long: the long-horizon regime (docs/reports/toy-cot-long). Periodic held-out evaluation
# with 64 samples per problem gives pass@k up to k = 64 against training step.
# the study of issue 30 (docs/reports/toy-cot-long-tuned): the paper's ICT, its random control,
# dense GRPO and the two entropy controls that act on tokens (20-Entropy, KL-Cov)
LONG_METHODS = ["grpo", "ict", "random_sequence", "entropy", "kl_cov"]
# each method's learning rate chosen on validation pairs with 2 tuning seeds (ict.compare.tuning):
# a half-decade grid around the dense methods' earlier 2e-4, grown by one point at an edge; the
# validation evaluation samples 16 per problem (pass@1 and pass@4 need no more)
LONG_TUNING = TuningSpec(
    values=(2e-5, 6.3e-5, 2e-4), seeds=(1000, 1001), metric=(1, 4), tie_margin=0.02, grow=1,
    validation_samples=16,
)  # fmt: skip
LONG_SAMPLES = 64
_TOY_COT_LONG_TRAIN = dict(
    _TOY_COT_TRAIN,
    # toy-cot's 2e-4; at 5e-4 (4 updates per step) GRPO's reward fell from 0.61 to 0 within 10
    # steps and did not recover (docs/reports/toy-cot-long/COMMAND.md)
    learning_rate=2e-4,
    prompts_per_step=4,  # 32 rollouts per step: half toy-cot's, so 150 steps x 40 cells fit
    max_steps=150,
    save_every=50,
    log_samples_every=50,
    eval_every=50,
    eval_size=32,
    eval_num_samples=LONG_SAMPLES,
    generation_batch_size=256,  # the held-out evaluations sample 2048 responses each
    # 2 optimizer steps per rollout batch (PPO-style mini-batches, as verl's ppo_mini_batch_size):
    # the second is off-policy, where the ratio clip and KL-Cov's penalty act (the first is
    # on-policy: rho = 1 exactly, METHOD.md "Clip-Cov and KL-Cov")
    mini_batch_size=16,
)
LONG_KS = tuple(2**i for i in range(LONG_SAMPLES.bit_length()))  # 1, 2, 4, ..., 64

# smollm-cot: the embedded SmolLM2-135M-Instruct writing running totals ("Step 1: 4 + 7 = 11. ...")
# for sums of 4-5 one-digit numbers, 55-80-token chains; measured candidates and the choice:
# docs/notes/smollm_cot_candidates.md. Sampling at 0.7 (at 1.0 this model's chains fall apart).
SMOLLM_COT_TASK = (
    "rg:basic_arithmetic?template=running_total_3shot&min_terms=4&max_terms=5&min_digits=1"
    '&max_digits=1&operators=["%2B"]&allow_parentheses=false&allow_negation=false'
)
SMOLLM_COT_METHODS = ["grpo", "ict", "random_sequence", "entropy", "stapo", "random"]
_SMOLLM_COT_TRAIN = dict(
    task=SMOLLM_COT_TASK,
    temperature=0.7,
    max_new_tokens=96,
    prompts_per_step=4,
    num_generations=8,
    learning_rate=2e-5,
    max_steps=12,  # the paper's ICT: 6 dense warm-up steps (Theta capped at half), then 6 sparse
    save_every=2,
    keep_last=1,
    plots=False,
    progress=False,
    log_samples_every=2,
    num_log_samples=16,  # two whole groups of 8 per logged step (first-divergence evidence)
)


PAPER_METHODS = ["grpo", "entropy", "stapo", "ict"]
PAPER_MODELS = {
    "0.5b": "Qwen/Qwen2.5-0.5B-Instruct",
    "1.5b": "Qwen/Qwen2.5-1.5B-Instruct",
    "7b": "Qwen/Qwen2.5-7B-Instruct",
}
PAPER_TASK = "mix:gsm8k@0.5,math@0.5"
# The paper does not give learning rate, batch, G, lengths or temperature (METHOD.md): these are
# common GRPO settings for Qwen2.5 on GSM8K + MATH, stated in docs/paper.md.
_PAPER_TRAIN = dict(
    task=PAPER_TASK,
    train_size=14_000,  # 7,000 from each source: below both decontaminated train splits, no repeats
    chat_template=True,
    stop=[],  # boxed-answer prompt: the response ends at the end-of-turn token
    dtype="bfloat16",
    autocast="auto",
    device="auto",
    prompts_per_step=32,
    num_generations=8,
    generation_batch_size=256,
    micro_batch_size=16,
    max_new_tokens=1024,
    temperature=1.0,
    learning_rate=1e-6,
    warmup_steps=10,
    # verl's GRPO recipe, which the paper says it used: a KL loss of 0.001 (low_var_kl) on every
    # valid token (docs/METHOD.md, "Published recipes")
    kl_coef=0.001,
    kl_estimator="low_var_kl",
    kl_on="valid",
    max_steps=200,
    save_every=50,
    keep_last=1,
    log_samples_every=25,
    plots=False,
    progress=True,
)
# Per-method overrides: none. `ict` is the paper's ICT by itself (ict.methods: group_position
# reference, top 10% of each response, Sparse-GRPO, 10 dense warm-up steps); 20-Entropy keeps 20%.
_PAPER_METHOD_TRAIN: dict[str, dict] = {}
PAPER_EVAL = dict(n=8, ks=(1, 4), temperature=0.6, seed=1234, max_new_tokens=2048)


def paper_preset(
    model_size: str = "0.5b", *, dry_run: bool = False, work_dir: str | os.PathLike | None = None
) -> Preset:
    """The paper's grid (see the module docstring); `dry_run` needs `work_dir` (the tiny model is
    saved there) and reads the benchmark fixtures shipped with ict (FIXTURES_DIR)."""
    if model_size not in PAPER_MODELS:
        raise ConfigError(
            f"unknown paper model size {model_size!r}; choose one of {', '.join(PAPER_MODELS)}"
        )
    if dry_run:
        return _paper_dry_run(work_dir)
    return Preset(
        "paper",
        f"The paper's set-up: {PAPER_MODELS[model_size]} trained on GSM8K train + MATH train "
        "(equal weights, decontaminated against every evaluation set) with GRPO, 20-Entropy, "
        "STAPO and ICT, 5 seeds, 200 steps of 32 prompts x 8 samples; evaluated on MATH-500, "
        "GSM8K, MMLU-STEM, GPQA-Diamond, AIME 2023/2024/2025 (pass@1, pass@4, n=8).",
        dict(_PAPER_TRAIN, model=PAPER_MODELS[model_size]),
        EvalSpec(size=None, benchmarks=tuple(PAPER_BENCHMARKS), **PAPER_EVAL),
        methods=list(PAPER_METHODS),
        seeds=5,
        method_train={m: dict(o) for m, o in _PAPER_METHOD_TRAIN.items()},
        primary=list(ICT_VS_GRPO),
    )


# the paper dry run: the paper's settings cut to a tiny offline model and 2 steps per cell
_PAPER_DRY_RUN_TRAIN = dict(
    _PAPER_TRAIN,
    train_size=8,
    dtype="float32",
    device="cpu",
    prompts_per_step=2,
    num_generations=4,
    generation_batch_size=8,
    micro_batch_size=8,
    max_new_tokens=8,
    learning_rate=1e-3,
    warmup_steps=0,
    max_steps=2,
    save_every=2,
    log_samples_every=2,
    progress=False,
    dense_warmup_steps=1,  # so the dry run's second step exercises ICT's sparse selection
)
PAPER_DRY_RUN_EVAL = dict(size=2, n=4, ks=(1, 4), temperature=1.0, seed=1234, max_new_tokens=6)


def _paper_dry_run(work_dir: str | os.PathLike | None) -> Preset:
    """The paper preset's dry run: the tiny offline model (saved under `work_dir`) on the
    benchmark fixtures."""
    if work_dir is None:
        raise ConfigError("the paper dry run needs a work_dir for its tiny model")
    if not FIXTURES_DIR.is_dir():
        raise ConfigError(
            f"the paper dry run reads the benchmark fixtures in {FIXTURES_DIR}, which this "
            "install lacks (they are package data of ict: reinstall it)"
        )
    model_dir = Path(work_dir) / "tiny-model"
    if not (model_dir / "config.json").is_file():
        save_tiny_model(model_dir)
    return Preset(
        "paper-dry-run",
        "Dry run of the paper preset: the tiny offline model, 2 steps per cell, the paper's four "
        "methods and seven benchmarks on the fixture files (2 problems each), 2 seeds. Checks the "
        "pipeline, not the claim.",
        dict(_PAPER_DRY_RUN_TRAIN, model=str(model_dir)),
        EvalSpec(benchmarks=tuple(PAPER_BENCHMARKS), **PAPER_DRY_RUN_EVAL),
        methods=list(PAPER_METHODS),
        seeds=2,
        method_train={m: dict(o) for m, o in _PAPER_METHOD_TRAIN.items()},
        data_dir=str(FIXTURES_DIR),
        primary=list(ICT_VS_GRPO),
    )


@contextmanager
def using_data_dir(data_dir: str | os.PathLike | None) -> Iterator[None]:
    """Set ICT_DATA_DIR to `data_dir` for the block (training reads task files through it);
    nothing changes when `data_dir` is None."""
    if data_dir is None:
        yield
        return
    old = os.environ.get("ICT_DATA_DIR")
    os.environ["ICT_DATA_DIR"] = str(data_dir)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("ICT_DATA_DIR", None)
        else:
            os.environ["ICT_DATA_DIR"] = old


def get_preset(name: str, **options) -> Preset:
    """A fresh Preset by name (PRESETS); ConfigError listing the names when unknown, or naming the
    options a preset does not take.

    `paper` takes `model_size` ("0.5b", "1.5b", "7b"), `dry_run` and `work_dir` (paper_preset)."""
    entry = PRESETS.get(name)
    if entry is None:
        raise ConfigError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    unknown = sorted(set(options) - set(entry.options))
    if unknown:
        takes = f"takes only {', '.join(entry.options)}" if entry.options else "takes no options"
        raise ConfigError(f"preset {name!r} {takes}, got {unknown}")
    preset = entry.build(**options)
    preset.train = copy.deepcopy(preset.train)  # fresh: nothing is shared with the module's dicts
    return preset


@register_preset("toy", "tiny transformer on a+b with a supervised warm start (2 CPU cores)")
def toy_preset() -> Preset:
    return Preset(
        "toy",
        "Toy task: a+b with a, b in 0..99 (prompt 'Q:a+b\\nA:', response 'a+b=sum'), a 2-layer "
        "64-wide transformer warm-started from scratch by supervised learning until about half "
        "of its sampled answers are right, then RL-tuned for 60 steps (16 prompts x 8 samples).",
        dict(_TOY_TRAIN),
        EvalSpec(),
        seeds=5,
        warm=WarmStart(),
        primary=list(ICT_VS_GRPO),
    )


@register_preset("toy-cot", "reasoning chains: 52-token answers of a tiny transformer")
def toy_cot_preset() -> Preset:
    return Preset(
        "toy-cot",
        "Reasoning-chain toy: a+b with 4-digit operands (prompt 'Q:4705+3862\\nA:'), answered "
        "digit by digit from the right with explicit carries ('5+2+0=7 c0;0+6+0=6 c0;7+8+0=15 "
        "c1;4+3+1=8 c0;=08567', 52 tokens); reward 1 only for the right final answer. A "
        "3-layer 128-wide transformer warm-started from scratch by supervised learning until "
        "about half of its sampled answers are right, then RL-tuned for 40 steps (8 prompts x "
        "8 samples) with each method, 5 seeds; pass@1 and pass@4 on 100 held-out pairs, n=4.",
        dict(_TOY_COT_TRAIN),
        EvalSpec(size=100, n=4, ks=(1, 4)),
        methods=list(COT_METHODS),
        seeds=5,
        warm=TOY_COT_WARM,
        primary=list(PAPER_CLAIMS),
    )


@register_preset(
    "toy-cot-long",
    "toy-cot for 150 RL steps, each method at its tuned learning rate",
)
def toy_cot_long_preset() -> Preset:
    return Preset(
        "toy-cot-long",
        "Long-horizon reasoning-chain toy: the toy-cot task and warm start (4-digit addition with "
        "explicit carries, 52-token responses, a 3-layer 128-wide transformer about half right "
        "before RL), RL-tuned for 150 steps (4 prompts x 8 samples, 2 updates per step) with "
        "GRPO, the paper's ICT, its random_sequence control, 20-Entropy and KL-Cov, each at the "
        "learning rate its tuning stage chose (2e-5, 6.3e-5 or 2e-4, on validation pairs, tuning "
        "seeds 1000 and 1001), 20 test seeds; pass@1..64 on 32 held-out pairs (n=64) every 50 "
        "steps and at the end.",
        dict(_TOY_COT_LONG_TRAIN),
        EvalSpec(size=32, n=LONG_SAMPLES, ks=LONG_KS),
        methods=list(LONG_METHODS),
        seeds=20,
        warm=TOY_COT_WARM,
        primary=list(PAPER_CLAIMS),
        tuning=LONG_TUNING,
    )


@register_preset("quick", "the toy task and warm start, shortened: a few minutes")
def quick_preset() -> Preset:
    # 10 steps would all be the paper's dense warm-up (Theta = 10): cut it to 3 so ICT's
    # selection is exercised; an explicit value applies to every method (baselines included)
    train = dict(_TOY_TRAIN, max_steps=10, save_every=5, log_samples_every=2, dense_warmup_steps=3)
    return Preset(
        "quick",
        "Quick check: the toy preset's task and (cached) warm start with 10 RL steps per cell; "
        "for CI and first contact, not for conclusions.",
        train,
        EvalSpec(size=50, n=4, ks=(1, 4)),
        seeds=2,
        warm=WarmStart(),
        primary=list(ICT_VS_GRPO),
    )


@register_preset("smollm", "the embedded SmolLM2-135M-Instruct on ict train's default task")
def smollm_preset() -> Preset:
    return Preset(
        "smollm",
        "Embedded default model SmolLM2-135M-Instruct on the default task (reasoning-gym "
        "addition of two 1-2 digit numbers, two-shot prompt), 12 RL steps of 8 prompts x 8 "
        "samples per cell at lr 2e-5 (the paper's ICT: 6 dense warm-up steps, then 6 sparse).",
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
        primary=list(ICT_VS_GRPO),
    )


@register_preset("smollm-cot", "SmolLM2-135M-Instruct writing 55-80-token running-total chains")
def smollm_cot_preset() -> Preset:
    return Preset(
        "smollm-cot",
        "Reasoning chains with the embedded SmolLM2-135M-Instruct: sums of 4-5 one-digit "
        "numbers (reasoning-gym basic_arithmetic) written as running totals after three worked "
        "examples ('Step 1: 4 + 7 = 11. Step 2: 11 + 8 = 19. ... So the answer is 19.', 55-80 "
        "tokens; 17% right before RL at temperature 0.7). 12 RL steps of 4 prompts x 8 "
        "samples at lr 2e-5 (the paper's ICT: 6 dense warm-up steps, then 6 sparse); pass@1 "
        "and pass@4 on 32 held-out problems, n=4, temperature 0.7.",
        dict(_SMOLLM_COT_TRAIN),
        EvalSpec(size=32, n=4, ks=(1, 4), temperature=0.7),
        methods=list(SMOLLM_COT_METHODS),
        seeds=3,
        primary=list(PAPER_CLAIMS),
    )


register_preset(
    "paper",
    "the paper's grid: Qwen2.5-Instruct on GSM8K + MATH, seven benchmarks (GPUs; --dry-run: CPU)",
    options=("model_size", "dry_run", "work_dir"),
)(paper_preset)
