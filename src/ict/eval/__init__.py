"""Evaluation: unbiased pass@k, bootstrap intervals, the resumable `ict eval` runner, and
`evaluate(...)`, the hook the trainer calls every N steps."""

from ict.eval.metrics import bootstrap_ci, pass_at_k, pass_at_k_per_problem
from ict.eval.runner import (
    EvalSettings,
    evaluate,
    load_eval_items,
    results_table,
    run_eval,
    summary_markdown,
)

__all__ = [
    "EvalSettings",
    "bootstrap_ci",
    "evaluate",
    "load_eval_items",
    "pass_at_k",
    "pass_at_k_per_problem",
    "results_table",
    "run_eval",
    "summary_markdown",
]
