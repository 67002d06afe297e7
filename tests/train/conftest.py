"""Fixtures for trainer tests: the tiny offline model and a task it can learn in seconds."""

import pytest

from ict.train import Problem, TrainConfig


def starts_with_digit(text: str) -> float:
    """The learnable task: reward 1 when the response starts with a digit (~10% at random init)."""
    return 1.0 if text[:1].isdigit() else 0.0


@pytest.fixture
def digit_problems():
    return [Problem(f"Say a digit {i}:", starts_with_digit) for i in range(16)]


@pytest.fixture
def tiny_config(tmp_path):
    """A CI-sized config: 4 prompts x 8 samples, 3 new tokens, no plots/progress."""

    def make(**changes):
        base = dict(
            max_steps=2,
            prompts_per_step=4,
            num_generations=8,
            max_new_tokens=3,
            stop=[],
            learning_rate=2e-2,
            warmup_steps=0,
            save_every=0,
            plots=False,
            progress=False,
            micro_batch_size=16,
            output_dir=str(tmp_path / "run"),
        )
        return TrainConfig(**{**base, **changes})

    return make


@pytest.fixture(scope="module")
def batch():
    """The update tests' rollout batch (tests/train/update_helpers.py `make_batch`)."""
    from tests.train.update_helpers import make_batch

    return make_batch()
