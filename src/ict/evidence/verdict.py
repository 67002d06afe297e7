"""The verdict rule: higher, lower, equivalent or inconclusive, from seed-level tests and, where
the runs hold per-problem values, over-problems tests.

For every comparison (method a minus method b on one report key), from its SeedTest and its
ProblemTest (ict.evidence.problem_tests; None when the runs hold no per-problem values):
- "higher" / "lower": the seed-level test passes at alpha AND, when there is one, the over-problems
  test passes at alpha - for a primary comparison each after Holm's adjustment over the declared
  primary family (a declared comparison that could not be tested stays in the family with
  p = 1), for an exploratory one on its own p. `decided_by` says which test decided;
- "equivalent": TOST against the comparison's margin passes at alpha for the seed-level test and,
  when there is one, for the over-problems test (the larger p counts; Holm-adjusted over the
  primary family for primary comparisons), or the arms are identical on every seed - and in
  either case only with the seeds the power calculation needs: the comparison's MDE (below) is
  within the margin (at least 2 seeds for identical arms, whose SD is 0), so that the study could
  have detected a difference of the margin's size; with fewer, "inconclusive", the note naming
  the seeds needed (`ict.evidence.power.seeds_needed`);
- "inconclusive": otherwise, and always without a seed-level test (one seed).
The margin is the declared one (`Endpoints.margin`) unless the caller derives one per comparison
(`margins`: e.g. half of GRPO's measured change on that key, ict.report.verdicts).
Each verdict carries the minimum detectable effect at 80% power at the level the comparison is
tested at: alpha / m for a primary comparison (the strictest Holm step, m = family size), alpha
for an exploratory one; the larger of the seed-level test's and the over-problems test's (both
must pass, so the harder one bounds the rule).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from ict.evidence.endpoints import Endpoints
from ict.evidence.equivalence import tost_p
from ict.evidence.multiplicity import holm
from ict.evidence.power import POWER, minimum_detectable_effect, seeds_needed
from ict.evidence.problem_tests import ProblemTest
from ict.evidence.seed_tests import SeedTest

WORDS = ("higher", "lower", "equivalent", "inconclusive")
Key = tuple[str, str, str]  # (method a, method b, report key): a - b on key
Margin = tuple[float, str]  # (margin, how it was derived)


@dataclass(frozen=True)
class Verdict:
    """The verdict on a - b at report key `key`, with the numbers behind it.

    `p_holm`: Holm-adjusted p (primary only, else None); `p_tost`: TOST p (Holm-adjusted for
    primary comparisons); `mde`: minimum detectable effect at `power` and level `level`;
    `word`: one of WORDS; `note`: why, in a few words ("identical on every seed", ...);
    `problem`: the over-problems test (None without per-problem values) and `p_problems_holm`
    its Holm-adjusted p (primary only); `margin` / `margin_source`: the equivalence margin and
    how it was derived; `decided_by`: which test decided the word."""

    a: str
    b: str
    key: str
    test: SeedTest
    primary: bool
    p_holm: float | None
    p_tost: float
    mde: float
    level: float
    word: str
    note: str = ""
    power: float = POWER
    problem: ProblemTest | None = None
    p_problems_holm: float | None = None
    margin: float = math.nan
    margin_source: str = ""
    decided_by: str = ""

    @property
    def label(self) -> str:
        """'higher (primary)', 'inconclusive (exploratory)'."""
        return f"{self.word} ({'primary' if self.primary else 'exploratory'})"

    def mirrored(self) -> Verdict:
        """The same verdict read as b - a."""
        flip = {"higher": "lower", "lower": "higher"}
        t = self.test
        test = replace(t, mean=-t.mean) if math.isfinite(t.mean) else t
        pt = self.problem
        problem = replace(pt, mean=-pt.mean) if pt is not None and math.isfinite(pt.mean) else pt
        return replace(
            self, a=self.b, b=self.a, test=test, problem=problem,
            word=flip.get(self.word, self.word),
        )  # fmt: skip

    def as_dict(self) -> dict:
        t = self.test
        return {
            "a": self.a, "b": self.b, "key": self.key, "primary": self.primary,
            "exploratory": not self.primary, "test": t.design, "seeds": t.n, "difference": t.mean,
            "se": t.se, "sd_of_differences": t.sd, "df": t.df, "p": t.p,
            "p_sign_flip": t.p_sign_flip, "p_holm": self.p_holm, "p_tost": self.p_tost,
            "mde": self.mde, "mde_power": self.power, "mde_level": self.level,
            "identical": t.identical, "verdict": self.word, "note": self.note,
            "p_problems": self.problem.p if self.problem else None,
            "p_problems_holm": self.p_problems_holm,
            "problem_test": self.problem.as_dict() if self.problem else None,
            "margin": self.margin, "margin_source": self.margin_source,
            "tost_holm_adjusted": self.primary, "decided_by": self.decided_by,
        }  # fmt: skip


@dataclass(frozen=True)
class Judgement:
    """Verdicts for a set of comparisons: `verdicts` {Key: Verdict}; `family`: the primary keys
    tested; `missing`: declared endpoints no comparison matched (in the family with p = 1);
    `endpoints`: the declaration."""

    verdicts: dict[Key, Verdict]
    family: list[Key]
    missing: list[str]
    endpoints: Endpoints

    @property
    def family_size(self) -> int:
        return len(self.family) + len(self.missing)

    def get(self, a: str, b: str, key: str) -> Verdict | None:
        return self.verdicts.get((a, b, key))


def _word(
    test: SeedTest, p: float, p_tost: float, alpha: float,
    problem: ProblemTest | None = None, p_problem: float | None = None,
) -> tuple[str, str, str]:  # fmt: skip
    """(word, note, decided_by) of one comparison (module docstring)."""
    if test.identical:
        return "equivalent", "identical on every seed", "identical runs"
    if not test.tested:
        return "inconclusive", test.reason, "no seed-level test"
    over = problem is not None and problem.tested
    seed_pass = p < alpha
    problem_pass = over and p_problem is not None and p_problem < alpha
    if seed_pass and (problem_pass or not over):
        word = "higher" if test.mean > 0 else "lower"
        return word, "", "both tests" if over else "seed-level test (no per-problem values)"
    if p_tost < alpha:
        return "equivalent", "", "TOST on both tests" if over else "TOST, seed-level"
    if seed_pass:
        return (
            "inconclusive",
            f"a difference on these {problem.problems} problems, not shown over new problems",
            "over-problems test",
        )
    if problem_pass:
        return "inconclusive", "", "seed-level test"
    return "inconclusive", "", "neither test"


def judge(
    tests: Mapping[Key, SeedTest],
    endpoints: Endpoints,
    problem_tests: Mapping[Key, ProblemTest] | None = None,
    margins: Mapping[Key, Margin] | None = None,
) -> Judgement:
    """Verdicts for every comparison in `tests` under `endpoints` (see the module text), with
    the over-problems tests `problem_tests` and derived `margins` where given. A comparison
    whose mirror (b - a) is primary gets the mirrored primary verdict."""
    problem_tests, margins = problem_tests or {}, margins or {}
    family = [k for k in tests if endpoints.is_primary(*k)]
    missing = [
        e.spec for e in endpoints.primary if not any(e.matches(*k) for k in family)
    ]  # declared, but no such comparison in these runs
    m = len(family) + len(missing)
    alpha = endpoints.alpha
    margin_of = {k: margins.get(k, (endpoints.margin, "declared, absolute")) for k in tests}
    tost = {}
    for k, t in tests.items():
        pt = problem_tests.get(k)
        ps = [tost_p(t, margin_of[k][0])]
        if pt is not None and pt.tested:
            ps.append(tost_p(pt, margin_of[k][0]))
        tost[k] = max(ps)

    def p_problem(k: Key) -> float:
        pt = problem_tests.get(k)
        return pt.p if pt is not None and pt.tested else math.nan

    p_holm = holm([tests[k].p for k in family] + [math.nan] * len(missing))
    pp_holm = holm([p_problem(k) for k in family] + [math.nan] * len(missing))
    tost_holm = holm([tost[k] for k in family] + [math.nan] * len(missing))

    def mde_of(test: SeedTest, pt: ProblemTest | None, level: float) -> float:
        if test.identical:
            return math.nan
        mde = minimum_detectable_effect(test.se, test.df, level)
        if pt is not None and pt.tested:  # both must pass: the harder one bounds the rule
            mde = max(mde, minimum_detectable_effect(pt.se, pt.df, level))
        return mde

    def powered(k: Key, word: str, note: str, by: str, mde: float, level: float):
        """(word, note, by) with "equivalent" kept only with the seeds the power calculation
        needs (module text)."""
        if word != "equivalent":
            return word, note, by
        test, margin = tests[k], margin_of[k][0]
        if test.identical and test.n >= 2:
            return word, note, by
        if not test.identical and math.isfinite(mde) and mde <= margin:
            return word, note, by
        need = seeds_needed(test.sd, margin, level) if not test.identical else 2
        why = "identical on every seed" if test.identical else "TOST passed"
        seeds = f"{test.n} seed{'s' * (test.n != 1)}"
        needed = f"{need} seeds" if need is not None else "more than 1000 seeds"
        mde_text = f" (MDE {mde:.3g})" if math.isfinite(mde) else ""
        note = (
            f"{why}, but with {seeds}: the power calculation needs {needed} to detect the margin "
            f"{margin:.3g}{mde_text}"
        )
        return "inconclusive", note, "power: too few seeds for equivalence"

    verdicts: dict[Key, Verdict] = {}
    for i, k in enumerate(family):
        test, pt = tests[k], problem_tests.get(k)
        word, note, by = _word(test, p_holm[i], tost_holm[i], alpha, pt, pp_holm[i])
        level = alpha / m
        mde = mde_of(test, pt, level)
        word, note, by = powered(k, word, note, by, mde, level)
        verdicts[k] = Verdict(
            *k, test, True, p_holm[i], tost_holm[i], mde, level, word, note,
            problem=pt, p_problems_holm=pp_holm[i] if pt is not None else None,
            margin=margin_of[k][0], margin_source=margin_of[k][1], decided_by=by,
        )  # fmt: skip
    for k, test in tests.items():
        if k in verdicts:
            continue
        mirror = verdicts.get((k[1], k[0], k[2]))
        if mirror is not None and mirror.primary:
            verdicts[k] = mirror.mirrored()
            continue
        pt = problem_tests.get(k)
        word, note, by = _word(test, test.p, tost[k], alpha, pt, p_problem(k))
        mde = mde_of(test, pt, alpha)
        word, note, by = powered(k, word, note, by, mde, alpha)
        verdicts[k] = Verdict(
            *k, test, False, None, tost[k], mde, alpha, word, note,
            problem=pt, margin=margin_of[k][0], margin_source=margin_of[k][1], decided_by=by,
        )  # fmt: skip
    return Judgement(verdicts, family, missing, endpoints)
