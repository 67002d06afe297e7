"""Declared endpoints: the primary comparisons, alpha and the equivalence margin of a study.

A study declares, before any result is read, which comparisons carry its claims (the primary
ones: their p-values are Holm-adjusted as one family), the level alpha and the margin within
which two methods count as equivalent. Every other comparison is exploratory.

A primary comparison is written `A-B@METRIC`: method A minus method B on METRIC, where METRIC is
`pass@K` (every benchmark's pass@K: one comparison per benchmark), `reward` (the training
reward of the last steps) or a full report key such as `eval/toy_cot/pass@4`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ict.errors import ConfigError
from ict.evidence.seed_tests import UNITS

ALPHA = 0.05
MARGIN = 0.03  # absolute pass@k; docs/compare.md ("Declared endpoints") says why
_SPEC = re.compile(r"^\s*(?P<a>[^@\s]+?)\s*-\s*(?P<b>[^@\s-]+)\s*@\s*(?P<metric>\S+)\s*$")


def metric_name(key: str) -> str:
    """The short metric of a report key: 'eval/<bench>/pass@4' -> 'pass@4', 'reward/mean' ->
    'reward'; any other key is its own name."""
    if key.startswith("eval/") and "/pass@" in key:
        return "pass@" + key.rpartition("/pass@")[2]
    return "reward" if key == "reward/mean" else key


@dataclass(frozen=True)
class Endpoint:
    """One declared comparison: method `a` minus method `b` on `metric` (see the module text)."""

    a: str
    b: str
    metric: str

    def matches(self, a: str, b: str, key: str) -> bool:
        """True when the comparison a - b on report key `key` is this endpoint."""
        return (a, b) == (self.a, self.b) and self.metric in (key, metric_name(key))

    @property
    def spec(self) -> str:
        return f"{self.a}-{self.b}@{self.metric}"

    @property
    def text(self) -> str:
        return f"{self.a} - {self.b} at {self.metric}"


def parse_endpoint(spec: str) -> Endpoint:
    """'ict-grpo@pass@4' -> Endpoint('ict', 'grpo', 'pass@4'); ConfigError naming the form."""
    match = _SPEC.match(spec)
    if match is None:
        raise ConfigError(
            f"primary comparison {spec!r} is not METHOD-BASELINE@METRIC, e.g. ict-grpo@pass@4 "
            "or ict-random_sequence@pass@1 (METRIC: pass@K, reward or a full report key)"
        )
    return Endpoint(match["a"], match["b"], match["metric"])


@dataclass(frozen=True)
class Endpoints:
    """What a study declares: `primary` comparisons, `alpha`, the equivalence `margin` (absolute,
    in the metric's units), `relative_margin` (when set, the margin of a comparison on a key is
    this fraction of the baseline method's measured change from the start model on that key,
    measured in the same study; `margin` is the fallback where that change cannot be measured)
    and `source` (where the declaration comes from, for the report). `unit`: what the
    seed-level test replicates, "seed" (the paired t over seeds, blocked by warm start when
    there are several) or "warm start" (the warm starts' mean differences are the units:
    ict.evidence.seed_tests.unit_test; a verdict about warm starts drawn like these)."""

    primary: tuple[Endpoint, ...] = ()
    alpha: float = ALPHA
    margin: float = MARGIN
    source: str = "none declared: every comparison is exploratory"
    notes: tuple[str, ...] = field(default=())
    relative_margin: float | None = None
    unit: str = "seed"

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ConfigError(f"unknown unit {self.unit!r}; use one of {', '.join(UNITS)}")
        if not 0.0 < self.alpha < 0.5:
            raise ConfigError(f"alpha must be in (0, 0.5), got {self.alpha}")
        if not self.margin > 0.0:
            raise ConfigError(f"the equivalence margin must be > 0, got {self.margin}")
        if self.relative_margin is not None and not 0.0 < self.relative_margin <= 1.0:
            raise ConfigError(
                f"the relative equivalence margin must be in (0, 1], got {self.relative_margin}"
            )

    def is_primary(self, a: str, b: str, key: str) -> bool:
        return any(e.matches(a, b, key) for e in self.primary)

    def as_dict(self) -> dict:
        return {
            "primary": [e.spec for e in self.primary],
            "alpha": self.alpha,
            "margin": self.margin,
            "relative_margin": self.relative_margin,
            "source": self.source,
            "notes": list(self.notes),
        } | ({"unit": self.unit} if self.unit != "seed" else {})  # older reports: no key


def declare(
    primary=(),
    *,
    alpha: float = ALPHA,
    margin: float = MARGIN,
    source: str = "",
    notes=(),
    relative_margin: float | None = None,
    unit: str = "seed",
) -> Endpoints:
    """Endpoints from specs (`A-B@METRIC` strings or Endpoint objects), deduplicated in order."""
    parsed: list[Endpoint] = []
    for item in primary:
        e = item if isinstance(item, Endpoint) else parse_endpoint(str(item))
        if e not in parsed:
            parsed.append(e)
    default = Endpoints().source
    return Endpoints(
        tuple(parsed), alpha, margin, source or default, tuple(notes), relative_margin, unit
    )
