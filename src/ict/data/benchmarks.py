"""The evaluation benchmark registry: where each benchmark lives and how to read, prompt and score it.

Adding a benchmark is one `Benchmark(...)` entry in `BENCHMARKS`. Rows come from a local file
`DIR/<name>.jsonl|.parquet|.json` (`--data-dir DIR` or env ICT_DATA_DIR) in the dataset's own
column format, or from the hub (`hub_id`, `config`, `split`) when reachable.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ict.data.items import Item
from ict.data.prompts import render_messages
from ict.data.sources import find_local_file, load_hub_rows, read_rows
from ict.errors import DataError
from ict.rewards.extract import extract_gsm8k_gold


def first_column(*names: str) -> Callable[[dict], Any]:
    """A reader returning the first of `names` present in the row (KeyError naming all if none)."""

    def read(row: dict) -> Any:
        for name in names:
            if name in row and row[name] is not None:
                return row[name]
        raise KeyError(" or ".join(names))

    read.columns = names  # type: ignore[attr-defined]
    return read


def as_answer(value: Any) -> str:
    """A gold value as a string: 27.0 -> "27", ["$\\frac12$"] -> "\\frac12", "$x$" -> "x"."""
    if isinstance(value, (list, tuple)):
        value = ", ".join(as_answer(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = str(value).strip()
    if len(text) >= 2 and text.startswith("$") and text.endswith("$"):
        text = text.strip("$").strip()
    return text


def gsm8k_answer(row: dict) -> str:
    return extract_gsm8k_gold(row["answer"])


def csqa_options(row: dict) -> list[str]:
    return list(row["choices"]["text"])


@dataclass(frozen=True)
class Benchmark:
    """One evaluation benchmark.

    question / answer: row -> question text / gold answer string.
    options: row -> answer options (multiple choice), or None.
    template: prompt template name (ict.data.prompts); verifier: ict.rewards verifier name.
    columns: the source columns used, for the docs and error messages.
    """

    name: str
    hub_id: str
    config: str | None
    split: str
    question: Callable[[dict], str]
    answer: Callable[[dict], str]
    columns: str
    template: str = "boxed"
    verifier: str = "math"
    options: Callable[[dict], list[str]] | None = None
    train_split: str | None = None  # a split usable for training, if the source has one

    def where(self, data_dir=None) -> str:
        """Where a local copy is looked for, for error messages."""
        directory = data_dir or os.environ.get("ICT_DATA_DIR") or "DIR"
        return (
            f"Put the rows in {directory}/{self.name}.jsonl (or .parquet) with columns "
            f"{self.columns} and pass --data-dir {directory} (or set ICT_DATA_DIR); source: "
            f"hub dataset {self.hub_id}"
            + (f" config {self.config}" if self.config else "")
            + f" split {self.split}."
        )


def _math(name, hub_id, config, split, question_cols, answer_cols, **kw) -> Benchmark:
    return Benchmark(
        name=name,
        hub_id=hub_id,
        config=config,
        split=split,
        question=first_column(*question_cols),
        answer=lambda row, cols=answer_cols: as_answer(first_column(*cols)(row)),
        columns=f"{'/'.join(question_cols)} (question), {'/'.join(answer_cols)} (answer)",
        **kw,
    )


BENCHMARKS: dict[str, Benchmark] = {
    b.name: b
    for b in [
        Benchmark(
            name="gsm8k",
            hub_id="openai/gsm8k",
            config="main",
            split="test",
            question=first_column("question"),
            answer=gsm8k_answer,
            columns="question, answer (solution ending in '#### <number>')",
            train_split="train",
        ),
        _math("math500", "HuggingFaceH4/MATH-500", None, "test", ["problem"], ["answer"]),
        _math("aime24", "HuggingFaceH4/aime_2024", None, "train", ["problem"], ["answer"]),
        _math("amc23", "math-ai/amc23", None, "test", ["question", "problem"], ["answer"]),
        _math(
            "olympiadbench",
            "math-ai/olympiadbench",
            None,
            "test",
            ["question", "problem"],
            ["final_answer", "answer"],
        ),
        _math("minerva", "math-ai/minervamath", None, "test", ["question", "problem"], ["answer"]),
        Benchmark(
            name="commonsenseqa",
            hub_id="tau/commonsense_qa",
            config=None,
            split="validation",
            question=first_column("question"),
            answer=lambda row: str(row["answerKey"]).strip().upper(),
            options=csqa_options,
            columns="question, choices {label: [...], text: [...]}, answerKey",
            template="choice",
            verifier="choice",
            train_split="train",
        ),
    ]
}


def get_benchmark(name: str) -> Benchmark:
    if name not in BENCHMARKS:
        from ict.data.tasks import unknown_task_error

        raise unknown_task_error(name)
    return BENCHMARKS[name]


def benchmark_rows(bench: Benchmark, *, split: str | None = None, data_dir=None) -> list[dict]:
    """Rows from the local file if present, else from the hub; DataError saying where to put them."""
    path = find_local_file(
        bench.name if split in (None, bench.split) else f"{bench.name}_{split}", data_dir
    )
    if path is not None:
        return read_rows(path)
    return load_hub_rows(
        bench.hub_id, bench.config, split or bench.split, hint=bench.where(data_dir)
    )


def rows_to_items(bench: Benchmark, rows: list[dict], *, template: str | None = None) -> list[Item]:
    """Turn source rows into Items; a row missing a needed column raises a DataError naming it."""
    items = []
    for index, row in enumerate(rows):
        try:
            question = str(bench.question(row)).strip()
            answer = bench.answer(row)
            options = bench.options(row) if bench.options else None
        except (KeyError, TypeError, ValueError, IndexError) as err:
            raise DataError(
                f"{bench.name}: row {index} lacks what is needed ({type(err).__name__}: {err}); "
                f"expected columns: {bench.columns}"
            ) from err
        metadata = {
            k: v
            for k, v in row.items()
            if isinstance(v, (str, int, float, bool)) and k not in ("question", "problem")
        }
        if options is not None:
            metadata["options"] = options
        items.append(
            Item(
                id=f"{bench.name}/{index}",
                task=bench.name,
                question=question,
                answer=answer,
                messages=render_messages(template or bench.template, question, options),
                verifier=bench.verifier,
                metadata=metadata,
            )
        )
    return items


def load_benchmark(
    name: str,
    *,
    data_dir=None,
    limit: int | None = None,
    split: str | None = None,
    template: str | None = None,
) -> list[Item]:
    """The items of a registered benchmark (first `limit` rows when given)."""
    bench = get_benchmark(name)
    rows = benchmark_rows(bench, split=split, data_dir=data_dir)
    if limit is not None:
        rows = rows[:limit]
    if not rows:
        raise DataError(f"{name}: no rows found. {bench.where(data_dir)}")
    return rows_to_items(bench, rows, template=template)
