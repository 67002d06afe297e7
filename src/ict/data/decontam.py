"""Decontamination: training problems whose text matches an evaluation problem are removed.

Two problems match when their normalised texts are equal (`normalise_problem`: Unicode NFKC,
lower case, LaTeX spacing and delimiters dropped, `\\dfrac`/`\\tfrac` read as `\\frac`, all
whitespace removed, trailing punctuation dropped). A benchmark's training split is checked against
the evaluation split of every registered benchmark of the same source family (`Benchmark.source`:
MATH train against MATH test and MATH-500; GSM8K train against GSM8K test; ...), so MATH-500
problems never reach training through MATH's train split, whatever the copy's row order or ids.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Iterable, Sequence

from ict.data.benchmarks import BENCHMARKS, load_benchmark
from ict.data.items import Item

logger = logging.getLogger("ict.data")

_LATEX_NOISE = re.compile(r"\\left|\\right|\\displaystyle|\\[,;:! ]|\$|\\\(|\\\)|\\\[|\\\]")
_SPACE = re.compile(r"\s+")


def normalise_problem(text: str) -> str:
    """The comparison key of a problem text (see the module docstring)."""
    text = unicodedata.normalize("NFKC", str(text)).lower()
    text = text.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    text = _LATEX_NOISE.sub("", text)
    return _SPACE.sub("", text).rstrip(".?!:;")


def problem_keys(items: Iterable[Item]) -> set[str]:
    """The normalised texts of `items` (their `question`)."""
    return {normalise_problem(item.question) for item in items}


def related_benchmarks(name: str) -> list[str]:
    """The registered benchmarks that share `name`'s source family (including `name`)."""
    family = BENCHMARKS[name].family
    return sorted(b.name for b in BENCHMARKS.values() if b.family == family)


def decontaminate(
    items: Sequence[Item], against: dict[str, Sequence[Item]]
) -> tuple[list[Item], dict[str, int]]:
    """(kept items, {eval benchmark: number of training items removed because they match it}).

    `against`: {benchmark name: its evaluation items}. Order of the kept items is preserved.
    """
    keys = {name: problem_keys(eval_items) for name, eval_items in against.items()}
    removed = dict.fromkeys(against, 0)
    kept = []
    for item in items:
        key = normalise_problem(item.question)
        hits = [name for name, names_keys in keys.items() if key in names_keys]
        for name in hits:
            removed[name] += 1
        if not hits:
            kept.append(item)
    return kept, removed


def decontaminate_benchmark_train(name: str, items: Sequence[Item], *, data_dir=None) -> list[Item]:
    """`items` (the training split of benchmark `name`) minus every problem of a related eval set.

    Loads each related benchmark's evaluation split (local file or hub); a DataError there says
    which file is needed. Logs how many problems each eval set removed.
    """
    against = {
        other: load_benchmark(other, data_dir=data_dir, split=BENCHMARKS[other].split)
        for other in related_benchmarks(name)
    }
    kept, removed = decontaminate(items, against)
    if any(removed.values()):
        logger.info("%s train: removed %s (same problem text as evaluation sets)", name, removed)
    return kept
