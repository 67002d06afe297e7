"""The tuning rules on synthetic score tables (torch-free): final_argmax (issue 38) picks the
interior argmax, grows on either edge, stops after 3 growths per edge and flags it, breaks ties
toward the centre of the tied plateau with the SE of the paired per-seed difference; its spec is
refused before any cell runs; and smallest_within_margin (issue 30) still re-derives the committed
toy-cot-long-tuned study's choices from the scores its report.json stores."""

import json
import math
from pathlib import Path

import pytest
from scipy import stats

from ict.compare.presets import get_preset
from ict.compare.tuning import (
    EDGES,
    RULES,
    TuningSpec,
    add_growth,
    choose_final_argmax,
    decide,
    final_score,
    paired_se,
    tuning_record,
)
from ict.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
SEEDS = (1000, 1001, 1002, 1003)
GRID = (1e-5, 2e-5, 4e-5, 8e-5, 1.6e-4)
SPEC = TuningSpec(rule="final_argmax", values=GRID, seeds=SEEDS, metric=(32,))
NOISE = {1000: 0.004, 1001: -0.003, 1002: 0.001, 1003: -0.002}  # seed x value wobble


def table(curve, grid=GRID, seed_effect=0.05):
    """{lr: {seed: score}}: curve(lr) + a shared seed effect (cancels in paired differences) +
    a small per-(seed, lr) wobble whose SD sets the paired SE (about 0.003)."""
    return {
        v: {
            s: curve(v) + seed_effect * (i - 1.5) + NOISE[s] * (1 if j % 2 else -1)
            for i, s in enumerate(SEEDS)
        }
        for j, v in enumerate(grid)
    }


def peak(at, height=0.6):
    """A score curve with its maximum at lr `at`, falling by 0.03 per octave on either side (ten
    times the paired SE of `table`'s wobble)."""
    return lambda v: height - 0.03 * abs(math.log2(v / at))


def bowl(at, height=0.6):
    """A score curve with its maximum at lr `at`, falling by 0.1 x octaves squared."""
    return lambda v: height - 0.1 * math.log2(v / at) ** 2


def run_stage(curve, spec=SPEC, grid=GRID):
    """The tuning stage's loop (ict.compare.grid.run_tuning) on a synthetic curve: each round
    scores the current grid, the rule chooses, its growth points are added. Returns the final
    Choice and the number of rounds."""
    grids, growths = {"m": list(grid)}, {"m": dict.fromkeys(EDGES, 0)}
    for rounds in range(1, 20):
        choice = decide(spec, grids, growths, {"m": table(curve, grids["m"])})["m"]
        if not choice.grow:
            return choice, rounds
        grids["m"], growths["m"] = add_growth(grids["m"], growths["m"], choice.grow)
    raise AssertionError("the stage did not stop")


def test_the_interior_argmax_is_chosen_and_nothing_grows():
    choice = choose_final_argmax(table(peak(4e-5)), SPEC, GRID, dict.fromkeys(EDGES, 0))
    assert choice.selected == 4e-5 and choice.detail["best"] == 4e-5
    assert choice.grow == () and choice.at_edge == ()
    assert choice.detail["plateau"] == [4e-5, 4e-5]  # both neighbours below by >= 1 SE
    for v in (2e-5, 8e-5):  # the neighbours' gap (0.03) is far beyond their paired SE
        assert choice.scores[4e-5] - choice.scores[v] > 5 * choice.detail["se_to_best"][f"{v:.3g}"]


def test_the_grid_grows_on_the_low_edge_until_the_best_is_interior():
    choice, rounds = run_stage(peak(5e-6))  # one octave below the grid
    assert rounds == 3 and choice.grid[:3] == (2.5e-6, 5e-6, 1e-5)  # 1e-5 / 2, then / 2 again
    assert choice.selected == 5e-6 and choice.growths == {"low": 2, "high": 0}
    assert choice.at_edge == () and choice.detail["plateau"] == [5e-6, 5e-6]


