"""`load_task(spec, split, seed, size)`: training and evaluation problems from one spec string.

Spec forms (options after `?`, joined by `&`):
    chain_sum, rg:chain_sum?min_terms=2&max_terms=2     reasoning-gym task (+ its config fields)
    gsm8k, math, math500, ..., gpqa                      registered benchmark (ict.data.benchmarks)
    mix:gsm8k@0.5,math@0.5                               weighted mixture (ict.data.mixture)
    hf:openai/gsm8k?config=main&split=train&answer_format=gsm8k     any hub dataset
    data/train.parquet?question=problem&answer=answer    a local JSONL/JSON/Parquet file
    toy:add?max_a=9&max_b=9, toy:cot?digits=4            the toy tasks (ict.data.toy; a task
                                                         family, see TASK_FAMILIES)
Common options: template=<prompt template>. reasoning-gym: seed=, size= (data seed and count).
Hub/file options: question=, answer= (column or dotted path, e.g. reward_model.ground_truth),
answer_format=plain|gsm8k|boxed (how to read the gold answer), verifier=math|exact|choice,
config=, split= (hub only). Benchmarks: template=, decontaminate=false (keep training problems
that also appear in a related evaluation set; the default removes them, ict.data.decontam).

Splits: "train" (training problems), "eval" (held-out problems) and "validation" (for tuning,
disjoint from both). Procedural tasks (reasoning-gym, the toy tasks) generate each split from its
own generator seeds. A dataset (benchmark, hub dataset, file) has a validation split only when the
spec carves one from its training rows: `validation_size=N` takes the last N training rows (after
decontamination) as validation, and its training split then leaves them out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ict.data.benchmarks import BENCHMARKS, as_answer, load_benchmark
from ict.data.categories import TEMPLATE_CATEGORIES, Categorize, generic_categories
from ict.data.decontam import decontaminate_benchmark_train
from ict.data.items import Item
from ict.data.mixture import MIX_PREFIX, load_mixture
from ict.data.prompts import PROMPT_TEMPLATES, render_messages
from ict.data.rg import load_rg_items, rg_task_names
from ict.data.sources import FILE_SUFFIXES, get_field, load_hub_rows, read_rows
from ict.data.specs import parse_spec
from ict.data.toy import load_toy_task, toy_categorizer
from ict.data.unknown import unknown_task_error
from ict.errors import DataError
from ict.rewards.extract import extract_boxed, extract_gsm8k_gold

DEFAULT_TASK = "rg:chain_sum?min_terms=2&max_terms=2&min_digits=1&max_digits=2"
SPLITS = ("train", "validation", "eval")  # the problems a spec yields: see load_task
HELDOUT_SPLIT = "eval"  # never trained on, never tuned on: the split a final result speaks of
DEFAULT_SIZES = {"train": 10_000, "validation": 100, "eval": 100}
QUESTION_COLUMNS = ("question", "problem", "prompt", "query", "input")
ANSWER_COLUMNS = ("answer", "final_answer", "solution", "target", "output")
ANSWER_FORMATS = ("plain", "gsm8k", "boxed")


@dataclass(frozen=True)
class TaskFamily:
    """Task specs whose name starts with one prefix (e.g. "toy:"): `load(name, options, *, split,
    seed, size) -> list[Item]`, and `categorizer(name)`: how its responses' tokens are labelled for
    the report's token-level evidence (ict.data.categories; None: the generic labelling)."""

    load: Callable[..., list[Item]]
    categorizer: Callable[[str], Categorize | None] | None = None


# Task families by name prefix (the toy tasks of ict.data.toy); more with `register_task_family`.
TASK_FAMILIES: dict[str, TaskFamily] = {"toy:": TaskFamily(load_toy_task, toy_categorizer)}


def register_task_family(
    prefix: str,
    load: Callable[..., list[Item]],
    categorizer: Callable[[str], Categorize | None] | None = None,
) -> None:
    """Load every spec whose name starts with `prefix` with `load` (see TaskFamily)."""
    if not prefix:
        raise DataError("a task family needs a non-empty name prefix, e.g. 'toy:'")
    TASK_FAMILIES[prefix] = TaskFamily(load, categorizer)


def task_family(name: str) -> TaskFamily | None:
    """The registered family of a spec name, or None."""
    for prefix, family in TASK_FAMILIES.items():
        if name.startswith(prefix):
            return family
    return None


def task_categorizer(spec: str | None) -> Categorize:
    """How the responses of a task spec are labelled (ict.data.categories): its family's
    labelling, else its prompt template's, else the generic one (also for no spec or a mixture)."""
    if not spec or spec.strip().startswith(MIX_PREFIX):
        return generic_categories
    name, options = parse_spec(spec)
    family = task_family(name)
    own = family.categorizer(name) if family is not None and family.categorizer else None
    return own or TEMPLATE_CATEGORIES.get(str(options.get("template")), generic_categories)


def _pop_template(options: dict) -> str | None:
    template = options.pop("template", None)
    if template is not None and template not in PROMPT_TEMPLATES:
        raise DataError(
            f"unknown template {template!r}; known: {', '.join(sorted(PROMPT_TEMPLATES))}"
        )
    return template


def _gold(value: Any, answer_format: str) -> str:
    if answer_format == "gsm8k":
        return extract_gsm8k_gold(str(value))
    if answer_format == "boxed":
        boxed = extract_boxed(str(value))
        if boxed is None:
            raise ValueError(f"no \\boxed{{}} answer in {str(value)[-80:]!r}")
        return boxed
    return as_answer(value)


