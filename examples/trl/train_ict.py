"""Token-selective GRPO (ICT) with TRL: a complete, runnable script.

Quick offline check (tiny random model, synthetic arithmetic, CPU, seconds):
    python examples/trl/train_ict.py --quick
The same on ict's embedded SmolLM2-135M-Instruct (no hub: `--model smollm2-135m-instruct` is the
model `ict.models.load_model_and_tokenizer()` returns, an ordinary transformers model):
    python examples/trl/train_ict.py --quick --model smollm2-135m-instruct

Real run (Qwen2.5, GSM8K), one GPU or many (see docs/engines/trl.md):
    accelerate launch --config_file examples/trl/configs/ddp.yaml examples/trl/train_ict.py \
        --model Qwen/Qwen2.5-1.5B-Instruct --method ict --output-dir runs/trl-ict
    accelerate launch --config_file examples/trl/configs/deepspeed_zero3.yaml examples/trl/train_ict.py \
        --model Qwen/Qwen2.5-7B-Instruct --use-vllm --vllm-mode colocate

Compared with a plain TRL script, the only change is the import line below (and
`precision_kwargs`, which sets TRL's bf16/fp16 from the hardware: TRL defaults to bf16 even on a
CPU without native bf16, where its matmuls are ~50x slower than float32).
"""

from __future__ import annotations

import argparse
import random
import re
from pathlib import Path

from ict.integrations.trl import ICTGRPOConfig as GRPOConfig
from ict.integrations.trl import ICTGRPOTrainer as GRPOTrainer
from ict.models import EMBEDDED_DEFAULT, load_model_and_tokenizer

SYSTEM = "Solve the problem. Put the final number after 'Answer:'."
DEFAULT_MODEL = "Qwen/Qwen2.5-1.5B-Instruct"


def last_number(text: str) -> str | None:
    """The last number in `text` (commas removed), or None."""
    found = re.findall(r"-?\d[\d,]*\.?\d*", text)
    return found[-1].replace(",", "").rstrip(".") if found else None


def correctness_reward(completions, answer, **kwargs) -> list[float]:
    """1.0 when the last number of the completion equals the reference answer, else 0.0."""
    texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
    return [float(last_number(t) == str(a)) for t, a in zip(texts, answer, strict=True)]


def synthetic_dataset(n: int, seed: int = 0):
    """Offline arithmetic prompts of one fixed length (`a+b=` with one-digit operands)."""
    from datasets import Dataset

    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        a, b = rng.randint(0, 9), rng.randint(0, 9)
        rows.append({"prompt": f"{a}+{b}=", "answer": str(a + b)})
    return Dataset.from_list(rows)


def gsm8k_dataset(split: str = "train"):
    """GSM8K as conversational prompts with a numeric `answer` column."""
    from datasets import load_dataset

    def convert(row):
        return {
            "prompt": [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": row["question"]},
            ],
            "answer": row["answer"].split("####")[-1].strip().replace(",", ""),
        }

    return load_dataset("openai/gsm8k", "main", split=split).map(
        convert, remove_columns=["question"]
    )