def test_the_grid_grows_on_the_high_edge():
    choice, rounds = run_stage(peak(3.2e-4))
    assert rounds == 3 and choice.grid[-2:] == (3.2e-4, 6.4e-4)
    assert choice.selected == 3.2e-4 and choice.growths == {"low": 0, "high": 2}
    assert choice.at_edge == ()


def test_growth_stops_after_three_points_per_edge_and_flags_the_edge():
    better_below = lambda v: 0.3 - 0.03 * math.log2(v / 1e-5)  # noqa: E731
    choice, rounds = run_stage(better_below)
    assert rounds == 4 and choice.growths == {"low": 3, "high": 0}
    assert choice.grid[:4] == (1.25e-6, 2.5e-6, 5e-6, 1e-5)
    assert choice.selected == 1.25e-6 and choice.at_edge == ("low",) and choice.grow == ()
    record = tuning_record(SPEC, {"m": choice})
    assert record["methods"]["m"]["at_edge"] == ["low"] and record["rule"]["grow"] == 3
    capped = TuningSpec(**{**SPEC.__dict__, "grow": 1})  # a preset's own cap
    assert run_stage(better_below, capped)[0].growths == {"low": 1, "high": 0}


def test_a_flat_grid_grows_on_both_edges_at_once():
    choice = choose_final_argmax(table(lambda v: 0.5), SPEC, GRID, dict.fromkeys(EDGES, 0))
    assert choice.grow == (5e-6, 3.2e-4)
    assert choice.selected == 4e-5  # the centre of a plateau spanning the whole grid


def test_ties_go_to_the_centre_of_the_tied_plateau():
    seeds = (1000, 1001, 1002)
    spec = TuningSpec(**{**SPEC.__dict__, "seeds": seeds})
    rows = {  # per seed; 1e-5 is the argmax (0.601), 2e-5 .. 8e-5 within 1 paired SE of it
        5e-6: (0.50, 0.52, 0.48),
        1e-5: (0.61, 0.59, 0.603),
        2e-5: (0.60, 0.61, 0.59),
        4e-5: (0.59, 0.60, 0.6085),
        8e-5: (0.605, 0.585, 0.607),
        1.6e-4: (0.30, 0.31, 0.29),
    }
    grid = tuple(rows)
    scores = {v: dict(zip(seeds, r, strict=True)) for v, r in rows.items()}
    choice = choose_final_argmax(scores, spec, grid, {"low": 1, "high": 0})
    assert choice.detail["best"] == 1e-5 and choice.detail["plateau"] == [1e-5, 8e-5]
    for v in (2e-5, 4e-5, 8e-5):
        gap = choice.scores[1e-5] - choice.scores[v]
        assert 0 < gap < choice.detail["se_to_best"][f"{v:.3g}"]
    # four tied points: the two central ones are 2e-5 and 4e-5, and the higher mean wins
    assert choice.selected == 2e-5
    assert choice.grow == () and choice.at_edge == ()  # 5e-6 and 1.6e-4 are clearly below
    rows[1.6e-4] = (0.60, 0.59, 0.6055)  # now tied too: five points, the centre is 4e-5
    scores = {v: dict(zip(seeds, r, strict=True)) for v, r in rows.items()}
    choice = choose_final_argmax(scores, spec, grid, {"low": 1, "high": 0})
    assert choice.detail["plateau"] == [1e-5, 1.6e-4] and choice.selected == 4e-5
    assert choice.grow == (3.2e-4,)  # the plateau reaches the high edge


