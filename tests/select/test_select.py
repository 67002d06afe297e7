"""Selectors against brute-force references and hand-made cases."""

import math
import re
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from ict.errors import ConfigError, DataError
from ict.select import (
    SELECTORS,
    available_selectors,
    jaccard,
    keep_count,
    register_selector,
    select_tokens,
)
from ict.select.topk import quantile_linear


def make_stats(B, T, seed, levels=4):
    """TokenStats-like object; scores drawn from a few levels so ties are common."""
    g = torch.Generator().manual_seed(seed)

    def field():
        return torch.randint(0, levels, (B, T), generator=g).float() / levels

    return SimpleNamespace(entropy=field(), renyi2=field(), logprob=-field() * 10, js=field())


def make_mask(B, T, seed):
    g = torch.Generator().manual_seed(seed + 100)
    lengths = torch.randint(0, T + 1, (B,), generator=g)
    return torch.arange(T)[None, :] < lengths[:, None]


def ref_count(ratio, n):
    return 0 if n == 0 else max(1, math.ceil(round(ratio * n, 6)))


def ref_select(scores, mask, ratio, scope="global", mbs=None, tokens=None):
    """Brute force: python sorts over (group, -score, flat index) or (-mean score, id)."""
    B, T = mask.shape
    cells = [(b, t) for b in range(B) for t in range(T) if mask[b, t]]

    def group_of(b):
        return 0 if scope == "global" else (b // mbs if scope == "micro_batch" else b)

    out = torch.zeros(B, T, dtype=torch.bool)
    for g in sorted({group_of(b) for b, _ in cells}):
        members = [(b, t) for b, t in cells if group_of(b) == g]
        if tokens is None:
            ranked = sorted(members, key=lambda c: (-float(scores[c]), c[0] * T + c[1]))
            for c in ranked[: ref_count(ratio, len(members))]:
                out[c] = True
        else:
            by_id = {}
            for c in members:
                by_id.setdefault(int(tokens[c]), []).append(float(scores[c]))
            ranked = sorted(by_id, key=lambda i: (-sum(by_id[i]) / len(by_id[i]), i))
            keep = set(ranked[: ref_count(ratio, len(by_id))])
            for c in members:
                out[c] = int(tokens[c]) in keep
    return out


def test_keep_count_hand_values():
    n = torch.tensor([30, 31, 1, 0, 7, 12, 10])
    assert keep_count(n, 0.1).tolist() == [3, 4, 1, 0, 1, 2, 1]
    assert keep_count(n, 1.0).tolist() == [30, 31, 1, 0, 7, 12, 10]
    assert keep_count(n, 0.2).tolist() == [6, 7, 1, 0, 2, 3, 2]


@pytest.mark.parametrize(
    "name,field,default", [("js_top", "js", 0.10), ("entropy_top", "entropy", 0.20)]
)
def test_exact_count_and_default_ratio(name, field, default):
    stats = make_stats(6, 50, seed=1, levels=1000)
    mask = make_mask(6, 50, seed=1)
    n = int(mask.sum())
    sel = select_tokens(name, mask, stats=stats, scope="global")
    assert int(sel.sum()) == ref_count(default, n)
    assert not (sel & ~mask).any()
    assert torch.equal(sel, ref_select(getattr(stats, field), mask, default))
    # without a scope, the selector's own default scope applies (js_top: per response, as the paper)
    scope = SELECTORS[name].default_scope
    assert scope == {"js_top": "sequence", "entropy_top": "global"}[name]
    by_default = select_tokens(name, mask, stats=stats)
    assert torch.equal(by_default, ref_select(getattr(stats, field), mask, default, scope=scope))


def test_ties_keep_first_flat_indices():
    mask = torch.ones(3, 10, dtype=torch.bool)
    mask[0, :4] = False  # first valid flat index is 4
    stats = SimpleNamespace(js=torch.full((3, 10), 0.5), entropy=torch.zeros(3, 10))
    sel = select_tokens(
        "js_top", mask, stats=stats, ratio=0.2, scope="global"
    )  # 26 valid -> ceil(5.2) = 6
    expected = torch.zeros(30, dtype=torch.bool)
    expected[4:10] = True
    assert torch.equal(sel.flatten(), expected)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("scope", ["global", "micro_batch", "sequence"])
@pytest.mark.parametrize("granularity", ["position", "token_id"])
@pytest.mark.parametrize("ratio", [0.1, 0.35, 1.0])
def test_scopes_and_granularity_match_brute_force(seed, scope, granularity, ratio):
    B, T = 5, 9
    stats = make_stats(B, T, seed)
    mask = make_mask(B, T, seed)
    tokens = torch.randint(0, 6, (B, T), generator=torch.Generator().manual_seed(seed))
    sel = select_tokens(
        "js_top",
        mask,
        stats=stats,
        ratio=ratio,
        scope=scope,
        granularity=granularity,
        micro_batch_size=2,
        tokens=tokens,
    )
    ref = ref_select(stats.js, mask, ratio, scope, 2, tokens if granularity == "token_id" else None)
    assert torch.equal(sel, ref)


def test_sequence_scope_at_least_one_per_response():
    mask = torch.zeros(3, 8, dtype=torch.bool)
    mask[0, :3] = True  # 3 valid: ceil(0.3) -> 1
    mask[2, :] = True  # 8 valid: ceil(0.8) -> 1; row 1 has none
    stats = SimpleNamespace(js=torch.arange(24.0).reshape(3, 8))
    sel = select_tokens("js_top", mask, stats=stats, scope="sequence")
    assert sel.sum(1).tolist() == [1, 0, 1]
    assert sel[0, 2] and sel[2, 7]  # the highest score in each row


def test_token_id_hand_case():
    # ids 7 (scores .9 .1 -> mean .5), 3 (.6), 5 (.2 .2 -> .2), 9 (.6): ratio .5 of 4 ids -> 2 ids;
    # 3 and 9 tie at .6 and beat 7; the tie goes to the lower id 3, then 9 is next -> {3, 9}
    tokens = torch.tensor([[7, 3, 5, 9], [7, 5, 0, 0]])
    js = torch.tensor([[0.9, 0.6, 0.2, 0.6], [0.1, 0.2, 1.0, 1.0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]], dtype=torch.bool)
    sel = select_tokens(
        "js_top",
        mask,
        stats=SimpleNamespace(js=js),
        ratio=0.5,
        granularity="token_id",
        tokens=tokens,
        scope="global",
    )
    assert sel.tolist() == [[False, True, False, True], [False, False, False, False]]
    sel = select_tokens(
        "js_top",
        mask,
        stats=SimpleNamespace(js=js),
        ratio=0.75,
        granularity="token_id",
        tokens=tokens,
        scope="global",
    )  # ceil(3) -> ids 3, 9, 7
    assert sel.tolist() == [[True, True, False, True], [True, False, False, False]]


def stapo_case():
    entropy = torch.tensor([[0.0, 0.1, 0.5, 0.6, 0.0], [0.2, 0.3, 0.4, 0.7, 0.0]])
    prob = torch.tensor([[0.005, 0.5, 0.001, 0.005, 1.0], [0.001, 0.001, 0.9, 0.9, 1.0]])
    mask = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 0]], dtype=torch.bool)
    stats = SimpleNamespace(entropy=entropy, logprob=prob.log(), js=torch.zeros(2, 5))
    return mask, stats, torch.tensor([1.0, -1.0])


