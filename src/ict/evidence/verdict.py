"""The verdict rule: higher, lower, equivalent or inconclusive, from seed-level tests.

For every comparison (method a minus method b on one report key), from its SeedTest:
- "higher" / "lower": the seed-level test passes at alpha - for a primary comparison after Holm's
  adjustment over the declared primary family (a declared comparison that could not be tested
  stays in the family with p = 1), for an exploratory one on its own p;
- "equivalent": TOST against the declared margin passes at alpha (Holm-adjusted over the primary
  family for primary comparisons), or the arms are identical on every seed;
- "inconclusive": otherwise, and always without a seed-level test (one seed).
Each verdict carries the minimum detectable effect at 80% power at the level the comparison is
tested at: alpha / m for a primary comparison (the strictest Holm step, m = family size), alpha
for an exploratory one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from ict.evidence.endpoints import Endpoints
from ict.evidence.equivalence import tost_p
from ict.evidence.multiplicity import holm
from ict.evidence.power import POWER, minimum_detectable_effect
from ict.evidence.seed_tests import SeedTest

WORDS = ("higher", "lower", "equivalent", "inconclusive")
Key = tuple[str, str, str]  # (method a, method b, report key): a - b on key


@dataclass(frozen=True)
class Verdict:
    """The verdict on a - b at report key `key`, with the numbers behind it.

    `p_holm`: Holm-adjusted p (primary only, else None); `p_tost`: TOST p (Holm-adjusted for
    primary comparisons); `mde`: minimum detectable effect at `power` and level `level`;
    `word`: one of WORDS; `note`: why, in a few words ("identical on every seed", ...)."""

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

    @property
    def label(self) -> str:
        """'higher (primary)', 'inconclusive (exploratory)'."""
        return f"{self.word} ({'primary' if self.primary else 'exploratory'})"

    def mirrored(self) -> Verdict:
        """The same verdict read as b - a."""
        flip = {"higher": "lower", "lower": "higher"}
        t = self.test
        test = replace(t, mean=-t.mean) if math.isfinite(t.mean) else t
        return replace(self, a=self.b, b=self.a, test=test, word=flip.get(self.word, self.word))

    def as_dict(self) -> dict:
        t = self.test
        return {
            "a": self.a, "b": self.b, "key": self.key, "primary": self.primary,
            "exploratory": not self.primary, "test": t.design, "seeds": t.n, "difference": t.mean,
            "se": t.se, "sd_of_differences": t.sd, "df": t.df, "p": t.p,
            "p_sign_flip": t.p_sign_flip, "p_holm": self.p_holm, "p_tost": self.p_tost,
            "mde": self.mde, "mde_power": self.power, "mde_level": self.level,
            "identical": t.identical, "verdict": self.word, "note": self.note,
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


def _word(test: SeedTest, p: float, p_tost: float, alpha: float) -> tuple[str, str]:
    if test.identical:
        return "equivalent", "identical on every seed"
    if not test.tested:
        return "inconclusive", test.reason
    if p < alpha:
        return ("higher" if test.mean > 0 else "lower"), ""
    if p_tost < alpha:
        return "equivalent", ""
    return "inconclusive", ""


def judge(tests: Mapping[Key, SeedTest], endpoints: Endpoints) -> Judgement:
    """Verdicts for every comparison in `tests` under `endpoints` (see the module text). A
    comparison whose mirror (b - a) is primary gets the mirrored primary verdict."""
    family = [k for k in tests if endpoints.is_primary(*k)]
    missing = [
        e.spec for e in endpoints.primary if not any(e.matches(*k) for k in family)
    ]  # declared, but no such comparison in these runs
    m = len(family) + len(missing)
    alpha, margin = endpoints.alpha, endpoints.margin
    tost = {k: tost_p(t, margin) for k, t in tests.items()}
    p_holm = holm([tests[k].p for k in family] + [math.nan] * len(missing))
    tost_holm = holm([tost[k] for k in family] + [math.nan] * len(missing))
    verdicts: dict[Key, Verdict] = {}
    for i, k in enumerate(family):
        test = tests[k]
        word, note = _word(test, p_holm[i], tost_holm[i], alpha)
        level = alpha / m
        mde = math.nan if test.identical else minimum_detectable_effect(test.se, test.df, level)
        verdicts[k] = Verdict(*k, test, True, p_holm[i], tost_holm[i], mde, level, word, note)
    for k, test in tests.items():
        if k in verdicts:
            continue
        mirror = verdicts.get((k[1], k[0], k[2]))
        if mirror is not None and mirror.primary:
            verdicts[k] = mirror.mirrored()
            continue
        word, note = _word(test, test.p, tost[k], alpha)
        mde = math.nan if test.identical else minimum_detectable_effect(test.se, test.df, alpha)
        verdicts[k] = Verdict(*k, test, False, None, tost[k], mde, alpha, word, note)
    return Judgement(verdicts, family, missing, endpoints)
