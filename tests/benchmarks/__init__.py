"""Tests of benchmarks/: `load_benchmark` imports one of its scripts as a module."""

import importlib.util
from pathlib import Path

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


def load_benchmark(name: str):
    """The module benchmarks/<name>.py (its own imports of `_common` etc. as the script makes them)."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
