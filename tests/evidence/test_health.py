import pytest

from ict.evidence.health import HealthCriterion, judge_health


def test_windows_not_steps_decide():
    # one dip to 0.1x at step 15 (a blip), otherwise flat: no collapse
    h = [1.0] * 15 + [0.1] + [1.0] * 14
    j = judge_health(h)
    assert j.window == 10 and not j.collapse and j.ratio == pytest.approx(1.0)
    falling = [1.0] * 10 + [0.5] * 10 + [0.1] * 10
    j = judge_health(falling)
    assert j.collapse and j.ratio == pytest.approx(0.1)
    assert j.text == "last-10 mean H 0.10x first-10 (collapse < 0.2x, explosion > 3x)"


def test_short_runs_shrink_the_window_and_explosion_counts_format():
    j = judge_health([1.0, 1.0, 1.0, 4.0, 4.0, 4.0])
    assert j.window == 3 and j.explosion and not j.collapse
    f = judge_health([1.0] * 6, format_rate=[0.9] * 3 + [0.3] * 3)
    assert f.explosion and f.format_ratio == pytest.approx(1 / 3) and "format rate" in f.text
    assert judge_health([1.0]) is None
    custom = judge_health([1.0] * 3 + [0.25] * 3, criterion=HealthCriterion(collapse_fraction=0.3))
    assert custom.collapse and "collapse < 0.3x" in custom.text


# ---- phases: the dense warm-up judged apart from the method's own steps (issue 50) ------------
WARMUP_COLLAPSE = [0.71, 0.52, 0.21]  # measured: the default run's dense warm-up steps


def test_a_collapse_inside_the_warm_up_is_the_warm_ups():
    from ict.evidence.health import judge_phases

    entropy = WARMUP_COLLAPSE + [0.08, 0.08, 0.07]  # 6 steps, the warm-up capped at 3
    dense = [True] * 3 + [False] * 3
    assert judge_health(entropy).collapse  # the run as a whole: collapsed
    p = judge_phases(range(1, 7), entropy, dense)
    assert p.warmup_steps == (1, 3) and p.method_steps == (4, 6)
    assert not p.method.collapse and p.collapse_in == "warm-up" and p.explosion_in is None
    assert p.text("collapse", "ict") == (
        "entropy collapse in the dense warm-up (GRPO, steps 1-3: H 0.71 -> 0.21 nats), "
        "not in ict's own steps 4-6 (H 0.08 -> 0.07 nats)"
    )
    d = p.as_dict()
    assert d["collapse_in"] == "warm-up" and d["warm-up"]["steps"] == [1, 3]
    assert d["method"]["entropy_collapse"] is False


def test_a_collapse_in_the_method_steps_is_the_methods_and_both_can_be_named():
    from ict.evidence.health import judge_phases

    dense = [True] * 4 + [False] * 6
    p = judge_phases(range(1, 11), [0.7] * 5 + [0.05] * 5, dense)
    assert p.collapse_in == "method" and p.method.collapse and not p.warmup.collapse
    assert p.text("collapse", "ict").startswith("entropy collapse in ict's own steps 5-10")
    both = judge_phases(range(1, 11), [0.9, 0.9, 0.1, 0.1, 0.1, 0.1, 0.1] + [0.01] * 3, dense)
    assert both.warmup.collapse and both.method.collapse
    assert both.collapse_in == "warm-up and method"
    assert " and in ict's own steps 5-10" in both.text("collapse", "ict")


def test_no_phases_without_a_warm_up_or_without_steps_after_it():
    from ict.evidence.health import judge_phases

    assert judge_phases(range(1, 4), WARMUP_COLLAPSE, [False] * 3) is None
    assert judge_phases(range(1, 4), WARMUP_COLLAPSE, [True] * 3) is None
    flat = judge_phases(range(1, 7), [0.7] * 6, [True] * 3 + [False] * 3)
    assert flat.collapse_in is None and flat.text("collapse", "ict") == "entropy collapse"
