"""Evaluation: unbiased pass@k, the one evaluation pipeline (`Evaluation`, `run_eval`) with one
result schema, and `evaluate(...)`, the hook an external trainer calls every N steps."""

from ict.eval.metrics import (
    DEFAULT_KS,
    curve_ks,
    default_ks,
    pass_at_k,
    pass_at_k_matrix,
    pass_at_k_per_problem,
)
from ict.eval.runner import (
    Evaluation,
    evaluate,
    load_eval_items,
    results_table,
    run_eval,
    summary_markdown,
)
from ict.eval.settings import EvalSettings

__all__ = [
    "DEFAULT_KS",
    "EvalSettings",
    "Evaluation",
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
