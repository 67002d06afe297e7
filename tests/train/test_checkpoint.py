"""Checkpoints: atomic write, `latest`, keep-last, exact weights and trainer state on load."""

import random

import numpy as np
import torch

from ict.files import latest_checkpoint, list_checkpoints
from ict.testing import tiny_model_and_tokenizer
from ict.train import checkpoint as ckpt


def test_round_trip_keep_last_and_partial_dirs(tmp_path):
    model, tok = tiny_model_and_tokenizer(seed=0, tie_word_embeddings=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.tensor([[5, 6, 7]])).logits.sum().backward()
    opt.step()
    for step in (1, 2, 3):
        ckpt.save_checkpoint(
            tmp_path, step, model, tok, {"optimizer": opt.state_dict(), "extra": step}, keep_last=2
        )
    names = [p.name for p in list_checkpoints(tmp_path)]
    assert names == ["step_000002", "step_000003"]
    assert (tmp_path / "checkpoints" / "latest").read_text() == "step_000003"
    (tmp_path / "checkpoints" / ".tmp_step_000004").mkdir()  # a killed write
    assert latest_checkpoint(tmp_path).name == "step_000003"
    ckpt.clean_partial(tmp_path)
    assert not (tmp_path / "checkpoints" / ".tmp_step_000004").exists()

    random.random(), np.random.rand(), torch.rand(1)  # move the RNGs; restoring must undo this
    fresh, _ = tiny_model_and_tokenizer(seed=1, tie_word_embeddings=True)
    state = ckpt.load_checkpoint(latest_checkpoint(tmp_path), fresh)
    for (name, a), b in zip(model.state_dict().items(), fresh.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    assert fresh.get_output_embeddings().weight is fresh.get_input_embeddings().weight
    assert state["step"] == 3 and state["extra"] == 3
    opt2 = torch.optim.AdamW(fresh.parameters(), lr=1e-3)
    opt2.load_state_dict(state["optimizer"])
    ckpt.set_rng_state(state["rng"])
    expected = torch.rand(3)
    ckpt.set_rng_state(state["rng"])
    assert torch.equal(torch.rand(3), expected)


def test_checkpoint_dir_loads_with_ict_models(tmp_path):
    from ict.models import load_model_and_tokenizer

    model, tok = tiny_model_and_tokenizer(seed=0)
    ckpt.save_checkpoint(tmp_path, 5, model, tok, {})
    loaded, _ = load_model_and_tokenizer(tmp_path)  # a run dir resolves to its latest checkpoint
    ids = torch.tensor([[5, 6, 7]])
    torch.testing.assert_close(loaded(ids).logits, model(ids).logits)
