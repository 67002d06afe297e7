"""ict.stats under torch.distributed: 2 gloo processes on CPU, each with half the batch, must give
exactly what one process gives on the whole batch (batch_mean: the sum and count are all-reduced;
group_position: groups are rank-local, and a split group is a clear error)."""

import os
import tempfile

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from ict.errors import ConfigError
from ict.head import LogitHead
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
        b = token_stats_from_hidden(
            hidden[part], LogitHead(W), tokens[part], mask[part], chunk_size=2
        )
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


def _group_position_worker(rank, init_file, out_dir):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    try:
        hidden, W, tokens, mask = _batch()
        mask[2, 1:4] = True  # rank 1's first row reaches a few positions too
        part = slice(2 * rank, 2 * rank + 2)
        local_groups = torch.tensor([7, 7, 3, 3])  # each group's rows on one rank
        kw = {"reference": "group_position", "divergence": "kl"}
        a = token_stats(
            hidden[part] @ W.T, tokens[part], mask[part], group_ids=local_groups[part], **kw
        )
        b = token_stats_from_hidden(
            hidden[part],
            LogitHead(W),
            tokens[part],
            mask[part],
            group_ids=local_groups[part],
            chunk_size=1,
            **kw,
        )
        split_groups = torch.tensor([7, 3, 7, 3])  # both groups straddle the two ranks
        try:
            token_stats(
                hidden[part] @ W.T, tokens[part], mask[part], group_ids=split_groups[part], **kw
            )
            error = ""
        except ConfigError as e:
            error = str(e)
        torch.save(
            {"js": a.js, "kl": a.kl, "hidden_js": b.js, "error": error},
            os.path.join(out_dir, f"gp{rank}.pt"),
        )
    finally:
        dist.destroy_process_group()


@pytest.mark.slow  # two fresh interpreters importing torch
def test_group_position_over_two_gloo_ranks():
    """Rank-local groups: the scores equal the single-process ones. A group split across ranks: the
    same ConfigError on every rank (no hang), naming the setting to change."""
    hidden, W, tokens, mask = _batch()
    mask[2, 1:4] = True
    whole = token_stats(
        hidden @ W.T,
        tokens,
        mask,
        reference="group_position",
        group_ids=torch.tensor([7, 7, 3, 3]),
        divergence="kl",
    )
    assert whole.js[mask].gt(0).any()  # a non-trivial comparison
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_group_position_worker, args=(os.path.join(tmp, "init"), tmp), nprocs=2, join=True)
        parts = [torch.load(os.path.join(tmp, f"gp{r}.pt")) for r in range(2)]
    for key, ref in (("js", whole.js), ("kl", whole.kl), ("hidden_js", whole.js)):
        torch.testing.assert_close(torch.cat([p[key] for p in parts]), ref, atol=1e-7, rtol=0)
    for p in parts:
        assert "Keep each prompt's G rollouts on one rank" in p["error"]
        assert "group 3 on ranks [0, 1]" in p["error"] and "group 7 on ranks [0, 1]" in p["error"]
