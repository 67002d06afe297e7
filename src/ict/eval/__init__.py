"""Evaluation: unbiased pass@k, the resumable `ict eval` runner, and
`evaluate(...)`, the hook the trainer calls every N steps."""

from ict.eval.metrics import (
    DEFAULT_KS,
    curve_ks,
    default_ks,
    pass_at_k,
    pass_at_k_matrix,
    pass_at_k_per_problem,
)
from ict.eval.runner import (
    EvalSettings,
    evaluate,
    load_eval_items,
    results_table,
    run_eval,
    summary_markdown,
)

__all__ = [
    "DEFAULT_KS",
    "EvalSettings",
    "curve_ks",
    "default_ks",
    "evaluate",
    "load_eval_items",
    "pass_at_k",
    "pass_at_k_matrix",
    "pass_at_k_per_problem",
    "results_table",
    "run_eval",
    "summary_markdown",
]
