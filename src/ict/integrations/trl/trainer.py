"""`ICTGRPOTrainer`: TRL's GRPOTrainer running ict's step (ict.step: the plan, one StepRun per
generation batch) in TRL's hooks.

Per generation batch: `_generate_and_score_completions` replaces TRL's advantages by ict's
estimator's when the method's is not grpo (`ict_advantages`), numbers the rows in generation order and,
on the two-pass path, adds the old policy's statistics (a filter of generation batches, dynamic
sampling, belongs there, before the numbering); `_prepare_inputs` runs the plan's step on the
micro-batches TRL split (or prepares the single forward); `_compute_loss` is `loss`'s."""

from __future__ import annotations

import dataclasses
import logging
import math

import torch
from transformers import TrainerCallback
from trl import GRPOTrainer

import ict.integrations.trl.config as trl_config
from ict.errors import ConfigError
from ict.head import logit_head
from ict.integrations.trl.loss import LossSteps
from ict.integrations.trl.single_forward import OneForwardSteps, regroup, trl_layout
from ict.integrations.trl.stats import STAT_COLUMNS, StatsSteps, check_whole_groups
from ict.methods import Method
from ict.stats import TokenStats
from ict.step import StepInputs, StepPlan
from ict.training_metrics import ParamChange

logger = logging.getLogger("ict.integrations.trl")


class _ParamChangeCallback(TrainerCallback):
    """`update/param_change_rel` of each optimizer step (ict.training_metrics.ParamChange: one snapshot
    of the trainable parameters before the step, the relative change after it), logged with TRL's
    metrics. Sharded parameters are summed over processes."""

    def __init__(self, trainer):
        self.trainer, self.change = trainer, None

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        self.change = ParamChange(model.parameters())

    def on_optimizer_step(self, args, state, control, **kwargs):
        if self.change is None:
            return
        accelerator = self.trainer.accelerator
        reduce = None
        if accelerator.num_processes > 1:
            reduce = lambda x: accelerator.reduce(x, reduction="sum")  # noqa: E731
        self.trainer._metrics["train"]["update/param_change_rel"].append(
            self.change.relative(reduce)
        )
        self.change = None


class _ResolveCallback(TrainerCallback):
    """Resolves the trainer's step plan once more when training begins: TRL knows the run's
    length (`state.max_steps`) only then, and the method's warm-up is fitted to it."""

    def __init__(self, trainer):
        self.trainer = trainer

    def on_train_begin(self, args, state, control, **kwargs):
        self.trainer.ict_resolve()


