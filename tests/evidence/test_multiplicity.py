import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ict.evidence.multiplicity import holm


def test_holm_hand_computed():
    # sorted 0.01, 0.02, 0.04 with m = 3: 0.03, max(0.03, 0.04) = 0.04, max(0.04, 0.04) = 0.04
    assert holm([0.04, 0.01, 0.02]) == pytest.approx([0.04, 0.03, 0.04])
    # the case: p = 0.026 among 4 comparisons whose others are larger
    assert holm([0.026, 0.3, 0.5, 0.9])[0] == pytest.approx(0.104)
    assert holm([0.6, 0.7]) == pytest.approx([1.0, 1.0])


def test_untested_declared_comparisons_stay_in_the_family():
    assert holm([0.02, math.nan]) == pytest.approx([0.04, 1.0])
    assert holm([]) == []


@given(st.lists(st.floats(0, 1), min_size=1, max_size=12))
def test_holm_between_raw_and_bonferroni_and_monotone(p):
    adj = holm(p)
    m = len(p)
    for raw, a in zip(p, adj, strict=True):
        assert raw - 1e-12 <= a <= min(1.0, m * raw) + 1e-12
    order = sorted(range(m), key=lambda i: p[i])
    assert all(adj[i] <= adj[j] + 1e-12 for i, j in zip(order, order[1:], strict=False))
