"""A run resolved once: `RunPlan.from_config(config)` turns a TrainConfig into everything a training
step reads that the config only implies, at configuration time, and nothing re-derives it.

    plan = RunPlan.from_config(config)
    plan.config      # the config with the method's settings explicit (what config.yaml records)
    plan.method      # the resolved ict.methods.Method, its warm-up fitted to the run
    plan.loss        # the ict.loss.LossConfig
    plan.batch       # BatchPlan: rows per shared-prompt group, micro-batch, mini-batch; epochs
    plan.sampling    # ict.generation.Sampling of the rollouts (and the evaluations' base)
    plan.seeds       # SeedStreams: the named seeds of sampling, selection and shuffling
    plan.device, plan.precision   # torch.device and ict.precision.PrecisionChoice
    plan.one_forward # on-policy: the step's statistics from the update's forward (or why not)

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
from ict.methods import (
    METHOD_FIELDS,
    resolve_method,
    run_warmup,
    selection_in_forward,
    selection_seed,
    warmup_warning,
)
from ict.methods.options import CLIP_FIELDS
from ict.methods.registry import Method
from ict.precision import PrecisionChoice, choose_precision
from ict.seeds import derive_seed, stream_seed
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


@dataclass(frozen=True)
class SeedStreams:
    """The run's named seeds, each stream its own derivation (ict.seeds): the rollouts' sampling
    `derive_seed(run, step)` (as before issue 41), the step's selection (ict.methods.
    selection_seed: the random controls' draws) and the mini-batch shuffle `stream_seed(run,
    name, step)`, so no two generators of a step are seeded alike. `prompts`: the prompt
    order's seed (PromptSampler); `init`: torch / numpy / random at start."""

    run: int

    def sampling(self, step: int) -> int:
        return derive_seed(self.run, step)

    def selection(self, step: int) -> int:
        return selection_seed(self.run, step)

    def shuffle(self, step: int) -> int:
        return stream_seed(self.run, "shuffle", step)

    @property
    def prompts(self) -> int:
        return self.run

    @property
    def init(self) -> int:
        return self.run


def one_forward_reason(config, method, batch) -> str | None:
    """Why a run's update cannot compute the step's statistics in its own forward (None: it can).

    config: the resolved TrainConfig; method: the resolved Method; batch: its BatchPlan."""
    if not config.one_forward:
        return "one_forward is off"
    if batch.epochs != 1 or batch.mini_rows is not None:
        return (
            "the update is not on-policy (num_epochs > 1 or mini_batch_size set: several "
            "updates per rollout batch read the old policy's log-probs)"
        )
    if not config.disable_dropout:
        return "dropout is on: the update's forward is not the old policy's distribution"
    when, why = selection_in_forward(method, config.granularity)
    if when == "whole_batch":
        return why
    if when == "per_micro_batch" and batch.group != config.num_generations:
        return "share_prompt is off: a micro-batch need not hold whole groups"
    return None


@dataclass(frozen=True)
class RunPlan:
    """Everything a step reads, resolved once (see the module docstring). `warning`: a one-line
    warning when an explicit warm-up covers the whole run (its selection is never used);
    `one_forward_off`: why the update cannot take the step's statistics from its own forward
    (None: it does, `one_forward`)."""

    config: TrainConfig
    method: Method
    loss: LossConfig
    batch: BatchPlan
    sampling: Sampling
    seeds: SeedStreams
    device: torch.device
    precision: PrecisionChoice
    warning: str | None = None
    one_forward_off: str | None = None

    @classmethod
    def from_config(cls, config: TrainConfig) -> RunPlan:
        """Resolve `config`: the method with its explicit fields and its warm-up fitted to
        max_steps (a method's own warm-up capped at half the run, an explicit one kept:
        ict.methods.run_warmup), the loss, batch, sampling and seeds, the device and precision."""
        explicit = config.dense_warmup_steps is not None
        method = run_warmup(resolve_method(config), config.max_steps, explicit=explicit)
        # the method's fields, and the clip range a method may fix, as this run uses them
        fields = (*METHOD_FIELDS, *CLIP_FIELDS)
        resolved = dataclasses.replace(config, **{k: getattr(method, k) for k in fields})
        device = resolve_device(resolved.device)
        batch = BatchPlan.from_config(resolved)
        return cls(
            config=resolved,
            method=method,
            loss=LossConfig.from_config(resolved, max_response_length=resolved.max_new_tokens),
            batch=batch,
            sampling=sampling_of(resolved),
            seeds=SeedStreams(resolved.seed),
            device=device,
            precision=choose_precision(resolved.autocast, device),
            warning=warmup_warning(method, resolved.max_steps) if explicit else None,
            one_forward_off=one_forward_reason(resolved, method, batch),
        )

    @property
    def one_forward(self) -> bool:
        """Whether each step's statistics come from the update's own forward (on-policy: no
        separate old-policy forward; ict.train.stats_in_update). `one_forward_off` says why not."""
        return self.one_forward_off is None

    @property
    def needs_reference_model(self) -> bool:
        """A frozen reference model: for the KL term, or as the score's reference."""
        return self.config.kl_coef > 0 or self.method.reference == "reference_policy"

    def autocast(self):
        """The precision context of the statistics and update passes (ict.precision)."""
        return self.precision.context(self.device.type)