def rows_to_items_mapped(rows: list[dict], name: str, options: dict[str, Any]) -> list[Item]:
    """Items from generic rows with a column mapping (see the module docstring for options)."""
    options = dict(options)
    template = _pop_template(options) or "boxed"
    answer_format = options.pop("answer_format", "plain")
    verifier = options.pop("verifier", "math")
    if answer_format not in ANSWER_FORMATS:
        raise DataError(f"answer_format must be one of {ANSWER_FORMATS}, got {answer_format!r}")
    if not rows:
        raise DataError(f"{name}: no rows")
    q_col = options.pop("question", None) or next(
        (c for c in QUESTION_COLUMNS if c in rows[0]), None
    )
    a_col = options.pop("answer", None) or next((c for c in ANSWER_COLUMNS if c in rows[0]), None)
    if q_col is None or a_col is None:
        raise DataError(
            f"{name}: cannot tell the question/answer columns among {sorted(rows[0])}; "
            "name them: ?question=<column>&answer=<column or dotted.path>"
        )
    items = []
    for index, row in enumerate(rows):
        try:
            question = get_field(row, q_col)
            if isinstance(question, list):  # chat messages: the last user turn
                question = [m for m in question if m.get("role") == "user"][-1]["content"]
            answer = _gold(get_field(row, a_col), answer_format)
        except (KeyError, IndexError, ValueError, TypeError) as err:
            raise DataError(
                f"{name}: row {index}: cannot read question {q_col!r} / answer {a_col!r} "
                f"({type(err).__name__}: {err}); columns: {sorted(row)}"
            ) from err
        items.append(
            Item(
                id=f"{name}/{index}",
                task=name,
                question=str(question),
                answer=answer,
                messages=render_messages(template, str(question)),
                verifier=verifier,
            )
        )
    return items


def _carve(rows: list, split: str, options: dict, name: str) -> list:
    """The `split` ("train" or "validation") of a dataset's training rows: with the spec's
    `validation_size=N`, the last N rows are validation and the rest train; without it all rows
    are train and asking for validation is a DataError naming the option."""
    size = options.pop("validation_size", None)
    if size is None:
        if split == "validation":
            raise DataError(
                f"{name} has no validation split: add validation_size=N to its spec (the last N "
                "training rows become validation, and training leaves them out)"
            )
        return rows
    size = int(size)
    if not 0 < size < len(rows):
        raise DataError(f"{name}: validation_size={size} must be in 1..{len(rows) - 1}")
    return rows[-size:] if split == "validation" else rows[:-size]


def load_task(
    spec: str,
    split: str = "train",
    seed: int = 0,
    size: int | None = None,
    *,
    data_dir=None,
) -> list[Item]:
    """Problems for training (split="train"), tuning ("validation") or held-out evaluation
    ("eval"); see the module docstring.

    Args:
        spec: see the module docstring.
        seed: data seed for reasoning-gym tasks (the splits' generator seeds are disjoint).
        size: number of items (reasoning-gym default: 10000 train / 100 validation / 100 eval;
            files and hub datasets: all rows, or the first `size`).
        data_dir: directory with local benchmark files (else $ICT_DATA_DIR).
    """
    if split not in SPLITS:
        raise DataError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    if spec.strip().startswith(MIX_PREFIX):
        return load_mixture(spec, load_task, split, seed, size, data_dir=data_dir)
    name, options = parse_spec(spec)
    family = task_family(name)
    if family is not None:
        return family.load(name, options, split=split, seed=seed, size=size)
    if name.startswith("rg:") or (name not in BENCHMARKS and name in rg_task_names()):
        task = name.removeprefix("rg:")
        template = _pop_template(options)
        seed = int(options.pop("seed", seed))
        size = int(options.pop("size", size or DEFAULT_SIZES[split]))
        return load_rg_items(task, options, split=split, seed=seed, size=size, template=template)
    if name in BENCHMARKS:
        template = _pop_template(options)
        clean = bool(options.pop("decontaminate", True))
        validation = (
            {"validation_size": options.pop("validation_size")}
            if "validation_size" in options
            else {}
        )
        if options:
            raise DataError(
                f"{name}: unknown options {sorted(options)} (template=, decontaminate= and "
                "validation_size= apply)"
            )
        bench = BENCHMARKS[name]
        if split != "eval" and bench.train_split is None:
            raise DataError(
                f"{name} has no training split (it is an evaluation set: {bench.hub_id} {bench.split}); "
                "train on another source, e.g. hf:<id>?split=train or a local file"
            )
        if split == "eval":
            return load_benchmark(
                name, data_dir=data_dir, limit=size, split=bench.split, template=template
            )
        items = load_benchmark(name, data_dir=data_dir, split=bench.train_split, template=template)
        if clean:
            items = decontaminate_benchmark_train(name, items, data_dir=data_dir)
        items = _carve(items, split, validation, name)
        return items[:size] if size else items
    if name.startswith("hf:"):
        hub_id = name.removeprefix("hf:")
        config = options.pop("config", None)
        hub_split = options.pop("split", "test" if split == "eval" else "train")
        rows = load_hub_rows(
            hub_id,
            config,
            hub_split,
            hint="Download it where the hub is reachable and pass a local file path as the spec.",
        )
        if split != "eval":
            rows = _carve(rows, split, options, name)
        return rows_to_items_mapped(rows[:size] if size else rows, name, options)
    if name.endswith(FILE_SUFFIXES):
        rows = read_rows(name)
        if split != "eval":
            rows = _carve(rows, split, options, name)
        else:
            options.pop("validation_size", None)
        return rows_to_items_mapped(rows[:size] if size else rows, name, options)
    raise unknown_task_error(name, BENCHMARKS)
