import numpy as np
import pytest

from ict.report.selection_overlap import overlap_markdown, overlap_study, plot_overlap

from .helpers import make_sample


def rec(step, tokens, ict, ent):
    n = len(tokens)
    return {
        "step": step,
        "tokens": tokens,
        "js": [0.0] * n,
        "selected": {"ict": ict, "entropy": ent},
    }


def test_jaccard_chance_tokens_positions_by_hand():
    records = [
        rec(0, ["a", "b", "c", "d"], [1, 0, 0, 0], [1, 1, 0, 0]),
        rec(0, ["a", "x", "y", "z"], [0, 0, 0, 1], [0, 0, 0, 1]),
        rec(1, ["a", "b"], [0, 1], [1, 0]),
        {"step": 2, "tokens": ["q"], "js": [0.0], "selected": {"ict": [1]}},  # no entropy: skipped
    ]
    s = overlap_study(records)
    assert s.steps == [0, 1] and s.responses == 3 and s.tokens == 10
    # step 0: ict {0, 7}, entropy {0, 1, 7} -> 2/3; fractions 2/8 and 3/8
    a, b = 2 / 8, 3 / 8
    assert s.jaccard == pytest.approx([2 / 3, 0.0])
    assert s.chance[0] == pytest.approx(a * b / (a + b - a * b))
    assert s.top["ict"][0] == ("a", 1, 3) and len(s.top["ict"]) == 3
    assert s.top["entropy"][0] == ("a", 2, 3)
    # positions: n=4 -> bins 0, 2, 5, 7; n=2 -> bins 0, 5
    ict_pos = np.zeros(10)
    ict_pos[[0, 7, 5]] = 1
    np.testing.assert_allclose(s.position["ict"], ict_pos / 3)
    assert s.position["all tokens"].sum() == pytest.approx(1.0)


def test_markdown_and_plot(tmp_path):
    rng = np.random.default_rng(1)
    records = [make_sample(s // 2, list("the answer is 42 ok"), rng) for s in range(6)]
    s = overlap_study(records)
    md = overlap_markdown(s)
    assert f"{s.mean_jaccard:.3f}" in md and "| all tokens |" in md
    assert plot_overlap(s, tmp_path / "o.png").read_bytes()[:4] == b"\x89PNG"
    empty = overlap_study([])
    assert (
        "no overlap study" in overlap_markdown(empty)
        and plot_overlap(empty, tmp_path / "e.png") is None
    )
