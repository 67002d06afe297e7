"""The rules of a step that every engine shares (ict.step.selection) and the native trainer's
schedule, dropout and KL normaliser: each test here failed before these rules were written once."""

import logging
import math

import pytest
import torch

from ict.methods import get_method, resolve_method
from ict.step import is_dense, run_warmup, selection_seed, warmup_warning
from ict.train import TrainConfig
from ict.train.schedule import LRSchedule


def test_warmup_is_counted_in_rollout_batches_and_capped_once():
    ict = get_method("ict").resolved()  # the paper's Theta = 10
    assert run_warmup(ict, 10, explicit=False).dense_warmup_steps == 5  # half of a short run
    assert run_warmup(ict, 100, explicit=False).dense_warmup_steps == 10
    assert run_warmup(ict, None, explicit=False).dense_warmup_steps == 10  # length not known
    # an explicit warm-up is kept, with a warning when it covers the run
    kept = run_warmup(ict, 10, explicit=True)
    assert kept.dense_warmup_steps == 10 and "covers the whole run" in warmup_warning(kept, 10)
    assert warmup_warning(run_warmup(ict, 10, explicit=False), 10) is None
    assert [is_dense(run_warmup(ict, 10, explicit=False), s) for s in (5, 6)] == [True, False]
    # the native config applies the same rule
    from ict.train.plan import RunPlan

    assert RunPlan.from_config(TrainConfig(max_steps=10)).method.dense_warmup_steps == 5


def test_selection_seed_is_one_rule():
    from ict.seeds import stream_seed

    assert selection_seed(2, 3) == stream_seed(2, "selection", 3)  # the selection's own stream
    assert len({selection_seed(s, t) for s in range(3) for t in range(1, 50)}) == 3 * 49


def test_an_explicit_warmup_covering_the_run_is_warned_about(
    tiny, digit_problems, tiny_config, caplog
):
    from ict.train.trainer import Trainer

    with caplog.at_level(logging.WARNING, logger="ict.train"):
        Trainer(tiny_config(dense_warmup_steps=5), model=tiny[0], tokenizer=tiny[1],
                problems=digit_problems)  # fmt: skip
    assert "covers the whole run of 2 rollout batches" in caplog.text


def test_lr_schedule_follows_the_updates_a_step_takes():
    """8 rows, G = 4, mini_batch_size = 3: whole groups make 2 updates per step, not
    ceil(8 / 3) = 3; a linear decay reaches its end on the updates that run."""
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=1.0)
    schedule = LRSchedule(optimizer, warmup_steps=0, kind="linear", max_steps=2)
    lrs = [schedule.set(step, k, 2) for step in (1, 2) for k in range(2)]
    assert lrs == [1.0, 0.75, 0.5, 0.25]
    optimizer = torch.optim.SGD([param], lr=1.0)
    schedule = LRSchedule(optimizer, warmup_steps=0, kind="cosine", max_steps=1)
    assert [schedule.set(1, k, 2) for k in range(2)] == pytest.approx([1.0, 0.5])
    state = schedule.state_dict()
    again = LRSchedule(optimizer, warmup_steps=3, kind="constant", max_steps=1)
    again.load_state_dict(state)
    assert again.updates == 2
    again.load_state_dict({"last_epoch": 7, "base_lrs": [1.0]})  # a LambdaLR checkpoint
    assert again.updates == 7


def test_update_sets_the_lr_from_its_own_number_of_updates(tiny, digit_problems, tiny_config):
    from ict.train.trainer import Trainer

    cfg = tiny_config(prompts_per_step=2, num_generations=4, mini_batch_size=3, max_steps=2,
                      lr_scheduler="linear", learning_rate=1e-3)  # fmt: skip
    trainer = Trainer(cfg, model=tiny[0], tokenizer=tiny[1], problems=digit_problems)
    trainer.train()
    updates = [row["update/updates"] for row in trainer.history]
    assert updates == [2, 2]  # one group of 4 rows per mini-batch
    assert [row["lr"] for row in trainer.history] == pytest.approx([1e-3, 0.5e-3])
    assert trainer.scheduler.updates == 4


