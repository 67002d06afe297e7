"""Tasks and benchmarks: reasoning-gym (seeded, disjoint train/eval seeds), the eval benchmark
registry (gsm8k, math, math500, mmlu_stem, gpqa, aime23/24/25, amc23, olympiadbench, minerva,
commonsenseqa), hub datasets, local JSONL/Parquet/CSV files, weighted mixtures and registered task
families (the toy tasks `toy:add`, `toy:cot`), all as `Item`s
that carry their prompt and how to score them; training splits are decontaminated by content."""

from ict.data.benchmarks import (
    BENCHMARKS,
    PAPER_BENCHMARKS,
    Benchmark,
    get_benchmark,
    load_benchmark,
)
from ict.data.decontam import decontaminate, normalise_problem
from ict.data.items import Item
from ict.data.mixture import load_mixture, parse_mixture, split_specs
from ict.data.prompts import PROMPT_TEMPLATES, render_messages
from ict.data.rg import EVAL_SEED_OFFSET, load_rg_items, rg_task_names
from ict.data.sources import find_local_file, read_rows
from ict.data.tasks import (
    DEFAULT_TASK,
    SPLITS,
    TASK_FAMILIES,
    file_stem,
    load_task,
    parse_spec,
    register_task_family,
    task_label,
)

__all__ = [
    "BENCHMARKS",
    "DEFAULT_TASK",
    "EVAL_SEED_OFFSET",
    "PAPER_BENCHMARKS",
    "PROMPT_TEMPLATES",
    "SPLITS",
    "TASK_FAMILIES",
    "Benchmark",
    "Item",
    "decontaminate",
    "file_stem",
    "find_local_file",
    "get_benchmark",
    "load_benchmark",
    "load_mixture",
    "load_rg_items",
    "load_task",
    "normalise_problem",
    "parse_mixture",
    "parse_spec",
    "read_rows",
    "register_task_family",
    "render_messages",
    "rg_task_names",
    "split_specs",
    "task_label",
]