def test_stapo_hand_case():
    mask, stats, adv = stapo_case()
    # valid entropies sorted 0 .1 .2 .3 .4 .5 .6 .7; 0.05-quantile at position .35 -> 0.035:
    # only (0,0) has H < .035, p < .01 and A > 0
    expected = mask.clone()
    expected[0, 0] = False
    assert torch.equal(select_tokens("not_spurious", mask, stats=stats, advantages=adv), expected)
    # median at 3.5 -> .35; prob_below .6 adds (0,1) (H .1, p .5); row 1 has A < 0
    expected[0, 1] = False
    sel = select_tokens(
        "not_spurious", mask, stats=stats, advantages=adv, entropy_quantile=0.5, prob_below=0.6
    )
    assert torch.equal(sel, expected)
    # per-token advantages: flip the sign at (0,0) -> kept; (1,0) now A > 0 with H .2 < .35, p .001
    adv_tok = torch.tensor([[-1.0, 1, 1, 1, 1], [1, -1, -1, -1, -1]])
    sel = select_tokens(
        "not_spurious", mask, stats=stats, advantages=adv_tok, entropy_quantile=0.5, prob_below=0.6
    )
    expected = mask.clone()
    expected[0, 1] = False
    expected[1, 0] = False
    assert torch.equal(sel, expected)


def test_quantile_matches_numpy():
    x = torch.rand(37, generator=torch.Generator().manual_seed(0))
    for q in (0.0, 0.05, 0.5, 0.93, 1.0):
        assert float(quantile_linear(x, q)) == pytest.approx(
            np.quantile(x.numpy().astype(np.float64), q)
        )


