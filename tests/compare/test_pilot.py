"""The exploration study's declared pilot choice (ict.compare.explore), on hand-made curves."""

import pytest

from ict.compare import explore
from ict.compare.explore import Point, choose, curve_of, ict_stable, narrowing_step

START = Point(0, 0.40, 0.95)


def curve(*points):
    return [START, *(Point(50 * (i + 1), p1, p32) for i, (p1, p32) in enumerate(points))]


FLAT = curve((0.41, 0.95), (0.42, 0.94))
NARROW = curve((0.42, 0.93), (0.43, 0.89))  # pass@32 -0.06 at step 100, pass@1 up
DAMAGE = curve((0.38, 0.85), (0.37, 0.80))  # pass@32 falls but so does pass@1


def grid(ict=None, grpo=None):
    """Every pilot cell FLAT unless given: {(method, pool, lr): curve}."""
    cells = {
        (m, p, lr): FLAT
        for m in explore.PILOT_METHODS
        for p in explore.POOL_ORDER
        for lr in explore.PILOT_LRS
    }
    cells.update(ict or {})
    cells.update(grpo or {})
    return cells


def test_stability_and_narrowing_rules():
    assert ict_stable(FLAT)
    assert not ict_stable(curve((0.41, 0.9), (0.39, 0.9)))  # one evaluation below the start
    assert not ict_stable([START])  # no evaluation after the start: nothing shows stability
    assert narrowing_step(NARROW) == 100
    assert narrowing_step(curve((0.42, 0.90))) == 50  # exactly the 0.05 drop counts
    assert narrowing_step(DAMAGE) is None  # pass@1 fell: damage, not narrowing
    assert narrowing_step(FLAT) is None


def test_choice_prefers_full_pool_at_largest_stable_lr():
    lo, mid, hi = explore.PILOT_LRS
    cells = grid(
        ict={("ict", "full", hi): DAMAGE},  # ICT unstable at the largest lr: mid is the shared lr
        grpo={("grpo", "full", mid): NARROW, ("grpo", "16", hi): NARROW},
    )
    choice = choose(cells)
    assert (choice.pool, choice.lr, choice.horizon) == ("full", mid, 100)
    assert choice.stable_lr == {"full": mid, "16": hi}
    assert choice.runs_stage_b


def test_choice_falls_back_to_16_pairs():
    hi = explore.PILOT_LRS[-1]
    choice = choose(grid(grpo={("grpo", "16", hi): NARROW}))
    assert (choice.pool, choice.lr, choice.horizon) == ("16", hi, 100)


def test_narrowing_at_an_unstable_lr_does_not_count():
    lo, mid, hi = explore.PILOT_LRS
    cells = grid(
        ict={("ict", p, hi): DAMAGE for p in explore.POOL_ORDER},
        grpo={("grpo", p, hi): NARROW for p in explore.POOL_ORDER},
    )
    choice = choose(cells)
    assert choice.pool is None and not choice.runs_stage_b
    assert "no stable learning rate narrows" in choice.reason


def test_no_stable_lr_is_stated():
    cells = grid(
        ict={("ict", p, lr): DAMAGE for p in explore.POOL_ORDER for lr in explore.PILOT_LRS}
    )
    choice = choose(cells)
    assert choice.stable_lr == {"full": None, "16": None}
    assert "ICT is stable at no pilot lr" in choice.reason


def test_missing_cell_raises():
    cells = grid()
    del cells[("grpo", "16", explore.PILOT_LRS[0])]
    cells[("ict", "full", explore.PILOT_LRS[-1])] = DAMAGE  # force a look past the full pool
    with pytest.raises(KeyError):
        choose({k: v for k, v in cells.items() if k[1] != "full" or k[0] == "ict"})


def test_curve_of_reads_results_sorted_by_step():
    def result(step, p1, p32):
        return {"step": step, "benchmarks": {"toy:cot": {"pass@1": p1, "pass@32": p32}}}

    pts = curve_of([result(100, 0.5, 0.9), result(0, 0.4, 0.95), result(50, 0.45, 0.93)])
    assert [p.step for p in pts] == [0, 50, 100]
    assert pts[0] == Point(0, 0.4, 0.95)
