"""The evaluation benchmark registry: where each benchmark lives and how to read, prompt and judge it.

Adding a benchmark is one `Benchmark(...)` entry in `BENCHMARKS`. Rows come from a local file
`DIR/<name>.jsonl|.parquet|.json` (`--data-dir DIR` or env ICT_DATA_DIR) in the dataset's own
column format, or from the hub (`hub_id`, `config`, `split`) when reachable.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ict.data.choice import (
    GPQA_COLUMNS,
    gpqa_shuffled,
    is_mmlu_stem,
    mmlu_answer,
    mmlu_options,
)
from ict.data.items import Item
from ict.data.prompts import render_messages
from ict.data.sources import find_local_file, load_hub_rows, read_rows
from ict.data.unknown import unknown_task_error
from ict.errors import DataError
from ict.rewards.extract import extract_boxed, extract_gsm8k_gold
from ict.rewards.options import OPTIONS_KEY, VerifyOptions

# The seven benchmarks of the paper (arXiv 2606.19771), in its table's order.
PAPER_BENCHMARKS = ("math500", "gsm8k", "mmlu_stem", "gpqa", "aime23", "aime24", "aime25")


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


def math_answer(row: dict) -> str:
    """MATH gold: the `answer` column when present, else the last \\boxed{} of `solution`."""
    if row.get("answer") not in (None, ""):
        return as_answer(row["answer"])
    boxed = extract_boxed(str(row["solution"]))
    if boxed is None:
        raise ValueError("no \\boxed{} answer in the solution")
    return boxed


def from_year(year: int) -> Callable[[dict], bool]:
    """Row filter for multi-year AIME sets: the `year` column, else the year in the `url` column
    (AoPS wiki links such as .../2023_AIME_I_Problems/Problem_1); rows with neither are kept."""

    def keep(row: dict) -> bool:
        if row.get("year") not in (None, ""):
            return int(row["year"]) == year
        if row.get("url"):
            return f"/{year}_AIME" in str(row["url"])
        return True

    return keep


def gpqa_question(row: dict) -> str:
    return str(row["Question"])


def gpqa_answer(row: dict) -> str:
    return gpqa_shuffled(row)["answer"]


def gpqa_options(row: dict) -> list[str]:
    return gpqa_shuffled(row)["options"]


def gpqa_metadata(row: dict) -> dict:
    shuffled = gpqa_shuffled(row)
    return {"options_seed": shuffled["options_seed"], "options_order": shuffled["options_order"]}


@dataclass(frozen=True)
class Benchmark:
    """One evaluation benchmark.

    question / answer: row -> question text / gold answer string.
    options: row -> answer options (multiple choice), or None.
    template: prompt template name (ict.data.prompts); verifier: ict.rewards verifier name.
    verifier_options: math-verify settings for every item (`ict.rewards.VerifyOptions`; None:
        the verifier's defaults), stored as `item.metadata["verifier_options"]`.
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
    keep: Callable[[dict], bool] | None = None  # row filter (subjects, years), before `limit`
    source: str = ""  # problem family for decontamination ("" = the name); see ict.data.decontam
    metadata: Callable[[dict], dict] | None = None  # extra fields to record with each item
    note: str = ""  # for the docs and the missing-file message (gated copies, filters)
    alternatives: tuple[str, ...] = ()  # other hub copies with the same columns
    verifier_options: VerifyOptions | None = None

    @property
    def family(self) -> str:
        return self.source or self.name

    def where(self, data_dir=None) -> str:
        """Where a local copy is looked for, for error messages."""
        directory = data_dir or os.environ.get("ICT_DATA_DIR") or "DIR"
        return (
            f"Put the rows in {directory}/{self.name}.jsonl (or .parquet) with columns "
            f"{self.columns} and pass --data-dir {directory} (or set ICT_DATA_DIR); source: "
            f"hub dataset {self.hub_id}"
            + (f" config {self.config}" if self.config else "")
            + f" split {self.split}."
            + (f" {self.note}" if self.note else "")
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
        Benchmark(
            name="math",
            hub_id="DigitalLearningGmbH/MATH-lighteval",
            config=None,
            split="test",
            question=first_column("problem"),
            answer=math_answer,
            columns="problem, solution (ending in \\boxed{answer}) or answer",
            train_split="train",
            source="math",
            note="Hendrycks MATH (12,500 problems, 7,500 train); the training source of the paper.",
        ),
        _math(
            "math500",
            "HuggingFaceH4/MATH-500",
            None,
            "test",
            ["problem"],
            ["answer"],
            source="math",
        ),
        Benchmark(
            name="mmlu_stem",
            hub_id="cais/mmlu",
            config="all",
            split="test",
            question=first_column("question"),
            answer=mmlu_answer,
            options=mmlu_options,
            columns="question, subject, choices (list of 4), answer (index 0-3)",
            template="choice",
            verifier="choice",
            keep=is_mmlu_stem,
            source="mmlu",
            note="Rows are kept when `subject` is one of the 18 STEM subjects "
            "(ict.data.choice.MMLU_STEM_SUBJECTS); a file with all 57 subjects is fine.",
        ),
        Benchmark(
            name="gpqa",
            hub_id="Idavidrein/gpqa",
            config="gpqa_diamond",
            split="train",
            question=gpqa_question,
            answer=gpqa_answer,
            options=gpqa_options,
            columns=", ".join(repr(c) for c in GPQA_COLUMNS),
            template="choice",
            verifier="choice",
            metadata=gpqa_metadata,
            note="The hub copy is gated: accept its terms on huggingface.co and log in "
            "(huggingface-cli login), or save gpqa_diamond.csv from the GPQA release as "
            "DIR/gpqa.csv (same columns).",
        ),
        _math(
            "aime23",
            "AI-MO/aimo-validation-aime",
            None,
            "train",
            ["problem", "question"],
            ["answer"],
            keep=from_year(2023),
            source="aime",
            note="That set holds AIME 2022-2024; rows are kept by `year` or by '/2023_AIME' in `url`.",
        ),
        _math(
            "aime24",
            "HuggingFaceH4/aime_2024",
            None,
            "train",
            ["problem"],
            ["answer"],
            source="aime",
        ),
        _math(
            "aime25",
            "math-ai/aime25",
            None,
            "test",
            ["problem", "question"],
            ["answer"],
            source="aime",
            alternatives=(
                "opencompass/AIME2025 (configs AIME2025-I, AIME2025-II; question, answer)",
            ),
        ),
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
    """The registered benchmark `name`; DataError listing close names when unknown."""
    if name not in BENCHMARKS:
        raise unknown_task_error(name, BENCHMARKS)
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
            extra = bench.metadata(row) if bench.metadata else {}
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
        metadata.update(extra)
        if options is not None:
            metadata["options"] = options
        if bench.verifier_options is not None:
            metadata[OPTIONS_KEY] = bench.verifier_options.to_dict()
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


def keep_rows(bench: Benchmark, rows: list[dict]) -> list[dict]:
    """The rows passing the benchmark's filter; DataError naming the column the filter needs."""
    try:
        return [row for row in rows if bench.keep(row)]
    except (KeyError, TypeError, ValueError) as err:
        raise DataError(
            f"{bench.name}: cannot filter the rows ({type(err).__name__}: {err}); "
            f"expected columns: {bench.columns}"
        ) from err


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
    if bench.keep is not None:
        rows = keep_rows(bench, rows)
    if limit is not None:
        rows = rows[:limit]
    if not rows:
        raise DataError(f"{name}: no rows found. {bench.where(data_dir)}")
    return rows_to_items(bench, rows, template=template)