def test_the_se_is_that_of_the_paired_per_seed_difference():
    a = {1000: 0.61, 1001: 0.55, 1002: 0.70, 1003: 0.58}
    b = {1000: 0.60, 1001: 0.52, 1002: 0.69, 1003: 0.56, 1004: 0.9}  # 1004: unpaired, left out
    d = [a[s] - b[s] for s in (1000, 1001, 1002, 1003)]
    assert paired_se(a, b) == pytest.approx(stats.sem(d))  # sd (n - 1) / sqrt(n)
    mean = sum(d) / 4
    hand = math.sqrt(sum((x - mean) ** 2 for x in d) / 3) / 2
    assert paired_se(a, b) == pytest.approx(hand)
    t = stats.ttest_rel([a[s] for s in sorted(a)], [b[s] for s in sorted(a)]).statistic
    assert paired_se(a, b) == pytest.approx(mean / t)
    # paired, not two independent samples: a large seed effect shared by both values cancels,
    # so a gap of 0.01 is clearly below (an unpaired SE of about 0.03 would call it a tie)
    grid = (1e-5, 2e-5, 4e-5)
    scores = table(lambda v: {2e-5: 0.61}.get(v, 0.60), grid, seed_effect=0.05)
    choice = choose_final_argmax(scores, SPEC, grid, dict.fromkeys(EDGES, 0))
    se = choice.detail["se_to_best"]["1e-05"]
    unpaired = math.sqrt(stats.tvar(list(scores[1e-5].values())) / 4 * 2)
    assert se < 0.01 < unpaired and choice.selected == 2e-5 and choice.grow == ()


def test_the_score_is_the_final_steps_pass_at_k():
    results = [
        {"step": s, "benchmarks": {"t": {"pass@32": p, "pass@1": 0.1}}}
        for s, p in ((100, 0.9), (300, 0.7), (200, 0.8))
    ]
    assert final_score(results, (32,)) == 0.7  # the latest step, not the mean (0.8)
    assert RULES["final_argmax"].score is final_score and math.isnan(final_score([], (32,)))


def test_shared_mode_chooses_one_lr_on_the_mean_over_methods():
    scores = {"grpo": table(bowl(8e-5)), "ict": table(bowl(2e-5))}  # the mean peaks at 4e-5
    spec = TuningSpec(**{**SPEC.__dict__, "mode": "shared"})
    grids = {m: list(GRID) for m in scores}
    choices = decide(spec, grids, {m: dict.fromkeys(EDGES, 0) for m in scores}, scores)
    assert choices["grpo"] is choices["ict"] and choices["ict"].selected == 4e-5
    record = tuning_record(spec, choices, scores)
    assert record["selected"] == {"grpo": 4e-5, "ict": 4e-5}
    assert record["shared"]["scores"]["4e-05"] == pytest.approx(0.6 - 0.1)  # both one octave off
    assert record["methods"]["ict"]["scores"]["2e-05"] == pytest.approx(0.6)  # its own cells
    assert record["methods"]["grpo"]["per_seed"]["8e-05"] == {
        str(s): pytest.approx(x) for s, x in scores["grpo"][8e-5].items()
    }


def test_a_centre_gives_a_ratio_two_grid():
    assert TuningSpec(rule="final_argmax", centre=4e-5).values == (2e-5, 4e-5, 8e-5)
    five = TuningSpec(rule="final_argmax", centre=6.3e-5, points=5).values
    assert five == (1.57e-5, 3.15e-5, 6.3e-5, 1.26e-4, 2.52e-4)  # 1.575e-5 to 3 digits
    with pytest.raises(ConfigError, match="not both"):
        TuningSpec(centre=4e-5, values=(1e-5, 2e-5))
    with pytest.raises(ConfigError, match="odd"):
        TuningSpec(centre=4e-5, points=4)


