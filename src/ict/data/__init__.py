"""Tasks and benchmarks: reasoning-gym (seeded, disjoint train/eval seeds), the eval benchmark
registry (gsm8k, math, math500, mmlu_stem, gpqa, aime23/24/25, amc23, olympiadbench, minerva,
commonsenseqa), hub datasets, local JSONL/Parquet/CSV files, weighted mixtures and registered task
families (the toy tasks `toy:add`, `toy:cot`, ict.data.toy), all as `Item`s that carry their
prompt and how to reward them, in train / validation / eval splits; training splits are
decontaminated by content. A task also says how its responses' tokens are labelled
(`task_categorizer`)."""

from ict.data.benchmarks import (
    BENCHMARKS,
    PAPER_BENCHMARKS,
    Benchmark,
    get_benchmark,
    load_benchmark,
)
from ict.data.categories import Categorize, generic_categories
from ict.data.decontam import decontaminate, normalise_problem
from ict.data.items import Item, RuleItem
from ict.data.mixture import load_mixture, parse_mixture, split_specs
from ict.data.prompts import PROMPT_TEMPLATES, render_messages
from ict.data.rg import EVAL_SEED_OFFSET, load_rg_items, rg_task_names
from ict.data.sources import find_local_file, read_rows
from ict.data.specs import file_stem, parse_spec, short_labels, task_label
from ict.data.tasks import (
    DEFAULT_TASK,
    HELDOUT_SPLIT,
    SPLITS,
    TASK_FAMILIES,
    TaskFamily,
    load_task,
    register_task_family,
    task_categorizer,
)

__all__ = [
    "BENCHMARKS",
    "DEFAULT_TASK",
    "EVAL_SEED_OFFSET",
    "HELDOUT_SPLIT",
    "PAPER_BENCHMARKS",
    "PROMPT_TEMPLATES",
    "SPLITS",
    "TASK_FAMILIES",
    "TaskFamily",
    "Benchmark",
    "Categorize",
    "Item",
    "RuleItem",
    "decontaminate",
    "file_stem",
    "find_local_file",
    "generic_categories",
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
    "task_categorizer",
    "short_labels",
    "task_label",
]