def test_dropout_is_off_in_both_passes_so_the_first_ratio_is_one(digit_problems, tiny_config):
    from transformers import LlamaConfig, LlamaForCausalLM

    from ict.testing import tiny_tokenizer
    from ict.train.trainer import Trainer

    tok = tiny_tokenizer()
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, attention_dropout=0.5,
        pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
    ))  # fmt: skip
    trainer = Trainer(tiny_config(max_steps=1, method="grpo"), model=model, tokenizer=tok,
                      problems=digit_problems)  # fmt: skip
    assert model.model.layers[0].self_attn.attention_dropout == 0.0
    row = trainer.train_step()
    assert row["loss/ratio/mean"] == pytest.approx(1.0, abs=1e-6)
    assert row["clip_fraction"] == 0.0


def test_kl_over_valid_tokens_with_the_ict_default_normaliser_runs(
    tiny, digit_problems, tiny_config
):
    """kl_on='valid' with normalize_by='selected' (ICT's): the KL term gets its own normaliser
    (valid tokens) and the policy term keeps its own (selected tokens)."""
    from ict.loss import LossConfig, policy_loss
    from ict.train.trainer import Trainer

    cfg = tiny_config(method="ict", kl_coef=0.1, kl_on="valid", dense_warmup_steps=0, max_steps=1)
    trainer = Trainer(cfg, model=tiny[0], tokenizer=tiny[1], problems=digit_problems)
    row = trainer.train_step()
    # the first update of the run: the policy is still the reference model, so k3 = exp(0)-0-1 = 0
    assert math.isfinite(row["loss/total"]) and row["kl_ref"] == pytest.approx(0.0, abs=1e-7)

    # by hand: token_mean with kl over valid = sum(l M)/|M| + beta * sum(kl v)/|v|
    g = torch.Generator().manual_seed(0)
    mask = torch.ones(2, 5, dtype=torch.bool)
    selected = torch.zeros(2, 5, dtype=torch.bool)
    selected[:, 1] = True
    old = -torch.rand(2, 5, generator=g)
    new = old + 0.05 * torch.randn(2, 5, generator=g)
    ref = old - 0.1
    c = LossConfig(loss_agg="token_mean", kl_coef=0.5, kl_on="valid", kl_estimator="k1")
    loss, _ = policy_loss(
        new, old, torch.ones(2), mask, selected, c, ref_logprob=ref,
        denominator=c.denominator(mask, selected), kl_denominator=c.denominator(mask, selected, term="kl"),
    )  # fmt: skip
    ratio = torch.exp(new - old)
    pg = -torch.minimum(ratio, ratio.clamp(0.8, 1.28))[selected].mean()
    kl = (new - ref).mean()
    torch.testing.assert_close(loss, pg + 0.5 * kl)


def test_method_options_are_declared_once_for_every_engine(tmp_path):
    """TrainConfig and ICTGRPOConfig inherit the same MethodOptions, checked by one function
    (verl's IctVerlConfig too: tests/integrations/verl_plugin/test_verl_plugin.py)."""
    import dataclasses

    from ict.errors import ConfigError
    from ict.methods import MethodOptions

    trl = pytest.importorskip("ict.integrations.trl")
    shared = {f.name for f in dataclasses.fields(MethodOptions)}
    assert issubclass(TrainConfig, MethodOptions) and issubclass(trl.ICTGRPOConfig, MethodOptions)
    assert shared <= {f.name for f in dataclasses.fields(trl.ICTGRPOConfig)}
    with pytest.raises(ConfigError, match=r"^ratio=1.5 must be in \(0, 1\]"):
        TrainConfig(ratio=1.5)
    with pytest.raises(ConfigError, match=r"^ratio=1.5 must be in \(0, 1\]"):
        trl.ICTGRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to=[], ratio=1.5)
    args = trl.ICTGRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to=[],
                             method="random_sequence")  # fmt: skip
    assert args.resolved_method() == resolve_method(TrainConfig(method="random_sequence"))
