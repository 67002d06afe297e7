"""Write verl-format parquet files (data_source, prompt, ability, reward_model, extra_info).

    python examples/verl/prepare_data.py --dataset math  --out ~/data/ict/math
    python examples/verl/prepare_data.py --dataset gsm8k --out ~/data/ict/gsm8k

Needs network access to the Hugging Face Hub (run it on the training machine). The data_source
values are the ones verl 0.9.1's default reward function scores with its own math/gsm8k checkers.
"""

import argparse
import os

import datasets

INSTRUCTION = "Let's think step by step and output the final answer within \\boxed{}."
SOURCES = {
    # name: (hub id, config, question field, answer function, verl data_source)
    "math": (
        "DigitalLearningGmbH/MATH-lighteval",
        None,
        "problem",
        None,
        "DigitalLearningGmbH/MATH-lighteval",
    ),
    "gsm8k": ("openai/gsm8k", "main", "question", None, "openai/gsm8k"),
}


def _boxed(solution: str) -> str:
    """The last \\boxed{...} of a MATH solution (nested braces allowed)."""
    start = solution.rfind("\\boxed{")
    if start < 0:
        return solution.strip()
    i, depth = start + len("\\boxed{"), 1
    for j in range(i, len(solution)):
        depth += {"{": 1, "}": -1}.get(solution[j], 0)
        if depth == 0:
            return solution[i:j]
    return solution[i:]


def answer(name: str, row: dict) -> str:
    if name == "gsm8k":
        return row["answer"].split("####")[-1].strip().replace(",", "")
    return _boxed(row["solution"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=sorted(SOURCES), default="math")
    parser.add_argument("--out", default=os.path.expanduser("~/data/ict/math"))
    args = parser.parse_args()
    hub_id, config, field, _, source = SOURCES[args.dataset]
    raw = datasets.load_dataset(hub_id, config)
    os.makedirs(args.out, exist_ok=True)
    for split in ("train", "test"):

        def convert(row, index, split=split):
            return {
                "data_source": source,
                "prompt": [{"role": "user", "content": f"{row[field]} {INSTRUCTION}"}],
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": answer(args.dataset, row)},
                "extra_info": {"split": split, "index": index},
            }

        ds = raw[split].map(convert, with_indices=True, remove_columns=raw[split].column_names)
        ds.to_parquet(os.path.join(args.out, f"{split}.parquet"))
        print(f"{split}: {len(ds)} rows -> {args.out}/{split}.parquet")


if __name__ == "__main__":
    main()
