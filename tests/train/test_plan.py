"""A run resolved once (RunPlan) and the one training step (TrainingStep over a PolicyContext)."""

import dataclasses

import pytest
import torch

from ict.methods import get_method
from ict.seeds import derive_seed
from ict.step import selection_seed
from ict.train import TrainConfig
from ict.train.plan import BatchPlan, RunPlan, SeedStreams


def test_the_plan_resolves_the_method_loss_batch_sampling_and_seeds_once():
    config = TrainConfig(max_steps=6, num_generations=4, micro_batch_size=10, seed=3, top_p=0.9)
    plan = RunPlan.from_config(config)
    ict = get_method("ict").resolved()
    # the paper's warm-up (10 rollout batches) capped at half of the run, in the saved config too
    assert plan.method.dense_warmup_steps == plan.config.dense_warmup_steps == 3
    assert (plan.config.reference, plan.config.scope) == (ict.reference, ict.scope)
    assert plan.loss.normalize_by == ict.normalize_by and plan.loss.max_response_length == 24
    # whole groups of G = 4 rows per micro-batch (10 rounds down to 8); the whole batch per update
    assert plan.batch == BatchPlan(group=4, micro_rows=8, mini_rows=None, epochs=1)
    assert plan.batch.rows(12) == (4, 8) and plan.batch.rows(10) == (1, 8)  # not whole groups
    s = plan.sampling
    assert (s.top_p, s.max_new_tokens, s.batch_size, s.stop) == (0.9, 24, 64, ("</answer>",))
    assert plan.device == torch.device("cpu") or plan.device.type == "cuda"
    assert not plan.needs_reference_model and plan.warning is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.method = ict  # resolved once: nobody re-derives or changes it


def test_seed_streams_follow_the_one_seed_rule():
    seeds = SeedStreams(2)
    assert seeds.sampling(5) == derive_seed(2, 5) == 2 * 1_000_003 + 5
    assert seeds.selection(5) == selection_seed(2, 5)  # what TRL and verl use for the selection
    assert seeds.shuffle(5) != seeds.selection(5) != seeds.sampling(5)  # each its own stream
    assert seeds.prompts == seeds.init == 2


def test_explicit_warmup_over_the_whole_run_warns_and_a_reference_model_is_planned():
    plan = RunPlan.from_config(TrainConfig(max_steps=4, dense_warmup_steps=4))
    assert plan.method.dense_warmup_steps == 4 and "covers the whole run" in plan.warning
    assert RunPlan.from_config(TrainConfig(kl_coef=0.1)).needs_reference_model
    assert RunPlan.from_config(TrainConfig(reference="reference_policy")).needs_reference_model


def test_the_trainer_steps_through_the_step_service(tiny, digit_problems, tiny_config):
    """The trainer's metrics line is the step service's metrics plus the rollout's and health's:
    one step, assembled in one place, with the trainer's plan (not re-derived)."""
    from ict.train.trainer import Trainer

    config = tiny_config(method="grpo", max_steps=1)
    trainer = Trainer(config, model=tiny[0], tokenizer=tiny[1], problems=digit_problems)
    assert trainer.step_service.plan is trainer.plan and trainer.policy.model is trainer.model
    calls = []
    original = trainer.step_service.train_on_rollout

    def run(rollout, rewards, *, step):
        metrics, scored = original(rollout, rewards, step=step)
        calls.append(metrics)
        return metrics, scored

    trainer.step_service.train_on_rollout = run
    row = trainer.train_step()
    trainer.close()
    assert len(calls) == 1 and calls[0].items() <= row.items()
    assert {"reward/mean", "health/entropy_collapse", "step"} <= set(row) - set(calls[0])
