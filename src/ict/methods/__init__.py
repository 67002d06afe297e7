"""Methods: what a training run computes, defined once for every engine.

- `registry`: `Method` (a selector plus a paper's reference, scope, loss and warm-up), `METHODS`,
  `get_method`, `register_method`.
- `options`: `MethodOptions`, the method fields every engine's config inherits, and their checks.

The step a method runs (plan, selection, one rollout batch's run) is `ict.step`'s. `options`
needs no torch and is imported at once; the registry on first use (module `__getattr__`), so that
configs and `ict <command> --help` stay torch-free.
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
    from ict.methods.registry import (
        DEFAULT_REFERENCE,
        METHODS,
        PAPER_DENSE_WARMUP,
        Method,
        available_methods,
        get_method,
        register_method,
    )

_LAZY = dict.fromkeys(
    ("DEFAULT_REFERENCE", "METHODS", "PAPER_DENSE_WARMUP", "Method", "available_methods",
     "get_method", "register_method"),
    "ict.methods.registry",
)  # fmt: skip

__all__ = [
    "DEFAULT_REFERENCE",
    "METHODS",
    "METHOD_FIELDS",
    "Method",
    "MethodOptions",
    "PAPER_DENSE_WARMUP",
    "available_methods",
    "check_engine_advantage",
    "get_method",
    "register_method",
    "resolve_method",
    "selector_kwargs",
    "validate_method_options",
]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), __all__)
