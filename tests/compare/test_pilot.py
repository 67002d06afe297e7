"""A study's declared pilot choice (ict.compare.pilot, the rule `narrowing_at_stable_lr` of the
toy-cot-explore study) on hand-made curves, and on the committed pilot's curves."""

import json
import tarfile
from pathlib import Path

import pytest

from ict.compare.pilot import (
    PILOT_RULES,
    PilotSpec,
    Point,
    curve_of,
    ict_stable,
    narrowing_step,
    overrides,
)
from ict.compare.presets import get_preset
from ict.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
SPEC = PilotSpec.from_values(get_preset("toy-cot-explore").study["pilot"])
LRS, POOLS = SPEC.values, SPEC.pool_order


def choose(curves):
    return PILOT_RULES["narrowing_at_stable_lr"].choose(curves, SPEC)


START = Point(0, 0.40, 0.95)


def curve(*points):
    return [START, *(Point(50 * (i + 1), p1, p32) for i, (p1, p32) in enumerate(points))]


FLAT = curve((0.41, 0.95), (0.42, 0.94))
NARROW = curve((0.42, 0.93), (0.43, 0.89))  # pass@32 -0.06 at step 100, pass@1 up
DAMAGE = curve((0.38, 0.85), (0.37, 0.80))  # pass@32 falls but so does pass@1


def grid(ict=None, grpo=None):
    """Every pilot cell FLAT unless given: {(method, pool, lr): curve}."""
    cells = {(m, p, lr): FLAT for m in SPEC.methods for p in POOLS for lr in LRS}
    cells.update(ict or {})
    cells.update(grpo or {})
    return cells


def test_stability_and_narrowing_rules():
    assert ict_stable(FLAT)
    assert not ict_stable(curve((0.41, 0.9), (0.39, 0.9)))  # one evaluation below the start
    assert not ict_stable([START])  # no evaluation after the start: nothing shows stability
    assert narrowing_step(NARROW, 0.05) == 100
    assert narrowing_step(curve((0.42, 0.90)), 0.05) == 50  # exactly the 0.05 drop counts
    assert narrowing_step(DAMAGE, 0.05) is None  # pass@1 fell: damage, not narrowing
    assert narrowing_step(FLAT, 0.05) is None


def test_choice_prefers_full_pool_at_largest_stable_lr():
    lo, mid, hi = LRS
    cells = grid(
        ict={("ict", "full", hi): DAMAGE},  # ICT unstable at the largest lr: mid is the shared lr
        grpo={("grpo", "full", mid): NARROW, ("grpo", "16", hi): NARROW},
    )
    choice = choose(cells)
    assert (choice.pool, choice.lr, choice.horizon) == ("full", mid, 100)
    assert choice.stable_lr == {"full": mid, "16": hi}
    assert choice.runs_stage_b


def test_choice_falls_back_to_16_pairs():
    hi = LRS[-1]
    choice = choose(grid(grpo={("grpo", "16", hi): NARROW}))
    assert (choice.pool, choice.lr, choice.horizon) == ("16", hi, 100)


def test_narrowing_at_an_unstable_lr_does_not_count():
    lo, mid, hi = LRS
    cells = grid(
        ict={("ict", p, hi): DAMAGE for p in POOLS},
        grpo={("grpo", p, hi): NARROW for p in POOLS},
    )
    choice = choose(cells)
    assert choice.pool is None and not choice.runs_stage_b
    assert "no stable learning rate narrows" in choice.reason


def test_no_stable_lr_is_stated():
    cells = grid(ict={("ict", p, lr): DAMAGE for p in POOLS for lr in LRS})
    choice = choose(cells)
    assert choice.stable_lr == {"full": None, "16": None}
    assert "ICT is stable at no pilot lr" in choice.reason


def test_missing_cell_raises():
    cells = grid()
    del cells[("grpo", "16", LRS[0])]
    cells[("ict", "full", LRS[-1])] = DAMAGE  # force a look past the full pool
    with pytest.raises(KeyError):
        choose({k: v for k, v in cells.items() if k[1] != "full" or k[0] == "ict"})


def test_curve_of_reads_results_sorted_by_step():
    def result(step, p1, p32):
        return {"step": step, "benchmarks": {"toy:cot": {"pass@1": p1, "pass@32": p32}}}

    pts = curve_of([result(100, 0.5, 0.9), result(0, 0.4, 0.95), result(50, 0.45, 0.93)])
    assert [p.step for p in pts] == [0, 50, 100]
    assert pts[0] == Point(0, 0.4, 0.95)


def test_the_preset_declares_the_protocols_pilot():
    """PROTOCOL.md's pilot, now read from the preset (it was compare/explore.py's constants)."""
    assert SPEC.methods == ("grpo", "ict") and LRS == (2.0e-5, 4.0e-5, 6.3e-5)
    assert dict(SPEC.pools) == {"full": None, "16": 16} and POOLS == ("full", "16")
    assert (SPEC.seed, SPEC.metric, SPEC.options["drop"]) == (2000, (1, 32), 0.05)
    assert (SPEC.validation_size, SPEC.validation_samples) == (128, 32)


def test_a_choice_becomes_the_test_cells_overrides():
    record = {"pool": "16", "lr": 4e-5, "horizon": 150, "reason": "r"}
    assert overrides(record, SPEC) == {"learning_rate": 4e-5, "max_steps": 150, "train_size": 16}
    assert "train_size" not in overrides({**record, "pool": "full"}, SPEC)
    with pytest.raises(ConfigError, match="no stable narrowing regime"):
        overrides({**record, "pool": None}, SPEC)


def test_unknown_rule_or_key_is_refused():
    with pytest.raises(ConfigError, match="pilot rule 'nope' is not one of"):
        PilotSpec.from_values({"methods": ["grpo"], "values": [1e-5], "rule": "nope"})
    with pytest.raises(ConfigError, match=r"unknown keys \['lrs'\]"):
        PilotSpec.from_values({"methods": ["grpo"], "values": [1e-5], "lrs": [1]})


def test_the_committed_choice_re_derives_from_its_curves():
    """docs/reports/toy-cot-explore's pilot_choice.json (in cells.tar.gz): the registered rule on
    its 12 curves gives the recorded choice."""
    with tarfile.open(ROOT / "docs/reports/toy-cot-explore/cells.tar.gz") as tar:
        record = json.load(tar.extractfile("pilot_choice.json"))
    curves = {
        (c["method"], c["pool"], c["lr"]): [Point(**p) for p in c["curve"]] for c in record["cells"]
    }
    assert len(curves) == 12
    assert choose(curves).as_dict() == record["choice"]
    assert record["choice"]["pool"] == "full" and record["choice"]["horizon"] == 200