def test_random_seeded_exact_count():
    mask = make_mask(8, 40, seed=3)
    n = int(mask.sum())
    a = select_tokens("uniform", mask, seed=5)
    assert int(a.sum()) == ref_count(0.1, n) and not (a & ~mask).any()
    assert torch.equal(a, select_tokens("uniform", mask, seed=5))
    assert not torch.equal(a, select_tokens("uniform", mask, seed=6))
    b = select_tokens("uniform", mask, ratio=0.5, scope="sequence", seed=1)
    assert b.sum(1).tolist() == [ref_count(0.5, int(r)) for r in mask.sum(1)]


def test_random_is_roughly_uniform():
    mask = torch.ones(1, 20, dtype=torch.bool)
    hits = sum(select_tokens("uniform", mask, ratio=0.25, seed=s).long() for s in range(400))
    assert hits.sum() == 400 * 5
    assert hits.min() > 60 and hits.max() < 140  # expected 100 each


def test_composition_is_intersection():
    mask, stats, adv = stapo_case()
    stats.js = torch.tensor([[0.9, 0.8, 0.1, 0.1, 5.0], [0.7, 0.1, 0.1, 0.1, 5.0]])
    ict = select_tokens(
        "js_top", mask, stats=stats, ratio=0.3, scope="global"
    )  # ceil(2.4) = 3: (0,0) (0,1) (1,0)
    assert ict.nonzero().tolist() == [[0, 0], [0, 1], [1, 0]]
    both = select_tokens(
        "js_top+not_spurious", mask, stats=stats, advantages=adv, ratio=0.3, scope="global"
    )
    assert both.nonzero().tolist() == [[0, 1], [1, 0]]  # STAPO's spurious (0,0) removed
    stapo = select_tokens("not_spurious", mask, stats=stats, advantages=adv)
    assert torch.equal(both, ict & stapo)
    assert torch.equal(
        both,
        select_tokens(
            "not_spurious+js_top", mask, stats=stats, advantages=adv, ratio=0.3, scope="global"
        ),
    )
    assert torch.equal(select_tokens("every", mask), mask)


def test_register_new_selector():
    @register_selector("last_token_test")
    def last(ctx):
        keep = torch.zeros_like(ctx.mask)
        keep[:, -1] = True
        return keep

    @register_selector("neg_js_test", default_ratio=0.5)
    def neg_js(ctx, *, scale: float = 1.0):
        return -scale * ctx.require_stats("neg_js_test", "js").js

    try:
        assert "last_token_test" in available_selectors()
        mask = torch.ones(2, 3, dtype=torch.bool)
        mask[1, 2] = False
        assert select_tokens("last_token_test", mask).tolist() == [
            [False, False, True],
            [False] * 3,
        ]
        js = torch.tensor([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]])
        sel = select_tokens("neg_js_test", mask, stats=SimpleNamespace(js=js), scale=2.0)
        assert sel.tolist() == [[True, True, True], [False, False, False]]  # ceil(2.5) = 3 lowest
    finally:
        SELECTORS.pop("last_token_test")
        SELECTORS.pop("neg_js_test")


def test_jaccard():
    a = torch.tensor([[1, 1, 0, 0]], dtype=torch.bool)
    b = torch.tensor([[0, 1, 1, 0]], dtype=torch.bool)
    assert jaccard(a, b) == pytest.approx(1 / 3)
    assert jaccard(a, a) == 1.0
    assert jaccard(a, ~a) == 0.0
    empty = torch.zeros(1, 4, dtype=torch.bool)
    assert jaccard(empty, empty) == 1.0
    with pytest.raises(DataError, match="same shape"):
        jaccard(a, torch.zeros(2, 4, dtype=torch.bool))