@pytest.mark.parametrize(
    ("change", "check", "message"),
    [
        ({"seeds": (1000, 1001)}, {}, ">= 3 tuning seeds"),
        ({"metric": (1, 4)}, {}, "one pass@k"),
        ({"values": (2e-5, 6.3e-5, 2e-4)}, {}, "ratio 2"),
        ({"per_method": {"ict": (1e-5, 3e-5)}}, {}, "ratio 2"),
        ({}, {"validation_problems": 64}, ">= 128 validation problems"),
        ({"metric": (4,)}, {"validation_samples": 8}, ">= 16 samples"),
        ({}, {"validation_samples": 16}, ">= 32 samples"),  # pass@32 needs 32
        ({}, {"primary_metrics": ["pass@4", "pass@1"]}, "not a declared primary endpoint"),
        ({"rule": "best"}, {}, "not one of"),
    ],
)
def test_the_spec_of_final_argmax_is_refused_in_one_line(change, check, message):
    spec = TuningSpec(**{**SPEC.__dict__, **change})
    with pytest.raises(ConfigError, match=message) as error:
        spec.validate(range(20), **check)
    assert "\n" not in str(error.value)


def test_a_valid_final_argmax_spec_passes():
    SPEC.validate(
        range(20), validation_problems=128, validation_samples=32,
        primary_metrics=["pass@32", "pass@32", "reward"],
    )  # fmt: skip


def test_the_old_rule_rederives_the_committed_studys_choice():
    """docs/reports/toy-cot-long-tuned: its report.json holds every tuning cell's score per
    seed; replaying the stage on them with the preset's spec gives the grid it grew and the value
    it selected for every method."""
    record = json.loads((ROOT / "docs/reports/toy-cot-long-tuned/report.json").read_text())
    record = record["tuning"]
    spec = get_preset("toy-cot-long").tuning
    assert spec.rule == "smallest_within_margin" and record["rule"]["tie_margin"] == spec.tie_margin
    methods = list(record["methods"])
    scores = {
        m: {float(v): {int(s): x for s, x in p.items()} for v, p in t["per_seed"].items()}
        for m, t in record["methods"].items()
    }
    grids = {m: list(spec.grid(m)) for m in methods}
    growths = {m: dict.fromkeys(EDGES, 0) for m in methods}
    for _ in range(5):  # each round sees only the values of its grid
        choices = decide(spec, grids, growths, scores)
        if not any(c.grow for c in choices.values()):
            break
        for m, c in choices.items():
            grids[m], growths[m] = add_growth(grids[m], growths[m], c.grow)
    for m in methods:
        stored = record["methods"][m]
        assert list(choices[m].grid) == stored["grid"]
        assert choices[m].selected == stored["selected"] == record["selected"][m]
        assert {f"{v:.3g}": s for v, s in choices[m].scores.items()} == pytest.approx(
            stored["scores"]
        )
    # every arm grew once below the half-decade grid; ICT and random_sequence stayed at its edge
    assert {m: c.selected for m, c in choices.items()} == {
        "grpo": 2e-5, "ict": 6.35e-6, "random_sequence": 6.35e-6, "entropy": 2e-5, "kl_cov": 2e-5,
    }  # fmt: skip
    assert [m for m, c in choices.items() if c.at_edge] == ["ict", "random_sequence"]


def test_docs_compare_carries_each_rules_text_and_a_valid_block():
    """docs/compare.md's tuning section: each rule's own text (Rule.text) verbatim, and its
    example `tuning:` block builds a spec that passes final_argmax's checks."""
    import re

    import yaml

    from ict.compare.presets import tuning_spec

    doc = (ROOT / "docs/compare.md").read_text()
    section = doc[doc.index("<!-- tuning rules:") : doc.index("### Verdicts")]
    flat = " ".join(section.split())
    for rule in RULES.values():
        assert f"**`{rule.name}`**" in section and " ".join(rule.text.split()) in flat, rule.name
    block = re.search(r"<!-- tuning block:.*?-->\n```yaml\n(.*?)```", section, re.S)
    spec = tuning_spec(yaml.safe_load(block.group(1))["tuning"])
    assert spec.rule == "final_argmax" and spec.values == (2e-5, 4e-5, 8e-5)
    spec.validate(
        range(20), validation_problems=spec.validation_size,
        validation_samples=spec.validation_samples, primary_metrics=["pass@32"],
    )  # fmt: skip