def precision_kwargs(requested: str, device: str) -> dict:
    """TRL's `bf16`/`fp16` flags from `ict.precision.choose_precision` (printed with its reason)."""
    from ict.precision import choose_precision

    choice = choose_precision(requested, device)
    print(choice.describe())
    return {"bf16": choice.name == "bf16", "fp16": choice.name == "fp16"}


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--quick", action="store_true", help="tiny offline model and data, CPU, a few steps"
    )
    p.add_argument(
        "--model",
        default=None,
        help=f"hub id or local model / ict run directory (default {DEFAULT_MODEL}; with --quick a "
        f"tiny random model); {EMBEDDED_DEFAULT} = ict's embedded SmolLM2, no download",
    )
    from ict.loss.options import LOSS_MODES
    from ict.methods import available_methods

    p.add_argument(
        "--method",
        default="ict",
        help=f"one of {', '.join(available_methods())} (ict.methods.METHODS; ict is the paper's), a "
        "selector, or a composition such as ict+stapo",
    )
    p.add_argument(
        "--loss-mode", default=None, help=f"{' | '.join(LOSS_MODES)} (default: the method's)"
    )
    p.add_argument(
        "--entropy-coef", type=float, default=None, help="entropy bonus (default: the method's)"
    )
    p.add_argument(
        "--ratio", type=float, default=None, help="fraction of tokens kept (default per method)"
    )
    p.add_argument("--reference", default=None, help="default: the method's (ict: group_position)")
    p.add_argument(
        "--dense-warmup-steps", type=int, default=None,
        help="optimizer steps updating every valid token first (default: the method's, ict 10)",
    )  # fmt: skip
    p.add_argument("--output-dir", default="runs/trl-ict")
    p.add_argument("--max-steps", type=int, default=500)
    p.add_argument("--num-generations", type=int, default=16)
    p.add_argument(
        "--per-device-batch", type=int, default=16, help="completions per device per micro-batch"
    )
    p.add_argument("--grad-accum", type=int, default=4)
    p.add_argument("--max-completion-length", type=int, default=1024)
    p.add_argument("--lr", type=float, default=1e-6)
    p.add_argument("--use-vllm", action="store_true")
    p.add_argument("--vllm-mode", default="colocate", choices=["colocate", "server"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--autocast", default="auto", choices=["auto", "bf16", "fp16", "off"],
        help="mixed precision: auto = bf16 only where the hardware has native bf16, else float32",
    )  # fmt: skip
    a = p.parse_args(argv)

    common = dict(
        method=a.method, ratio=a.ratio, reference=a.reference, loss_mode=a.loss_mode,
        entropy_coef=a.entropy_coef,
        # the loss aggregation is the method's (ict: Sparse-GRPO); clip 0.2 / 0.28, no KL, T = 1
        epsilon=0.2, epsilon_high=0.28, beta=0.0, temperature=1.0,
        output_dir=a.output_dir, seed=a.seed, logging_steps=1, report_to=[],
    )  # fmt: skip
    if a.quick:
        from ict.testing import tiny_model_and_tokenizer

        if a.model is None:
            model, tokenizer = tiny_model_and_tokenizer(seed=a.seed)
        else:  # the embedded SmolLM2, a local directory or a hub id, loaded by ict.models
            model, tokenizer = load_model_and_tokenizer(a.model)
        dataset = synthetic_dataset(64, a.seed)
        args = GRPOConfig(
            **common, **precision_kwargs(a.autocast, "cpu"),
            dense_warmup_steps=1 if a.dense_warmup_steps is None else a.dense_warmup_steps,
            max_steps=min(a.max_steps, 3), per_device_train_batch_size=8, num_generations=4,
            max_completion_length=8, learning_rate=1e-3, use_cpu=True, save_strategy="no",
        )  # fmt: skip
    else:
        import torch

        model, tokenizer, dataset = a.model or DEFAULT_MODEL, None, gsm8k_dataset()
        precision = precision_kwargs(a.autocast, "cuda" if torch.cuda.is_available() else "cpu")
        dtype = "bfloat16" if precision["bf16"] else "float32"  # fp16 AMP needs float32 weights
        if model.lower() == EMBEDDED_DEFAULT:  # ict's embedded SmolLM2: a model object, no hub
            model, tokenizer = load_model_and_tokenizer(None, dtype=getattr(torch, dtype))
        args = GRPOConfig(
            **common, dense_warmup_steps=a.dense_warmup_steps, max_steps=a.max_steps, per_device_train_batch_size=a.per_device_batch,
            gradient_accumulation_steps=a.grad_accum, num_generations=a.num_generations,
            max_completion_length=a.max_completion_length, learning_rate=a.lr, **precision,
            use_vllm=a.use_vllm, vllm_mode=a.vllm_mode, gradient_checkpointing=True,
            save_steps=100, model_init_kwargs={"dtype": dtype},
        )  # fmt: skip
    trainer = GRPOTrainer(
        model=model, reward_funcs=correctness_reward, args=args, train_dataset=dataset,
        processing_class=tokenizer,
    )  # fmt: skip
    trainer.train()
    report(trainer)
    return trainer


SHOWN = (
    "reward",
    "reward_std",
    "selected_fraction",
    "dense_warmup",
    "valid/entropy",
    "selected/js",
)


def report(trainer) -> Path | None:
    """Write every logged step's metrics to OUTPUT_DIR/metrics.jsonl (one JSON line per step, TRL's
    log with ict's metrics) and print the last step's main numbers and where the files are (main
    process only); returns the metrics file's path."""
    from ict.files import write_jsonl_atomic

    if not trainer.is_world_process_zero():
        return None
    steps = [row for row in trainer.state.log_history if "reward" in row]
    out = Path(trainer.args.output_dir)
    path = out / "metrics.jsonl"
    write_jsonl_atomic(path, steps)
    if steps:
        last = steps[-1]
        shown = ", ".join(f"{k} {last[k]:.4g}" for k in SHOWN if k in last)
        print(f"step {trainer.state.global_step} of {trainer.args.max_steps}: {shown}")
    print(f"metrics of every step: {path}")
    saved = sorted(out.glob("checkpoint-*"))
    if saved:
        print(f"checkpoints: {', '.join(str(p) for p in saved)}")
    return path


if __name__ == "__main__":
    main().accelerator.end_training()  # destroys the process group before exit (multi-process runs)
