"""Crash-safe checkpoints: RUN_DIR/checkpoints/step_000N/ written to a temp dir, then renamed.

A checkpoint holds the policy (`model.safetensors` + config + tokenizer via `save_pretrained`, so
`ict eval --model RUN_DIR` loads it) and `trainer_state.pt` (optimizer, scheduler, RNG states of
python / numpy / torch, step, data-sampler state). `checkpoints/latest` names the newest complete
one and is itself replaced atomically, so a run killed at any moment (SIGKILL included) resumes
from the last complete checkpoint. The layout, the completeness test and the lookup
(`list_checkpoints`, `latest_checkpoint`) are the run-directory conventions of ict.files.
"""

from __future__ import annotations

import errno
import os
import random
import shutil
from pathlib import Path

import numpy as np
import torch

from ict.errors import UserError
from ict.files import (
    CHECKPOINTS,
    LATEST,
    MIN_FREE_BYTES,
    STATE_FILE,
    checkpoint_name,
    list_checkpoints,
    replace_atomic,
    write_atomic,
)
from ict.models import drop_gguf_marker  # a model the user loaded from GGUF


def rng_state() -> dict:
    state = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(
    run_dir: Path, step: int, model, tokenizer, trainer_state: dict, *, keep_last: int = 2
) -> Path:
    """Write checkpoint `step` atomically, point `latest` at it, keep the newest `keep_last`.

    Args:
        trainer_state: optimizer / scheduler state dicts, sampler state, anything torch.save takes;
            the RNG states and `step` are added here.
    Returns:
        The final checkpoint directory.
    """
    root = Path(run_dir) / CHECKPOINTS
    root.mkdir(parents=True, exist_ok=True)
    final = root / checkpoint_name(step)
    tmp = root / f".tmp_{checkpoint_name(step)}"
    if tmp.exists():
        shutil.rmtree(tmp)
    from transformers.utils import logging as hf_logging

    drop_gguf_marker(model)
    bar_was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # no "Writing model shards" bar inside the training bar
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        torch.save({**trainer_state, "step": step, "rng": rng_state()}, tmp / STATE_FILE)
    except Exception as err:
        # a failed save (the disk filled) leaves the previous checkpoint and `latest` as they
        # were and frees what it wrote; torch.save reports a full disk as a RuntimeError, read
        # here as the OSError it is (ict.files.is_write_failure: one line from the CLI)
        full = shutil.disk_usage(root).free < MIN_FREE_BYTES
        shutil.rmtree(tmp, ignore_errors=True)
        if full and not isinstance(err, OSError):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(final)) from err
        raise
    finally:
        if bar_was_enabled:
            hf_logging.enable_progress_bar()
    replace_atomic(tmp, final)
    write_atomic(root / LATEST, final.name)
    for old in list_checkpoints(run_dir)[:-keep_last]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def load_checkpoint(checkpoint_dir: Path, model) -> dict:
    """Load the policy weights of `checkpoint_dir` into `model` in place; return the trainer state.

    The trainer state is loaded with `weights_only=False` (it holds numpy RNG state): only resume
    checkpoints you wrote yourself.
    """
    from safetensors.torch import load_file

    checkpoint_dir = Path(checkpoint_dir)
    weights = checkpoint_dir / "model.safetensors"
    if not weights.is_file():
        raise UserError(
            f"checkpoint {checkpoint_dir} has no model.safetensors; it is incomplete, delete it"
        )
    device = next(model.parameters()).device
    state = load_file(str(weights), device=str(device))
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = set(getattr(model, "_tied_weights_keys", None) or [])
    if isinstance(getattr(model, "_tied_weights_keys", None), dict):
        tied = set(model._tied_weights_keys)
    really_missing = [k for k in missing if k not in tied]
    if really_missing or unexpected:
        raise UserError(
            f"checkpoint {checkpoint_dir} does not match the model (missing {really_missing[:3]}, "
            f"unexpected {unexpected[:3]}); resume with the same --model as the original run"
        )
    if hasattr(model, "tie_weights"):
        model.tie_weights()
    return torch.load(checkpoint_dir / STATE_FILE, map_location="cpu", weights_only=False)


def clean_partial(run_dir: Path) -> None:
    """Remove temp dirs left by a run killed while writing a checkpoint."""
    root = Path(run_dir) / CHECKPOINTS
    if root.is_dir():
        for tmp in root.glob(".tmp_*"):
            shutil.rmtree(tmp, ignore_errors=True)
