"""Export a task spec (a mixture, decontaminated) as verl-format Parquet, so that a verl run
trains on exactly the problems `ict train` would.

    python -m ict.data.export 'mix:gsm8k@0.5,math@0.5' ~/data/ict/paper/train.parquet \
        --size 14000 --seed 0 --data-dir data/

Columns (verl 0.9.1's RL dataset): data_source (the name verl's default reward function scores
with: openai/gsm8k, DigitalLearningGmbH/MATH-lighteval, or the benchmark name), prompt (the chat
messages of the item's template), ability ("math"), reward_model {"style": "rule",
"ground_truth"}, extra_info {"index", "id", "task", "split"}. Files are written atomically.
"""

from __future__ import annotations

import argparse
import os

from ict.data.items import Item
from ict.data.tasks import load_task
from ict.files import write_atomic

VERL_SOURCES = {"gsm8k": "openai/gsm8k", "math": "DigitalLearningGmbH/MATH-lighteval"}


def verl_row(item: Item, index: int, split: str) -> dict:
    """One verl RL-dataset row for `item`."""
    return {
        "data_source": VERL_SOURCES.get(item.task, item.task),
        "prompt": [dict(m) for m in item.messages],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": str(item.answer)},
        "extra_info": {"index": index, "id": item.id, "task": item.task, "split": split},
    }


def export_verl_parquet(
    spec: str,
    path: str | os.PathLike,
    *,
    split: str = "train",
    seed: int = 0,
    size: int | None = None,
    data_dir=None,
) -> int:
    """Write the items of `spec` (ict.data.load_task) to `path` as verl Parquet; returns the count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    items = load_task(spec, split, seed, size, data_dir=data_dir)
    table = pa.Table.from_pylist([verl_row(item, i, split) for i, item in enumerate(items)])
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    write_atomic(path, sink.getvalue().to_pybytes())
    return len(items)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec", help="task spec, e.g. 'mix:gsm8k@0.5,math@0.5'")
    ap.add_argument("out", help="output .parquet path")
    ap.add_argument("--split", default="train", choices=["train", "eval"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--size", type=int, default=None)
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args(argv)
    count = export_verl_parquet(
        args.spec,
        args.out,
        split=args.split,
        seed=args.seed,
        size=args.size,
        data_dir=args.data_dir,
    )
    print(f"wrote {count} rows to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
