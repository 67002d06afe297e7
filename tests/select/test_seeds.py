"""Honest seeds (issue 41): each named stream its own numbers, each process its own draw."""

import torch

from ict.seeds import SEED_STRIDE, derive_seed, rank_seed, stream_seed
from ict.select.core import SelectionContext, _top_ratio
from ict.select.selectors import uniform
from ict.step import SeedStreams, selection_seed


def _uniform_selection(seed: int, rank: int, mask: torch.Tensor) -> torch.Tensor:
    """The `uniform` selector's top 10% on `mask` as process `rank` draws it (one process's rows)."""
    ctx = SelectionContext(mask, None, None, None, seed=seed, rank=rank, group=None)
    return _top_ratio("uniform", uniform(ctx), ctx, 0.1, "global", "position", None)


def test_rank_one_of_seed_s_and_rank_zero_of_seed_s_plus_one_draw_different_selections():
    mask = torch.ones(8, 32, dtype=torch.bool)
    for s in (0, 1, 41):
        for step in (1, 11):
            a = _uniform_selection(selection_seed(s, step), 1, mask)
            b = _uniform_selection(selection_seed(s + 1, step), 0, mask)
            assert int(a.sum()) == int(b.sum()) == 26  # the same exact count ...
            assert not torch.equal(a, b)  # ... of other tokens
    # the rule before issue 41 offset the seed by rank * 1_000_003: these two coincided
    s, step = 3, 11
    old_rank_1 = derive_seed(1, derive_seed(s, step))
    assert old_rank_1 == derive_seed(0, derive_seed(s + 1, step))
    # and now each rank of a step draws its own selection
    seeds = [rank_seed(selection_seed(s, step), r) for r in range(4)]
    assert len(set(seeds)) == 4 and old_rank_1 not in seeds


def test_the_named_streams_differ_and_are_reproducible():
    seeds = SeedStreams(7)
    for step in range(1, 30):
        values = {seeds.sampling(step), seeds.selection(step), seeds.shuffle(step)}
        assert len(values) == 3, step
    assert seeds.sampling(5) == derive_seed(7, 5) == 7 * SEED_STRIDE + 5  # the rollouts' as before
    assert seeds.selection(5) == selection_seed(7, 5) == stream_seed(7, "selection", 5)
    assert seeds.shuffle(5) == stream_seed(7, "shuffle", 5) == SeedStreams(7).shuffle(5)
    # no collisions over neighbouring seeds, steps and streams; torch takes every one
    every = {stream_seed(s, name, t) for s in range(5) for t in range(200) for name in ("a", "b")}
    assert len(every) == 5 * 200 * 2
    assert all(0 <= x < 2**63 for x in every)
    torch.Generator().manual_seed(max(every))
    assert stream_seed(-1, "selection", 1) >= 0  # a negative run seed is a seed too


def test_a_single_process_random_selection_changed_with_the_seed_rule():
    """What issue 41 changed for one process: the random control's generator was seeded with
    the step's derive_seed(run, step), the rollouts' number; it is seeded from the selection
    stream now, so a re-run of a committed random control draws other tokens."""
    mask = torch.ones(4, 40, dtype=torch.bool)
    ctx = SelectionContext(mask, None, None, None, seed=0, rank=0, group=None)
    old_scores = torch.rand(mask.shape, generator=torch.Generator().manual_seed(derive_seed(0, 11)))
    old = _top_ratio("uniform", old_scores, ctx, 0.1, "global", "position", None)
    new = _uniform_selection(selection_seed(0, 11), 0, mask)
    assert not torch.equal(old, new)
