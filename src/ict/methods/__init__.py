"""Methods: what a training run computes, defined once for every engine.

- `registry`: `Method` (a selector plus a paper's reference, scope, loss and warm-up), `METHODS`,
  `get_method`, `register_method`.
- `options`: `MethodOptions`, the method fields every engine's config inherits, and their checks.
- `step`: `select_step`, one rollout batch's selection (warm-up, seed, diagnostics) and its metrics.
"""

from ict.methods.options import (
    METHOD_FIELDS,
    MethodOptions,
    resolve_method,
    selector_kwargs,
    validate_method_options,
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
    selection_seed,
    step_metrics,
    warmup_warning,
)

__all__ = [
    "DEFAULT_REFERENCE",
    "DIAGNOSTIC_METHODS",
    "METHODS",
    "METHOD_FIELDS",
    "PAPER_DENSE_WARMUP",
    "Method",
    "MethodOptions",
    "StepInputs",
    "StepSelection",
    "available_methods",
    "get_method",
    "is_dense",
    "register_method",
    "resolve_method",
    "run_warmup",
    "select_method",
    "select_step",
    "selection_seed",
    "selector_kwargs",
    "step_metrics",
    "validate_method_options",
    "warmup_warning",
]
