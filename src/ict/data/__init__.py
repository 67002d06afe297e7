"""Tasks and benchmarks: reasoning-gym (seeded, disjoint train/eval seeds), the eval benchmark
registry (gsm8k, math500, aime24, amc23, olympiadbench, minerva, commonsenseqa), hub datasets and
local JSONL/Parquet files, all as `Item`s that carry their prompt and how to score them."""

from ict.data.benchmarks import BENCHMARKS, Benchmark, get_benchmark, load_benchmark
from ict.data.items import Item
from ict.data.prompts import PROMPT_TEMPLATES, render_messages
from ict.data.rg import EVAL_SEED_OFFSET, load_rg_items, rg_task_names
from ict.data.sources import find_local_file, read_rows
from ict.data.tasks import DEFAULT_TASK, file_stem, load_task, parse_spec, task_label

__all__ = [
    "BENCHMARKS",
    "DEFAULT_TASK",
    "EVAL_SEED_OFFSET",
    "PROMPT_TEMPLATES",
    "Benchmark",
    "Item",
    "file_stem",
    "find_local_file",
    "get_benchmark",
    "load_benchmark",
    "load_rg_items",
    "load_task",
    "parse_spec",
    "read_rows",
    "render_messages",
    "rg_task_names",
    "task_label",
]