class ICTGRPOTrainer(LossSteps, OneForwardSteps, StatsSteps, GRPOTrainer):
    """`GRPOTrainer` that updates only the tokens chosen by an ict method (module docstring).

    `ict_plan` (ict.step.StepPlan): the method's step, resolved by `ict_resolve` at set-up and
    when training begins; `ict_one_forward` (bool): whether this run takes ict's statistics from
    the loss forward (ict.integrations.trl.single_forward); `ict_one_forward_reason` says why not
    when it does not ("" when it does)."""

    def __init__(self, model, reward_funcs=None, args=None, *rest, **kwargs):  # TRL's signature
        if args is None:  # as TRL builds its default GRPOConfig, with the ict default method
            name = model if isinstance(model, str) else model.config._name_or_path
            args = trl_config.ICTGRPOConfig(f"{str(name).split('/')[-1]}-GRPO")
        super().__init__(model, reward_funcs, args, *rest, **kwargs)
        if not getattr(self.args, "use_adaptive_entropy", False):
            # the entropy bonus is ict's (`ict_computes_loss`): TRL's own term stays off
            self.entropy_coef, self._entropy_bonus_enabled = 0.0, False
        self._ict_warned = False
        self._ict_processes = self.accelerator.num_processes  # the layout's, read at set-up
        self._ict_mode_counts: dict[str, list[int]] = {}  # the loss mode's, per optimizer step
        self.add_callback(_ParamChangeCallback(self))  # update/param_change_rel
        self.add_callback(_ResolveCallback(self))  # the warm-up fitted to the run's length
        if not isinstance(self.args, trl_config.ICTGRPOConfig):
            raise ConfigError(
                f"ICTGRPOTrainer needs an ICTGRPOConfig, got {type(self.args).__name__}: "
                "replace GRPOConfig with ict.integrations.trl.ICTGRPOConfig."
            )
        # the distribution the model samples: its own logit transform (soft-cap, scale; ict.head),
        # or a ConfigError naming a model whose transform ict does not know
        logit_head(self.model)
        method = self.ict_resolve().method  # the config, resolved once
        check_whole_groups(  # the training batch's layout, checked up front
            self.args.per_device_train_batch_size * self.args.steps_per_generation,
            self.num_generations, self.accelerator.num_processes, "train", method.reference,
        )  # fmt: skip
        if method.reference == "reference_policy" and self.ref_model is None:
            raise ConfigError(
                "reference='reference_policy' needs a separate reference model (TRL has none with PEFT): "
                "use reference='batch_mean' or train without PEFT."
            )
        self._ict_temperature = self.temperature

    # ---- the plan, resolved once ----------------------------------------------------------------
    def ict_resolve(self) -> StepPlan:
        """Resolve this trainer's step once (ict.step.StepPlan.resolve): the config's method
        (`ICTGRPOConfig.resolved_method`) with its warm-up fitted to the run's generation batches when
        TRL knows them, ict's loss settings for it (`ict_loss_config`), the single-forward decision
        on TRL's layout (`trl_layout`) and the seed streams; every batch reads it. Called at
        set-up and when training begins; call it again after changing `self.args` in place."""
        args = self.args
        method = args.resolved_method()
        total = None
        if getattr(self.state, "max_steps", 0) and self.state.max_steps > 0:
            total = max(1, math.ceil(self.state.max_steps / self._ict_batches_per_generation()))
        layout = trl_layout(
            args, method, total_batches=total, num_iterations=self.num_iterations,
            group_size=self.num_generations, processes=self._ict_processes,
            multimodal=self.model.config.get_text_config() is not self.model.config,
        )  # fmt: skip
        self.ict_plan = StepPlan.resolve(
            args, layout, seed=args.seed, loss=self.ict_loss_config, method=method
        )
        # evaluation selects with the method's own selection from the first batch on
        self._ict_eval_plan = self.ict_plan.with_method(
            dataclasses.replace(self.ict_plan.method, dense_warmup_steps=0)
        )
        if self.ict_plan.warning and not self._ict_warned:
            logger.warning("%s", self.ict_plan.warning)
            self._ict_warned = True
        if not self.ict_plan.one_forward:
            logger.info("statistics from a separate forward: %s", self.ict_one_forward_reason)
        return self.ict_plan

    @property
    def ict_one_forward(self) -> bool:
        """Whether ict's statistics come from the loss forward (no statistics forward)."""
        return self.ict_plan.one_forward

    @property
    def ict_one_forward_reason(self) -> str:
        """Why the statistics need their own forward ("" when they do not)."""
        return self.ict_plan.one_forward_off or ""

    def ict_method(self) -> Method:
        """The method this trainer runs (the plan's: its warm-up fitted to the run; the config's
        before the fit is `ICTGRPOConfig.resolved_method`)."""
        return self.ict_plan.method

    def _ict_batches_per_generation(self) -> float:
        """Optimizer steps per generation batch: steps_per_generation * num_iterations / GA."""
        ga = self.args.gradient_accumulation_steps
        return self.args.steps_per_generation * self.num_iterations / ga

    def ict_rollout_batch(self) -> int:
        """The 1-based index of the current generation batch, the unit of the warm-up and the
        selection seed on every engine (native: the training step; verl: global_steps). From TRL's
        restored `state.global_step`, so it survives a resume."""
        return int(self.state.global_step // self._ict_batches_per_generation()) + 1

    # ---- 0. the method's advantages ------------------------------------------------------------
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        """TRL's, its gathered rewards [N_all, F] (every process, generation order) kept for
        `ict_advantages`."""
        rewards_per_func = super()._calculate_rewards(
            inputs, prompts, completions, completion_ids_list
        )
        self._ict_rewards_per_func = rewards_per_func
        return rewards_per_func

    def ict_advantages(self, rewards_per_func, group_size: int, n_local: int):
        """This process's advantages float[n_local] by the method's estimator (ict.loss
        .compute_advantages) from TRL's gathered rewards [N_all, F]: summed with TRL's
        `reward_weights`, one group per `group_size` consecutive rows; a row every reward
        function left unscored (NaN) gets 0, as TRL gives it."""
        from ict.loss import compute_advantages

        weights = self.reward_weights.to(rewards_per_func.device)
        unscorable = torch.isnan(rewards_per_func).all(dim=1)
        rewards = (rewards_per_func * weights.unsqueeze(0)).nansum(dim=1)
        groups = torch.arange(rewards.numel(), device=rewards.device) // group_size
        advantages, _ = compute_advantages(rewards, groups, mode=self.ict_method().advantage)
        advantages = torch.where(unscorable, torch.zeros_like(advantages), advantages)
        start = self.accelerator.process_index * n_local
        return advantages[start : start + n_local]

    # ---- 1. statistics of the old policy, once per generation batch -------------------------------
    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        mode = "train" if self.model.training else "eval"
        if self.ict_method().advantage != "grpo":  # TRL computed grpo's; the method's instead
            size = self.num_generations if mode == "train" else self.num_generations_eval
            out["advantages"] = self.ict_advantages(
                self._ict_rewards_per_func, size, out["completion_ids"].size(0)
            ).to(out["advantages"].dtype)
        self._ict_log_zero_variance(mode)
        n_local = out["completion_ids"].size(0)
        group_size = self.num_generations if mode == "train" else self.num_generations_eval
        rows = self.accelerator.process_index * n_local + torch.arange(
            n_local, device=out["completion_ids"].device
        )
        check_whole_groups(
            n_local, group_size, self.accelerator.num_processes, mode, self.ict_method().reference
        )
        out["ict_row"] = rows
        if mode == "train" and self.ict_one_forward:  # from the loss forward (single_forward)
            return out
        valid = self._valid_mask(out)
        stats = self.ict_token_stats(
            out["prompt_ids"], out["prompt_mask"], out["completion_ids"], out["completion_mask"], valid,
            rows // group_size,
        )  # fmt: skip
        out.update({f"ict_{f}": getattr(stats, f) for f in STAT_COLUMNS})
        if stats.kl is not None:
            out["ict_kl"] = stats.kl
        return out

    def _ict_log_zero_variance(self, mode) -> None:
        """`zero_variance_share` (groups whose rewards are all equal / groups): TRL's own
        `frac_reward_zero_std` of this generation batch, which is that share when the std is the
        group's (scale_rewards "group" or "none", rewards summed before normalising: each group
        is num_generations rows); not logged otherwise."""
        logged = self._metrics[mode]
        per_group = self.scale_rewards in ("group", "none") and (
            self.multi_objective_aggregation == "sum_then_normalize"
        )
        if per_group and logged.get("frac_reward_zero_std"):
            logged["zero_variance_share"].append(logged["frac_reward_zero_std"][-1])

    @staticmethod
    def _valid_mask(inputs) -> torch.Tensor:
        mask = inputs["completion_mask"].bool()
        return mask if inputs.get("tool_mask") is None else mask & inputs["tool_mask"].bool()

    # ---- 2. the step, once per generation batch, after TRL's shuffle and split --------------------
    def ict_select(self, method, stats, valid, advantages, tokens, *, local=False):
        """Selection mask [B, C] bool (subset of `valid`) for rows in generation order, without
        the warm-up (ict.step.StepPlan.select_own, the selection every engine runs).

        method: a resolved ict.methods.Method, or a name (this config's method with its overrides,
        any other name with its own settings). advantages: [B] or [B, C]; tokens: [B, C] long.
        `local=True` selects inside this batch only (micro-batch scope); otherwise the method's
        scope applies, "global" across all processes.
        """
        from ict.methods import get_method

        if isinstance(method, str):
            method = (
                self.ict_method() if method == self.args.method else get_method(method).resolved()
            )
        if local:
            method = dataclasses.replace(method, scope="micro_batch")
        where = {"micro_batch_size": valid.size(0)} if local else {}
        inputs = StepInputs(valid, stats, advantages, tokens)
        plan = self.ict_plan.with_method(method)
        return plan.select_own(inputs, step=self.ict_rollout_batch(), **where)

    def _prepare_inputs(self, generation_batch):
        if not self.model.training:
            inputs = super()._prepare_inputs(generation_batch)
            self._ict_apply_selection([inputs], "eval")
            return inputs
        before = self._buffered_inputs
        inputs = super()._prepare_inputs(generation_batch)
        if self._buffered_inputs is not before:  # a new generation batch was produced and split
            if not self.ict_one_forward:
                self._ict_apply_selection(self._buffered_inputs, "train")
                return inputs
            if self.ict_plan.layout.micro_batches > 1:  # regrouped: whole groups per micro-batch
                self._buffered_inputs = regroup(self._buffered_inputs)
                inputs = self._buffered_inputs[self._step % self.args.steps_per_generation]
            self._ict_prepare_one_forward(self._buffered_inputs)
        return inputs

    def _ict_in_order(self, chunks):
        """The micro-batches `chunks` as one batch in generation order (independent of TRL's
        shuffle): (order [B], stats, valid [B, C], advantages, tokens [B, C])."""

        def cat(key):
            return torch.cat([c[key] for c in chunks], dim=0)

        order = torch.argsort(cat("ict_row"))
        kl = cat("ict_kl")[order] if chunks[0].get("ict_kl") is not None else None
        stats = TokenStats(**{f: cat(f"ict_{f}")[order] for f in STAT_COLUMNS}, kl=kl)
        valid = torch.cat([self._valid_mask(c) for c in chunks], dim=0)[order]
        return order, stats, valid, cat("advantages")[order], cat("completion_ids")[order]

    def _ict_apply_selection(self, chunks, mode):
        """The plan's step on the micro-batches `chunks` (ict.step.StepRun on their rows in
        generation order, the statistics given: two passes): adds `ict_selected` and the loss's
        per-optimizer-step normalisers (in place), and logs the step's metrics."""
        plan = self.ict_plan if mode == "train" else self._ict_eval_plan
        order, stats, valid, advantages, tokens = self._ict_in_order(chunks)
        sizes = [c["completion_ids"].size(0) for c in chunks]
        where = {}
        if plan.method.scope == "micro_batch":  # TRL's micro-batches, shuffled: one id per row
            ids = torch.repeat_interleave(torch.arange(len(chunks)), torch.tensor(sizes))
            where["micro_batch_ids"] = ids.to(valid.device)[order]
        run = plan.begin(
            StepInputs(valid, stats, advantages, tokens), step=self.ict_rollout_batch(), **where
        )
        result = run.finish(gather=self._ict_gather)
        back = torch.argsort(order)  # generation order -> the micro-batches' rows
        for c, s in zip(chunks, result.selection.selected[back].split(sizes), strict=True):
            c["ict_selected"] = s
        self._ict_set_normalisers(chunks, result.counts.take(back).split(sizes), mode)
        self._ict_log(mode, result.metrics)

    def _ict_gather(self, x: torch.Tensor) -> torch.Tensor:
        """[B, C] of this process -> [sum B, max C] of every process (rank order, 0-padded)."""
        if self.accelerator.num_processes == 1:
            return x
        return self.accelerator.gather(self.accelerator.pad_across_processes(x, dim=1))

    def _ict_log(self, mode, metrics: dict) -> None:
        """The step's metrics (ict.step.step_metrics over every process's batch: the native
        trainer's keys) into TRL's running means; NaN (an empty set) is left out."""
        for key, value in metrics.items():
            if value == value:
                self._metrics[mode][key].append(float(value))
