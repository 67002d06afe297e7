"""batch_mean under torch.distributed: 2 gloo processes on CPU, each with half the batch, must give
exactly what one process gives on the whole batch (the mean's sum and count are all-reduced)."""

import os
import tempfile

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from ict.stats import token_stats, token_stats_from_hidden


def _batch():
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(4, 5, 8, generator=g, dtype=torch.float64)
    W = torch.randn(30, 8, generator=g, dtype=torch.float64)
    tokens = torch.randint(0, 30, (4, 5), generator=g)
    mask = torch.rand(4, 5, generator=g) < 0.7
    mask[2:] = False  # rank 1 holds no valid position in its first row...
    mask[3, 1:] = True  # ...but some in its second
    return hidden, W, tokens, mask


def _worker(rank, init_file, out_dir):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    try:
        hidden, W, tokens, mask = _batch()
        part = slice(2 * rank, 2 * rank + 2)
        logits = hidden[part] @ W.T
        a = token_stats(logits, tokens[part], mask[part])
        b = token_stats_from_hidden(hidden[part], W, tokens[part], mask[part], chunk_size=2)
        # NaN logits on rank 0: rank 0 names the position, rank 1 learns the mean is poisoned; no hang
        if rank == 0:
            logits[1, 2, 0] = float("nan")
        try:
            token_stats(logits, tokens[part], mask[part] | True)
            error = ""
        except ValueError as e:
            error = str(e)
        torch.save(
            {"logits": a.js, "hidden": b.js, "entropy": a.entropy, "error": error},
            os.path.join(out_dir, f"rank{rank}.pt"),
        )
    finally:
        dist.destroy_process_group()


@pytest.mark.slow  # two fresh interpreters importing torch: ~10 s on a busy 2-core machine
def test_batch_mean_all_reduced_over_two_gloo_ranks():
    hidden, W, tokens, mask = _batch()
    whole = token_stats(hidden @ W.T, tokens, mask)
    local = token_stats(hidden[:2] @ W.T, tokens[:2], mask[:2])  # what rank 0 would get alone
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_worker, args=(os.path.join(tmp, "init"), tmp), nprocs=2, join=True)
        parts = [torch.load(os.path.join(tmp, f"rank{r}.pt")) for r in range(2)]
    for key in ("logits", "hidden"):
        got = torch.cat([p[key] for p in parts])
        torch.testing.assert_close(got, whole.js, atol=1e-7, rtol=0)
    assert not torch.allclose(local.js, whole.js[:2])  # the all-reduce mattered
    torch.testing.assert_close(torch.cat([p["entropy"] for p in parts]), whole.entropy)
    assert "row 1, position 2" in parts[0]["error"]
    assert "another rank" in parts[1]["error"]
