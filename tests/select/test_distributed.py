"""scope='global' across 2 ranks equals one process on the concatenated batch.

The gloo test spawns real processes (slow); the fast test runs the same logic with two threads
exchanging tensors through a fake all-gather.
"""

import os
import threading
from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import ict.select.core as core
from ict.select import select_tokens

CASES = [
    dict(name="js_top", ratio=0.1, scope="global"),
    dict(name="js_top", ratio=0.3, granularity="token_id", scope="global"),
    dict(name="entropy_top"),
    dict(name="not_spurious", entropy_quantile=0.5, prob_below=0.5),
    dict(name="entropy_top+not_spurious", entropy_quantile=0.5, prob_below=0.5),
    dict(name="js_top", ratio=0.25, scope="sequence"),
]


def batch(rows_per_rank, T, empty_rank):
    """The full batch (rows of rank 0, then rank 1) with few score levels so ties cross ranks."""
    g = torch.Generator().manual_seed(0)
    B = sum(rows_per_rank)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    mask = torch.arange(T)[None, :] < lengths[:, None]
    if empty_rank is not None:
        start = sum(rows_per_rank[:empty_rank])
        mask[start : start + rows_per_rank[empty_rank]] = False

    def levels():
        return torch.randint(0, 3, (B, T), generator=g).float() / 3

    stats = SimpleNamespace(
        entropy=levels(), js=levels(), logprob=levels().mul(-8), renyi2=levels()
    )
    tokens = torch.randint(0, 5, (B, T), generator=g)
    advantages = torch.randn(B, generator=g)
    return mask, stats, tokens, advantages


def select_all(mask, stats, tokens, advantages):
    return [
        select_tokens(
            c["name"],
            mask,
            stats=stats,
            tokens=tokens,
            advantages=advantages,
            **{k: v for k, v in c.items() if k != "name"},
        )
        for c in CASES
    ]


def rank_inputs(full, rows_per_rank, rank):
    mask, stats, tokens, adv = full
    lo = sum(rows_per_rank[:rank])
    hi = lo + rows_per_rank[rank]
    local = SimpleNamespace(**{k: v[lo:hi] for k, v in vars(stats).items()})
    return mask[lo:hi], local, tokens[lo:hi], adv[lo:hi]


SCENARIOS = [
    dict(rows_per_rank=[3, 2], T=11, empty_rank=None),
    dict(rows_per_rank=[2, 3], T=7, empty_rank=1),
]


def check(parts_per_scenario):
    for sc, parts in zip(SCENARIOS, parts_per_scenario, strict=True):
        full = batch(**sc)
        expected = select_all(*full)
        for case, want, got0, got1 in zip(CASES, expected, *parts, strict=True):
            assert torch.equal(torch.cat([got0, got1]), want), (sc, case)
    # the check has teeth: selecting each rank's rows alone differs from the global selection
    full = batch(**SCENARIOS[0])
    alone = [select_all(*rank_inputs(full, SCENARIOS[0]["rows_per_rank"], r)) for r in range(2)]
    assert not torch.equal(torch.cat([alone[0][0], alone[1][0]]), select_all(*full)[0])


class FakeGroup:
    """Two threads standing in for two ranks; `gather` is an all-gather through shared slots."""

    def __init__(self):
        self.slots = [None, None]
        self.barrier = threading.Barrier(2)
        self.local = threading.local()

    def gather(self, values, group):
        rank = self.local.rank
        self.slots[rank] = values
        self.barrier.wait()
        parts = list(self.slots)
        self.barrier.wait()
        return torch.cat(parts), sum(p.numel() for p in parts[:rank])


def test_global_selection_two_thread_ranks(monkeypatch):
    fake = FakeGroup()
    monkeypatch.setattr(core, "resolve_group", lambda group: fake)
    monkeypatch.setattr(core, "gather_concat", fake.gather)
    results = [[None, None] for _ in SCENARIOS]
    errors = []

    def run(rank):
        fake.local.rank = rank
        try:
            for i, sc in enumerate(SCENARIOS):
                inputs = rank_inputs(batch(**sc), sc["rows_per_rank"], rank)
                results[i][rank] = select_all(*inputs)
        except Exception as e:  # surfaced below
            errors.append(e)
            fake.barrier.abort()

    threads = [threading.Thread(target=run, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    monkeypatch.undo()  # the single-process reference runs without the fake group
    assert not errors, errors
    check(results)


def worker(rank, world, store, out_dir):
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    try:
        result = []
        for sc in SCENARIOS:
            result.append(select_all(*rank_inputs(batch(**sc), sc["rows_per_rank"], rank)))
        torch.save(result, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_global_selection_two_gloo_processes(tmp_path):
    """Ranks hold different numbers of rows and valid tokens; in scenario 2 rank 1 has none."""
    mp.spawn(worker, args=(2, str(tmp_path / "store"), str(tmp_path)), nprocs=2)
    per_rank = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    check([[per_rank[0][i], per_rank[1][i]] for i in range(len(SCENARIOS))])
