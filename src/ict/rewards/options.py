"""`VerifyOptions`: the math-verify settings of an item or benchmark, sent to the child process.

An item carries its own as `item.metadata["verifier_options"]` (a dict of the fields below, or a
`VerifyOptions`); fields it leaves out come from the `Verifier`'s defaults. A `Benchmark` sets
them for all its items (`ict.data.benchmarks.Benchmark.verifier_options`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

EXTRACTION_TARGETS = ("latex", "expr")
OPTIONS_KEY = "verifier_options"


@dataclass(frozen=True)
class VerifyOptions:
    """math-verify settings (their defaults are math-verify's own, and ict's until now).

    precision: decimal places a numeric comparison rounds to (math-verify `float_rounding`).
    extraction: what math-verify reads, in order: "latex" (LaTeX environments and boxes) and/or
        "expr" (plain numbers and expressions).
    boxed_priority: rank of `\\boxed{}` among the LaTeX patterns (0 first, 50 after "final answer
        is" anchors, -1 never); matters only where an answer or response holds text.
    strict: variables must match by name, and sets and tuples differ (math-verify `strict`).
    allow_set_relation_comp: compare a gold set with a predicted relation ("x in [-2, 7]" and
        "-2 <= x <= 7") as well as the reverse.
    """

    precision: int = 6
    extraction: tuple[str, ...] = EXTRACTION_TARGETS
    boxed_priority: int = 50
    strict: bool = True
    allow_set_relation_comp: bool = False

    def __post_init__(self):
        extraction = tuple(self.extraction)
        object.__setattr__(self, "extraction", extraction)
        if not extraction or any(t not in EXTRACTION_TARGETS for t in extraction):
            raise ValueError(f"extraction must be a non-empty subset of {EXTRACTION_TARGETS}")
        if len(set(extraction)) != len(extraction):
            raise ValueError(f"extraction lists a target twice: {extraction}")
        if not isinstance(self.precision, int) or not 0 <= self.precision <= 50:
            raise ValueError(f"precision must be an integer 0..50, got {self.precision!r}")
        if not isinstance(self.boxed_priority, int) or self.boxed_priority < -1:
            raise ValueError(
                f"boxed_priority must be an integer >= -1, got {self.boxed_priority!r}"
            )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (extraction as a list)."""
        return {**dataclasses.asdict(self), "extraction": list(self.extraction)}

    def merged(self, value: Any) -> VerifyOptions:
        """These options with the fields of `value` (None, a dict or a `VerifyOptions`) on top;
        ValueError naming the known fields for an unknown one."""
        if value is None:
            return self
        if isinstance(value, VerifyOptions):
            return value
        if not isinstance(value, dict):
            raise ValueError(f"verifier options must be a dict, got {type(value).__name__}")
        known = {f.name for f in dataclasses.fields(self)}
        unknown = set(value) - known
        if unknown:
            raise ValueError(
                f"unknown verifier option(s) {sorted(unknown)}; known: {sorted(known)}"
            )
        return dataclasses.replace(self, **value)


def options_of(item: Any, base: VerifyOptions) -> VerifyOptions:
    """The options an item asks for (`metadata["verifier_options"]`), over `base`."""
    metadata = getattr(item, "metadata", None) or {}
    return base.merged(metadata.get(OPTIONS_KEY))
