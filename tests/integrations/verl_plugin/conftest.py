"""Fixtures of the verl tests (collected in the main environment too, where they stay unused)."""

import os

import pytest


@pytest.fixture(scope="module")
def gloo():
    """A one-process gloo group (verl's engine all-reduces its token counts)."""
    import torch.distributed as dist

    if not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29533")
        dist.init_process_group("gloo", rank=0, world_size=1)
    yield
    dist.destroy_process_group()
