"""Test-wide settings: few threads (oversubscribed threads make CPU steps 100x slower), offline hub."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

torch.set_num_threads(int(os.environ.get("ICT_TEST_THREADS", "1")))

settings.register_profile(
    "ci", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci")


@pytest.fixture(scope="session")
def verifier():
    """The verifier (ict.rewards.Verifier: math-verify in its own child process, 5 s a call),
    one for the whole session."""
    from ict.rewards import Verifier

    v = Verifier(timeout_s=5.0)
    yield v
    v.close()


@pytest.fixture
def tiny():
    """(model, tokenizer): the tiny offline Llama and its character tokenizer (ict.testing),
    fresh for each test."""
    from ict.testing import tiny_model_and_tokenizer

    return tiny_model_and_tokenizer(seed=0)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """The tiny model saved with save_pretrained: a path for --model."""
    from ict.testing import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("tiny"))
