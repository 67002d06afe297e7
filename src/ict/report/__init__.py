"""Reports: plots from metrics.jsonl, interval statistics, token maps, the comparison report.

Submodules import matplotlib lazily; `from ict.report.plots import plot_run` is the entry point for
the trainer.
"""
