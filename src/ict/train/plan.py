"""A run resolved once: `RunPlan.from_config(config)` turns a TrainConfig into everything a training
step reads that the config only implies, at configuration time, and nothing re-derives it.

    plan = RunPlan.from_config(config)
    plan.config      # the config with the method's settings explicit (what config.yaml records)
    plan.method      # the resolved ict.methods.Method, its warm-up fitted to the run
    plan.loss        # the ict.loss.LossConfig
    plan.batch       # BatchPlan: rows per shared-prompt group, micro-batch, mini-batch; epochs
    plan.sampling    # ict.generation.Sampling of the rollouts (and the evaluations' base)
    plan.seeds       # ict.step.SeedStreams: the named seeds of sampling, selection, shuffling
    plan.device, plan.precision   # torch.device and ict.precision.PrecisionChoice
    plan.one_forward # on-policy: the step's statistics from the update's forward (or why not)
    plan.step_plan   # ict.step.StepPlan: the method's step, as every engine resolves it

The native trainer, `ict inspect --model` and the benchmarks read it; the step service
(ict.train.step) computes with it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from ict.errors import ConfigError
from ict.generation import Sampling
from ict.loss import LossConfig
from ict.methods import METHOD_FIELDS
from ict.methods.options import CLIP_FIELDS
from ict.methods.registry import Method
from ict.precision import PrecisionChoice, choose_precision
from ict.step import SeedStreams, StepLayout, StepPlan
from ict.train.config import TrainConfig


def resolve_device(name: str) -> torch.device:
    """ "auto": cuda if available, else cpu; a CUDA device where CUDA is missing is a ConfigError."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device={name!r} but CUDA is not available; use --device cpu")
    return torch.device(name)


def sampling_of(config: TrainConfig) -> Sampling:
    """The rollouts' sampling and prompt rendering of a config (and its evaluations' base)."""
    return Sampling.of(config, batch_size=config.generation_batch_size)


@dataclass(frozen=True)
class BatchPlan:
    """How a rollout batch's rows run through the model.

    group: rows that share one prompt forward (G with share_prompt, else 1); micro_rows: rows per
    forward/backward, a multiple of group; mini_rows: rows per optimizer update (None: the whole
    batch); epochs: passes over the batch."""

    group: int
    micro_rows: int
    mini_rows: int | None
    epochs: int

    @classmethod
    def from_config(cls, config: TrainConfig) -> BatchPlan:
        group = config.num_generations if config.share_prompt else 1
        micro = max(1, config.micro_batch_size // group) * group
        return cls(group, micro, config.mini_batch_size, config.num_epochs)

    def rows(self, count: int) -> tuple[int, int]:
        """(group, micro_rows) for `count` rows: prompts are shared only when the rows are whole
        groups (a rollout of B x G rows always is)."""
        if self.group > 1 and count % self.group == 0:
            return self.group, self.micro_rows
        return 1, max(1, self.micro_rows)


def step_layout(config: TrainConfig, batch: BatchPlan) -> StepLayout:
    """The native engine's layout of a run's steps (ict.step.StepLayout): max_steps rollout
    batches of prompts_per_step x num_generations rows in micro-batches of `batch.micro_rows`,
    one process, and the reasons of its own that rule the single forward out (the update not
    on-policy, dropout; per-row selections need whole groups per micro-batch: share_prompt)."""
    engine_off = None
    if not config.one_forward:
        engine_off = "one_forward is off"
    elif batch.epochs != 1 or batch.mini_rows is not None:
        engine_off = (
            "the update is not on-policy (num_epochs > 1 or mini_batch_size set: several "
            "updates per rollout batch read the old policy's log-probs)"
        )
    elif not config.disable_dropout:
        engine_off = "dropout is on: the update's forward is not the old policy's distribution"
    split_off = None
    if batch.group != config.num_generations:
        split_off = "share_prompt is off: a micro-batch need not hold whole groups"
    rows = config.prompts_per_step * config.num_generations
    return StepLayout(
        total_batches=config.max_steps, micro_batches=-(-rows // batch.micro_rows), processes=1,
        engine_off=engine_off, stats_per_micro_batch=False, split_off=split_off,
    )  # fmt: skip


def method_config(config: TrainConfig, method: Method) -> TrainConfig:
    """`config` with `method`'s fields, and the clip range a method may fix, as the run uses them
    (what config.yaml records)."""
    return dataclasses.replace(
        config, **{k: getattr(method, k) for k in (*METHOD_FIELDS, *CLIP_FIELDS)}
    )


def _loss_rule(config: TrainConfig):
    """The native loss rule (ict.step.StepPlan.resolve's `loss`): the LossConfig of `config`
    running a resolved method, Dr. GRPO's constant the run's max_new_tokens."""

    def loss_of(method: Method) -> LossConfig:
        resolved = method_config(config, method)
        return LossConfig.from_config(resolved, max_response_length=resolved.max_new_tokens)

    return loss_of


@dataclass(frozen=True)
class RunPlan:
    """Everything a step reads, resolved once (see the module docstring). `step_plan`: the
    method's step (ict.step.StepPlan: the method with its fitted warm-up, the loss, the seed streams,
    the single-forward decision); `method`, `loss`, `seeds`, `warning` (an explicit warm-up
    covering the whole run) and `one_forward_off` (why the update cannot take the step's
    statistics from its own forward; None: it does) are read from it."""

    config: TrainConfig
    step_plan: StepPlan
    batch: BatchPlan
    sampling: Sampling
    device: torch.device
    precision: PrecisionChoice

    @classmethod
    def from_config(cls, config: TrainConfig) -> RunPlan:
        """Resolve `config`: the method's step (ict.step.StepPlan.resolve: the method with its
        explicit fields and its warm-up fitted to max_steps, the loss, the seeds, the single
        forward), the batch and sampling plans, the device and precision."""
        batch = BatchPlan.from_config(config)
        step_plan = StepPlan.resolve(
            config, step_layout(config, batch), seed=config.seed, loss=_loss_rule(config)
        )
        resolved = method_config(config, step_plan.method)
        device = resolve_device(resolved.device)
        return cls(
            config=resolved,
            step_plan=step_plan,
            batch=batch,
            sampling=sampling_of(resolved),
            device=device,
            precision=choose_precision(resolved.autocast, device),
        )

    @property
    def method(self) -> Method:
        """The resolved method, its warm-up fitted to the run."""
        return self.step_plan.method

    @property
    def loss(self) -> LossConfig:
        return self.step_plan.loss

    @property
    def seeds(self) -> SeedStreams:
        return self.step_plan.seeds

    @property
    def warning(self) -> str | None:
        return self.step_plan.warning

    @property
    def one_forward_off(self) -> str | None:
        return self.step_plan.one_forward_off

    @property
    def one_forward(self) -> bool:
        """Whether each step's statistics come from the update's own forward (on-policy: no
        separate old-policy forward; ict.train.stats_in_update). `one_forward_off` says why not."""
        return self.step_plan.one_forward

    @property
    def needs_reference_model(self) -> bool:
        """A frozen reference model: for the KL term, or as the score's reference."""
        return self.config.kl_coef > 0 or self.method.reference == "reference_policy"

    def autocast(self):
        """The precision context of the statistics and update passes (ict.precision)."""
        return self.precision.context(self.device.type)
