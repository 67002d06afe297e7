"""The verdict rule on hand-made seed-level tests."""

import math

import pytest

from ict.evidence.endpoints import declare
from ict.evidence.power import minimum_detectable_effect
from ict.evidence.seed_tests import seed_test
from ict.evidence.verdict import judge

BASE = {0: 0.60, 1: 0.70, 2: 0.65, 3: 0.62, 4: 0.68}


def shifted(delta, noise=(0.01, -0.01, 0.0, 0.005, -0.005)):
    return {s: v + delta + e for (s, v), e in zip(BASE.items(), noise, strict=True)}


def test_primary_pass_holm_and_exploratory_use_raw_p():
    tests = {
        ("ict", "grpo", "eval/t/pass@4"): seed_test(shifted(0.05), BASE),
        ("entropy", "grpo", "eval/t/pass@4"): seed_test(shifted(0.05), BASE),
    }
    j = judge(tests, declare(["ict-grpo@pass@4", "ict-random_sequence@pass@1"]))
    v = j.get("ict", "grpo", "eval/t/pass@4")
    assert v.primary and j.family_size == 2 and j.missing == ["ict-random_sequence@pass@1"]
    assert v.p_holm == pytest.approx(min(1, 2 * v.test.p)) and v.word == "higher"
    assert v.label == "higher (primary)" and v.level == pytest.approx(0.025)
    assert v.mde == pytest.approx(minimum_detectable_effect(v.test.se, 4, 0.025))
    e = j.get("entropy", "grpo", "eval/t/pass@4")
    assert not e.primary and e.p_holm is None and e.label == "higher (exploratory)"


def test_holm_can_turn_a_raw_pass_inconclusive():
    # raw p about 0.03: passes alone, fails once Holm doubles it
    a = {s: v + d for (s, v), d in zip(BASE.items(), (0.06, -0.005, 0.05, 0.02, 0.04), strict=True)}
    test = seed_test(a, BASE)
    assert 0.025 < test.p < 0.05
    alone = judge({("ict", "grpo", "reward/mean"): test}, declare(["ict-grpo@reward"]))
    assert alone.get("ict", "grpo", "reward/mean").word == "higher"
    two = judge({("ict", "grpo", "reward/mean"): test}, declare(["ict-grpo@reward", "a-b@pass@1"]))
    assert two.get("ict", "grpo", "reward/mean").word == "inconclusive"


def test_equivalent_only_by_tost_or_identity():
    key = ("entropy", "grpo", "eval/t/pass@1")
    close = judge({key: seed_test(shifted(0.0), BASE)}, declare(margin=0.03)).get(*key)
    assert close.word == "equivalent" and close.p_tost < 0.05 and close.test.p > 0.05
    wide = judge({key: seed_test(shifted(0.0), BASE)}, declare(margin=0.005)).get(*key)
    assert wide.word == "inconclusive"
    same = judge({key: seed_test(BASE, BASE)}, declare()).get(*key)
    assert same.word == "equivalent" and same.note == "identical on every seed"
    assert math.isnan(same.mde)


def test_one_seed_is_inconclusive_and_mirror_of_a_primary_is_primary():
    key = ("ict", "grpo", "eval/t/pass@1")
    one = judge({key: seed_test({0: 0.9}, {0: 0.1})}, declare()).get(*key)
    assert one.word == "inconclusive" and "no seed-level test" in one.note
    tests = {
        ("ict", "grpo", "eval/t/pass@4"): seed_test(shifted(-0.05), BASE),
        ("grpo", "ict", "eval/t/pass@4"): seed_test(BASE, shifted(-0.05)),
    }
    j = judge(tests, declare(["ict-grpo@pass@4"]))
    assert j.get("ict", "grpo", "eval/t/pass@4").word == "lower"
    mirror = j.get("grpo", "ict", "eval/t/pass@4")
    assert mirror.primary and mirror.word == "higher" and j.family_size == 1


def test_higher_needs_the_over_problems_test_too():
    import math as _m

    from ict.evidence.problem_tests import ProblemTest
    from ict.evidence.seed_tests import paired_t_test

    key = ("ict", "grpo", "eval/toy/pass@32")
    seed = paired_t_test([0.52, 0.53, 0.51, 0.52, 0.53], [0.50, 0.50, 0.49, 0.50, 0.51])
    assert seed.p < 0.01
    wide = ProblemTest(
        "two-way variance-components t", 5, 32, seed.mean, 0.02, seed.se, 0.019, 40.0, 0.33
    )
    narrow = ProblemTest(
        "two-way variance-components t", 5, 512, seed.mean, 0.004, seed.se, 0.002, 90.0, 0.001
    )
    e = declare(["ict-grpo@pass@32"])
    v = judge({key: seed}, e, {key: wide}).verdicts[key]
    assert v.word == "inconclusive" and v.decided_by == "over-problems test"
    assert "not shown over new problems" in v.note and v.p_problems_holm == pytest.approx(0.33)
    v = judge({key: seed}, e, {key: narrow}).verdicts[key]
    assert (v.word, v.decided_by) == ("higher", "both tests")
    # the MDE is the harder test's; a derived margin is carried with its source
    v = judge({key: seed}, e, {key: wide}, {key: (0.05, "0.5 x |grpo's change|")}).verdicts[key]
    assert v.margin == 0.05 and v.margin_source.startswith("0.5 x")
    assert v.mde > seed.se * 3 and _m.isfinite(v.mde)
    d = v.as_dict()
    assert (
        d["p_problems"] == 0.33 and d["tost_holm_adjusted"] and d["problem_test"]["problems"] == 32
    )
