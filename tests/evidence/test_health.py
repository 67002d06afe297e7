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
