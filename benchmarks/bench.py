"""Run the benchmark set behind docs/benchmarks.md and print every table (what `make bench` runs).

  python benchmarks/bench.py            # the full set: the roofline (toy-cot cell and SmolLM2),
                                        # the toy-cot-long study on both paths, then the step
                                        # benchmarks on SmolLM2 (3-4 hours on a shared 2-core CPU)
  python benchmarks/bench.py --quick    # every step benchmark on the tiny model, about a minute
  python benchmarks/bench.py --only step_vs_trl rollout

Each benchmark runs as its own process with OMP_NUM_THREADS=1 (one intra-op thread: on a shared
machine the OpenMP barriers of a second thread wait for time slices; docs/benchmarks.md). With
--json DIR each writes DIR/<index>-<name>.json. The full set also runs the older micro-benchmarks
(token_stats.py at N = 1024, train_step.py).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
# (name, arguments of the full run: the commands behind docs/benchmarks.md's tables,
#  arguments of --quick or None = not in the quick set)
STEP = ["--prompts", "2", "--generations", "8", "--max-new-tokens", "32"]
BENCHMARKS = [
    # the roofline and the small-model study first: their tables lead docs/benchmarks.md
    ("roofline", [], ["--quick"]),
    ("study_throughput", ["--methods", "grpo", "ict"], ["--quick"]),
    ("fast_options", ["--repeats", "3"], ["--quick"]),
    ("stats_in_step", ["--heads", "smollm2", "--repeats", "3"], ["--quick"]),
    (
        "stats_in_step",
        ["--heads", "qwen", "--dtypes", "float32", "--length", "16", "--repeats", "2"],
        None,
    ),
    ("rollout", [*STEP, "--repeats", "1"], ["--quick"]),
    ("step_vs_trl", [*STEP, "--warmup", "0", "--steps", "1"], ["--quick"]),
    ("trl_one_forward", ["--layers", "6", "--steps", "4"], ["--quick"]),
    ("scaling", ["--layers", "4", "--parallel"], ["--quick"]),
    ("token_stats", ["--n", "1024", "--repeats", "2", "--dtype", "float32"], None),
    ("train_step", ["--autocast", "off"], None),
]
NAMES = sorted({name for name, _, _ in BENCHMARKS})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", nargs="+", choices=NAMES, default=None)
    parser.add_argument("--json", default=None, help="a directory for one JSON file per benchmark")
    a = parser.parse_args(argv)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if a.json:
        Path(a.json).mkdir(parents=True, exist_ok=True)
    for i, (name, full, quick) in enumerate(BENCHMARKS):
        if (a.only and name not in a.only) or (a.quick and quick is None):
            continue
        args = quick if a.quick else full
        if a.json:
            args = [*args, "--json", str(Path(a.json) / f"{i}-{name}.json")]
        print(f"\n## {name}: python benchmarks/{name}.py {' '.join(args)}", flush=True)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, str(HERE / f"{name}.py"), *args], env=env, check=True)
        print(f"({name}: {time.perf_counter() - t0:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
