"""What TRL's own GRPO trainer suite found when run against ICTGRPOTrainer
(scripts/peer_tests/trl_grpo.py, docs/engines/trl.md), checked here against TRL's GRPOTrainer."""

from __future__ import annotations

import inspect

import pytest

pytest.importorskip("trl")

from _trl_helpers import run_tiny, toy_dataset  # noqa: E402


def test_reward_funcs_is_optional_as_in_trl(tmp_path):
    """TRL's test_no_reward_source_raises: without reward_funcs, TRL's own ValueError (not a
    TypeError about a missing argument)."""
    from trl import GRPOConfig, GRPOTrainer

    from ict.integrations.trl import ICTGRPOConfig, ICTGRPOTrainer
    from ict.testing import tiny_model_and_tokenizer

    ours = inspect.signature(ICTGRPOTrainer.__init__).parameters["reward_funcs"].default
    assert ours is inspect.signature(GRPOTrainer.__init__).parameters["reward_funcs"].default

    def build(trainer, config):
        model, tokenizer = tiny_model_and_tokenizer()
        with pytest.raises(ValueError) as err:
            trainer(model=model, args=config(output_dir=str(tmp_path), use_cpu=True, bf16=False,
                                             report_to=[]),
                    train_dataset=toy_dataset(), processing_class=tokenizer)  # fmt: skip
        return str(err.value)

    assert build(ICTGRPOTrainer, ICTGRPOConfig) == build(GRPOTrainer, GRPOConfig)


def test_entropy_bonus_coefficient_is_logged_as_trl_logs_it(tmp_path):
    """TRL's test_train_with_static_entropy reads `entropy_coef` from the log: ict's bonus (which
    ict computes, TRL's own term off) logs its coefficient under that name, once per step."""
    trainer = run_tiny(tmp_path, method="entropy_bonus", max_steps=1)
    assert not trainer._entropy_bonus_enabled  # TRL's own term stays off
    assert trainer.state.log_history[0]["entropy_coef"] == pytest.approx(0.01)
