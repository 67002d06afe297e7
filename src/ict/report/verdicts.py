"""The comparison report's verdicts: which comparisons are made, their seed-level tests, their text.

Comparisons: every method against the baseline on every report key (held-out pass@k of each
benchmark, the training reward), plus every declared primary comparison (ict.evidence.endpoints)
whose two methods ran. Each is tested over seeds (ict.evidence.seed_tests) from one number per
(method, seed) and judged by ict.evidence.verdict: higher / lower / equivalent / inconclusive,
primary (Holm over the declared family) or exploratory. Works the same on a live report (numbers
from the run directories) and on a re-render (numbers from a report.json).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from ict.evidence.distributions import t_ppf
from ict.evidence.endpoints import Endpoints
from ict.evidence.intervals import Interval, clipped, format_interval, paired_difference
from ict.evidence.problem_tests import ProblemTest, over_problems_test
from ict.evidence.seed_tests import seed_test
from ict.evidence.verdict import Judgement, Key, Margin, Verdict, judge

# {report key: {method: {seed: value}}}
Values = Mapping[str, Mapping[str, Mapping]]
# {report key: {method: {seed: [P] per-problem values}}}: the over-problems tests' input
Units = Mapping[str, Mapping[str, Mapping]]


def pass_key(key: str) -> tuple[str, int] | None:
    """'eval/<benchmark>/pass@<k>' -> (benchmark, k); None for other keys."""
    if not key.startswith("eval/") or "/pass@" not in key:
        return None
    bench, _, k = key[5:].rpartition("/pass@")
    return (bench, int(k)) if k.isdigit() else None


def values_of(results: Mapping) -> Values:
    """{key: {method: {seed: value}}} from {key: {method: MethodResult}} (anything with
    `.values`: {seed: value})."""
    return {key: {m: r.values for m, r in by.items()} for key, by in results.items()}


VERDICT_HEADER = ["seed-level p", "Holm p", "MDE (80% power)", "verdict"]
IDENTICAL_RUNS = "identical runs: equal on every seed and metric (no token changed)"


def comparison_keys(values: Values, baseline: str, endpoints: Endpoints) -> list[Key]:
    """(a, b, key) for every method against `baseline` and every declared primary comparison
    whose methods both have values at `key`, in report order."""
    keys: list[Key] = []
    for key, by_method in values.items():
        if baseline in by_method:
            keys += [(m, baseline, key) for m in by_method if m != baseline]
        for e in endpoints.primary:
            k = (e.a, e.b, key)
            if e.a in by_method and e.b in by_method and e.matches(*k) and k not in keys:
                keys.append(k)
    return keys


def identical_runs(values: Values, a: str, b: str) -> bool:
    """True when `a` and `b` have the same seeds and equal values on every key they share."""
    shared = [v for v in values.values() if a in v and b in v]
    return bool(shared) and all(
        set(v[a]) == set(v[b]) and all(v[a][s] == v[b][s] for s in v[a]) for v in shared
    )


def evaluate(
    values: Values,
    baseline: str,
    endpoints: Endpoints,
    *,
    units: Units | None = None,
    stored: Mapping[Key, ProblemTest] | None = None,
    blocks: Mapping | None = None,
    margins: Mapping[Key, Margin] | None = None,
) -> Judgement:
    """Seed-level tests and verdicts of every comparison (comparison_keys); with `units`, the
    over-problems test beside each paired seed-level test (ict.evidence.problem_tests), or the
    one a report.json `stored` (a re-render: no per-problem values there); `blocks`
    {seed: block} blocks the paired tests (the warm start); `margins` the derived equivalence
    margins. A comparison between identical runs says so in its note."""
    units, stored = units or {}, stored or {}
    tests, problem_tests = {}, {}
    for a, b, key in comparison_keys(values, baseline, endpoints):
        k = (a, b, key)
        test = seed_test(values[key][a], values[key][b], blocks, endpoints.unit)
        tests[k] = test
        by_method = units.get(key, {})
        paired = test.design.startswith(("paired t", "t over"))
        if paired and a in by_method and b in by_method:
            problem_tests[k] = over_problems_test(
                by_method[a], by_method[b], blocks, seed_level=test
            )
        elif k in stored:
            problem_tests[k] = stored[k]
    judgement = judge(tests, endpoints, problem_tests, margins)
    for k, v in judgement.verdicts.items():
        if v.test.identical and identical_runs(values, k[0], k[1]):
            judgement.verdicts[k] = _with_note(v, IDENTICAL_RUNS)
    return judgement


def _with_note(v: Verdict, note: str) -> Verdict:
    from dataclasses import replace

    return replace(v, note=note)


# ---- text ------------------------------------------------------------------------------------
def p_text(p: float | None) -> str:
    """'0.069', '<0.001', 'n/a'."""
    if p is None or not math.isfinite(p):
        return "n/a"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def mde_text(mde: float) -> str:
    """'0.124'; '> 1' when no difference inside [-1, 1] could be detected; 'n/a'."""
    if not math.isfinite(mde):
        return "n/a"
    return "> 1" if mde > 1.0 else f"{mde:.3f}"


def verdict_cells(v: Verdict | None) -> list[str]:
    """The four VERDICT_HEADER cells of one comparison."""
    if v is None:
        return ["", "", "", ""]
    t = v.test
    if not t.tested:
        p = "n/a (1 seed)" if not t.identical else "n/a"
    else:
        flip = f" (sign flip {p_text(t.p_sign_flip)})" if t.p_sign_flip is not None else " (Welch)"
        p = p_text(t.p) + flip
    holm = p_text(v.p_holm) if v.primary else "- (exploratory)"
    mde = mde_text(v.mde)
    word = f"**{v.label}**" if v.primary else v.label
    note = f"; {v.note}" if v.note else ""
    return [p, holm, mde, word + note]


def difference_text(diff: Interval | None, v: Verdict | None) -> str:
    """The bootstrap difference as a description; identical arms say so instead of +0.000 [...]."""
    if v is not None and v.test.identical:
        return "identical on every seed"
    if diff is None:
        return "n/a"
    return f"{format_interval(diff, signed=True)} ({diff.method})"


def seed_interval(values: Mapping, baseline: Mapping, confidence: float) -> Interval:
    """The paired t interval over shared seeds (the seed-level test's own interval), clipped to
    the possible range of a difference of two [0, 1] means."""
    shared = sorted(set(values) & set(baseline), key=str)
    iv = paired_difference([values[s] for s in shared], [baseline[s] for s in shared], confidence)
    return clipped(iv, -1.0, 1.0)


def test_interval(test, confidence: float) -> Interval | None:
    """The interval of a blocked or warm-start-unit seed-level test: mean +- t_{df} x SE (its own
    SE and df), clipped to [-1, 1]; None without a test."""
    if not test.tested or not math.isfinite(test.se):
        return None
    half = t_ppf(0.5 + confidence / 2.0, test.df) * test.se if test.se > 0 else 0.0
    iv = Interval(test.mean, test.mean - half, test.mean + half, test.n, test.design, confidence)
    return clipped(iv, -1.0, 1.0)


def endpoints_paragraphs(endpoints: Endpoints, judgement: Judgement | None = None) -> list[str]:
    """The declaration, printed before any result: alpha, margin, primary comparisons, family."""
    e = endpoints
    if e.primary:
        listed = "; ".join(f"**{p.text}**" for p in e.primary)
        primary = f"Primary comparisons ({e.source}): {listed}."
    else:
        primary = f"Primary comparisons: none ({e.source})."
    if e.relative_margin is not None:
        margin = (
            f"equivalence margin = {e.relative_margin:g} x the baseline's measured change from the "
            f"start model on the same key, measured in this study ({e.margin:g}, absolute, where "
            "that change cannot be measured)"
        )
    else:
        margin = (
            f"equivalence margin = {e.margin:g} (absolute, in the metric's units: pass@k or "
            "reward; each primary row says whether it is smaller than the baseline's own change "
            "from the start model)"
        )
    lines = [primary, f"alpha = {e.alpha:g} (two-sided); {margin}."]
    if judgement is not None and e.primary:
        m = judgement.family_size
        text = (
            f"Holm's adjustment runs over the {m} primary comparison{'s' * (m != 1)} these runs "
            "allow"
        )
        if judgement.missing:
            text += (
                f" ({len(judgement.missing)} declared but not run, counted with p = 1: "
                + ", ".join(f"`{s}`" for s in judgement.missing)
                + ")"
            )
        lines.append(text + ".")
    lines += list(e.notes)
    return lines


def verdict_rule_text(judgement: Judgement | None = None) -> str:
    """The verdict rule in one paragraph (the Answer section prints it after the verdicts); the
    seed-level test named as `judgement`'s design made it (plain, blocked, warm starts as unit)."""
    return (
        "**Verdict rule**: **higher** / **lower** only when the seed-level test ("
        + _seed_test_text(judgement)
        + ") passes at alpha AND, where the runs hold per-problem values, the over-problems "
        "test (a two-way variance-components t: the seed-level variance plus the variance over "
        "problems of the seed-averaged per-problem difference / P, Satterthwaite df) passes too - "
        "each after Holm over the primary family for a primary comparison; the table says which "
        "test decided. **equivalent** only when TOST against the margin passes at alpha on both "
        "tests (Holm-adjusted over the primary family for a primary comparison), or the arms are "
        "identical on every seed - and only with the seeds the power calculation needs (the "
        "comparison's MDE within the margin; 2 for identical arms); otherwise **inconclusive**. Without the over-problems test a "
        "verdict is about the problems evaluated, not about new problems. Comparisons not declared primary are **exploratory**: their "
        "own unadjusted p and verdict, a hypothesis for the next study, not a finding. MDE: the "
        "true difference the test would detect with 80% power at the level it faces (primary: "
        "alpha / m, Holm's strictest step; exploratory: alpha), from the observed SD of the "
        "per-seed differences and the number of seeds. The exact sign-flip p is printed beside "
        "the t test's; its smallest possible value is 2^(1-n), so it cannot pass 0.05 below 6 "
        "seeds."
    )


def _seed_test_text(judgement: Judgement | None) -> str:
    """How the seed-level test was made, in the verdict rule's words: the plain paired t, or
    (when the judgement holds a blocked or warm-start-unit test) how it treats the blocks."""
    designs = {v.test.design for v in judgement.verdicts.values()} if judgement else set()
    if any(d.startswith("t over") for d in designs):
        return (
            "warm starts as the unit: the t test of the B warm starts' mean per-seed "
            "differences, B - 1 degrees of freedom; Welch t when the seed sets differ"
        )
    if any(d.endswith("Welch df") for d in designs):
        return (
            "paired t over seeds blocked by warm start: the warm-start means removed from the "
            "error, SE from each warm start's own SD, Welch-Satterthwaite degrees of freedom; "
            "Welch t when the seed sets differ"
        )
    return (
        "paired t over seeds, n - 1 degrees of freedom, or n - B with B warm-start blocks; "
        "Welch t when the seed sets differ"
    )


def adjusted_interval(v: Verdict, family_size: int, confidence: float) -> Interval | None:
    """The interval beside a primary verdict, at the level its Holm family faces at the
    strictest step (Bonferroni: 1 - (1 - confidence) / m), from the over-problems test when
    there is one (the wider), else the seed-level test; None without a test."""
    t = v.problem if v.problem is not None and v.problem.tested else v.test
    if not t.tested or not math.isfinite(t.se):
        return None
    level = 1.0 - (1.0 - confidence) / max(1, family_size)
    half = t_ppf(0.5 + level / 2.0, t.df) * t.se if t.se > 0 else 0.0
    method = "over seeds and problems" if t is v.problem else "over seeds"
    iv = Interval(
        t.mean, t.mean - half, t.mean + half, t.n if t is v.test else t.seeds, method, level
    )
    return clipped(iv, -1.0, 1.0)


def key_names(judgement: Judgement) -> dict[str, str]:
    """{report key: its name in a table}: 'eval/<benchmark>/pass@k' with the benchmark's short
    name (ict.data.short_labels: a task spec without its options); other keys as they are."""
    from ict.data import short_labels

    keys = sorted({v.key for v in judgement.verdicts.values()})
    benches = short_labels(sorted({b for k in keys if (b := (pass_key(k) or ("",))[0])}))
    return {k: f"eval/{benches[pk[0]]}/pass@{pk[1]}" if (pk := pass_key(k)) else k for k in keys}


def primary_rows(
    judgement: Judgement, values: Values, confidence: float
) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the primary comparisons (declared ones not run included): both tests'
    p (raw and Holm), TOST p (Holm), the margin and where it came from, the MDE, which test
    decided, and the interval at the family's adjusted level."""
    m = judgement.family_size
    pct = 100.0 * (1.0 - (1.0 - confidence) / max(1, m))
    header = [
        "comparison", "key", "seeds", f"difference [{pct:g}% interval, Holm family of {m}]",
        "verdict", "decided by", "seed-level p", "Holm p", "over-problems p", "Holm p (problems)",
        "TOST p (Holm)", "margin", "MDE (80% power)",
    ]  # fmt: skip
    short = key_names(judgement)
    rows = []
    for a, b, key in judgement.family:
        v = judgement.verdicts[(a, b, key)]
        t = v.test
        if t.identical:
            diff = "identical on every seed"
        else:
            iv = adjusted_interval(v, m, confidence)
            diff = (
                f"{format_interval(iv, signed=True)} ({iv.method})"
                if iv is not None
                else (f"{t.mean:+.3f}" if math.isfinite(t.mean) else "n/a")
            )
        p, holm, mde, word = verdict_cells(v)
        pt = v.problem
        p_prob = p_text(pt.p) if pt is not None and pt.tested else "n/a (no per-problem values)"
        holm_prob = p_text(v.p_problems_holm) if pt is not None and pt.tested else "n/a"
        margin = f"{v.margin:.3f} ({v.margin_source})" if math.isfinite(v.margin) else "n/a"
        rows.append([
            f"{a} - {b}", short[key], str(t.n), diff, word, v.decided_by, p, holm, p_prob,
            holm_prob, p_text(v.p_tost), margin, mde,
        ])  # fmt: skip
    for spec in judgement.missing:
        rows.append(
            [spec, "", "0", "not run", "not run", "", "n/a", "counted as 1", "n/a", "n/a", "n/a",
             "n/a", "n/a"]
        )  # fmt: skip
    return header, rows


def judgement_json(judgement: Judgement) -> dict:
    """report.json's "verdicts": the declaration, the family and every comparison."""
    return {
        "endpoints": judgement.endpoints.as_dict(),
        "family_size": judgement.family_size,
        "missing": judgement.missing,
        "comparisons": [v.as_dict() for v in judgement.verdicts.values()],
    }
