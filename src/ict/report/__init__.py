"""Reports: plots from metrics.jsonl, token maps, the comparison report (statistics: ict.evidence).

Submodules import matplotlib lazily; `from ict.report.plots import plot_run` is the entry point for
the trainer.
"""