def test_empty_mask_selects_nothing():
    mask = torch.zeros(2, 5, dtype=torch.bool)
    stats = make_stats(2, 5, 0)
    for name in ("js_top", "entropy_top", "uniform", "every"):
        assert not select_tokens(name, mask, stats=stats).any()
    assert not select_tokens("not_spurious", mask, stats=stats, advantages=torch.ones(2)).any()
    assert not select_tokens(
        "js_top",
        mask,
        stats=stats,
        granularity="token_id",
        tokens=torch.zeros(2, 5, dtype=torch.long),
    ).any()


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        (
            dict(name="nope"),
            ConfigError,
            # every registered selector, named from the registry
            r"unknown selector 'nope'.*" + re.escape(str(available_selectors())),
        ),
        (dict(name="js_top+nope"), ConfigError, "unknown selector 'nope'"),
        (dict(name="js_top", ratio=0.0), ConfigError, r"ratio must be a fraction in \(0, 1\]"),
        (dict(name="js_top", ratio=1.5), ConfigError, "ratio must be"),
        (dict(name="every", ratio=0.5), ConfigError, "takes no ratio"),
        (dict(name="js_top", scope="batch"), ConfigError, r"unknown scope 'batch'.*'micro_batch'"),
        (dict(name="js_top", granularity="word"), ConfigError, r"unknown granularity.*'token_id'"),
        (dict(name="js_top", scope="micro_batch"), ConfigError, "micro_batch_size"),
        (dict(name="js_top", granularity="token_id"), ConfigError, "needs tokens="),
        (dict(name="not_spurious"), ConfigError, "needs advantages"),
        (dict(name="js_top", stats=None), ConfigError, "needs token statistics"),
        (dict(name="entropy_top", stats=None), ConfigError, "needs token statistics"),
        (
            dict(name="js_top", stats=SimpleNamespace(entropy=torch.zeros(2, 3))),
            DataError,
            "stats.js",
        ),
        (
            dict(name="not_spurious", advantages=torch.ones(3)),
            DataError,
            "advantages must have shape",
        ),
        (dict(name="js_top", temperature=1.0), ConfigError, "no option"),
    ],
)
def test_errors(kwargs, error, match):
    kwargs = dict(kwargs)
    name = kwargs.pop("name")
    kwargs.setdefault("stats", make_stats(2, 3, 0))
    with pytest.raises(error, match=match):
        select_tokens(name, torch.ones(2, 3, dtype=torch.bool), **kwargs)


def test_nan_scores_rejected():
    js = torch.zeros(2, 3)
    js[1, 1] = float("nan")
    with pytest.raises(DataError, match="NaN"):
        select_tokens("js_top", torch.ones(2, 3, dtype=torch.bool), stats=SimpleNamespace(js=js))
    mask = torch.ones(2, 3, dtype=torch.bool)
    mask[1, 1] = False  # NaN on a masked position is ignored
    assert select_tokens("js_top", mask, stats=SimpleNamespace(js=js), scope="global").sum() == 1


def test_with_real_token_stats():
    """End to end with ict.stats: ICT keeps the top 10% by JS, 20-Entropy the top 20% by H."""
    token_stats = pytest.importorskip("ict.stats").token_stats
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 12, 9, generator=g) * 3
    tokens = torch.randint(0, 9, (4, 12), generator=g)
    mask = make_mask(4, 12, seed=2)
    stats = token_stats(logits, tokens, mask)
    n = int(mask.sum())
    for name, field, ratio in (("js_top", "js", 0.1), ("entropy_top", "entropy", 0.2)):
        sel = select_tokens(name, mask, stats=stats, scope="global")
        assert torch.equal(sel, ref_select(getattr(stats, field), mask, ratio))
        assert int(sel.sum()) == ref_count(ratio, n)
    adv = torch.tensor([1.0, -1.0, 0.5, 0.0])
    both = select_tokens("js_top+not_spurious", mask, stats=stats, advantages=adv, prob_below=0.3)
    assert torch.equal(
        both,
        select_tokens("js_top", mask, stats=stats)
        & select_tokens("not_spurious", mask, stats=stats, advantages=adv, prob_below=0.3),
    )


def test_branch_attributed_ict_picks_the_token_that_made_the_contexts_differ():
    """Two rollouts share tokens 0-2 and part ways at token 2 (a different sampled token), so
    their distributions first differ at position 3: the paper's score is 0 up to 3 and high
    after. `ict_branch` credits position 3's score to the branching token at 2; `ict` picks 3."""
    from ict.methods import get_method
    from ict.step import StepInputs, select_method
    from ict.train import TrainConfig

    mask = torch.ones(2, 10, dtype=torch.bool)
    js = torch.zeros(2, 10)
    js[:, 3] = 0.6
    js[:, 4:] = 0.1
    stats = SimpleNamespace(js=js, entropy=torch.zeros(2, 10), logprob=torch.zeros(2, 10))
    inputs = StepInputs(mask, stats, None)
    options = TrainConfig()
    ict = select_method(get_method("ict").resolved(), options, inputs, seed=0)
    branch = select_method(get_method("ict_branch").resolved(), options, inputs, seed=0)
    assert ict.nonzero()[:, 1].tolist() == [3, 3]
    assert branch.nonzero()[:, 1].tolist() == [2, 2]
    # the last valid token of each response has no next position and scores 0
    from ict.select.selectors import next_valid

    mask[1, 7:] = False
    assert next_valid(js, mask)[1, 6] == 0 and next_valid(js, mask)[0, 9] == 0
    assert next_valid(js, mask)[0, 2] == js[0, 3]
