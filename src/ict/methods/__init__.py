"""Methods: what a training run computes, defined once for every engine.

- `registry`: `Method` (a selector plus a paper's reference, scope, loss and warm-up), `METHODS`,
  `get_method`, `register_method`.
- `options`: `MethodOptions`, the method fields every engine's config inherits, and their checks.
- `step`: `select_step`, one rollout batch's selection (warm-up, seed, diagnostics) and its metrics.
- `plan`: `StepPlan`, the method's step of a run resolved once from the options and the engine's
  `StepLayout`, and executed by one call on every engine (docs/engines/CONTRACT.md).

`options` needs no torch and is imported at once; the registry and the step (torch, ict.select)
on first use (module `__getattr__`), so that configs and `ict <command> --help` stay torch-free.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ict.lazy import lazy_exports
from ict.methods.options import (
    METHOD_FIELDS,
    MethodOptions,
    check_engine_advantage,
    resolve_method,
    selector_kwargs,
    validate_method_options,
)

if TYPE_CHECKING:
    from ict.methods.plan import (
        SeedStreams,
        StepCounts,
        StepLayout,
        StepPlan,
        StepResult,
        normaliser_counts,
        one_forward_off,
    )
    from ict.methods.registry import (
        DEFAULT_REFERENCE,
        METHODS,
        PAPER_DENSE_WARMUP,
        Method,
        available_methods,
        get_method,
        register_method,
    )
    from ict.methods.step import (
        DIAGNOSTIC_METHODS,
        StepInputs,
        StepSelection,
        is_dense,
        run_warmup,
        select_method,
        select_step,
        selection_in_forward,
        selection_seed,
        step_metrics,
        warmup_warning,
    )

_LAZY = {
    **dict.fromkeys(
        ("SeedStreams", "StepCounts", "StepLayout", "StepPlan", "StepResult", "normaliser_counts",
         "one_forward_off"),
        "ict.methods.plan",
    ),
    **dict.fromkeys(
        ("DEFAULT_REFERENCE", "METHODS", "PAPER_DENSE_WARMUP", "Method", "available_methods",
         "get_method", "register_method"),
        "ict.methods.registry",
    ),
    **dict.fromkeys(
        ("DIAGNOSTIC_METHODS", "StepInputs", "StepSelection", "is_dense", "run_warmup",
         "select_method", "select_step", "selection_in_forward", "selection_seed", "step_metrics",
         "warmup_warning"),
        "ict.methods.step",
    ),
}  # fmt: skip

__all__ = [
    "DEFAULT_REFERENCE",
    "DIAGNOSTIC_METHODS",
    "METHODS",
    "METHOD_FIELDS",
    "Method",
    "MethodOptions",
    "PAPER_DENSE_WARMUP",
    "SeedStreams",
    "StepCounts",
    "StepInputs",
    "StepLayout",
    "StepPlan",
    "StepResult",
    "StepSelection",
    "available_methods",
    "check_engine_advantage",
    "get_method",
    "is_dense",
    "normaliser_counts",
    "one_forward_off",
    "register_method",
    "resolve_method",
    "run_warmup",
    "select_method",
    "select_step",
    "selection_in_forward",
    "selection_seed",
    "selector_kwargs",
    "step_metrics",
    "validate_method_options",
    "warmup_warning",
]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), __all__)
