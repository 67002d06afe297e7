"""ICT on TRL with one forward against TRL's GRPO step and ICT's two-pass path, interleaved.

One process builds three trainers on copies of the same initial weights, the same prompts and
settings: TRL's `GRPOTrainer` (GRPO), `ICTGRPOTrainer` with the paper's ICT and `one_forward=True`
(the statistics from the loss forward, ict.integrations.trl.single_forward) and the same with
`one_forward=False` (a separate statistics forward at generation time). Each round runs one step
of each, in turn (a `train()` of one step), so that load changes hit all three alike; the first
`--warmup` rounds are not counted. Every response is forced to `--max-new-tokens` (EOS suppressed),
so each trainer processes the same number of tokens; one optimizer step per generation batch
(micro-batch = one group of G rows, gradient accumulation over the B groups), float32, no KL,
clip 0.2/0.28, TRL loss_type "grpo" on both sides. ICT's dense warm-up is off (every counted step
is sparse). The table: mean seconds per counted step (whole step; rollout = `_generate`; the rest =
step - rollout) and the ratios to TRL's GRPO step, with the load average before and after.

Usage:
  OMP_NUM_THREADS=1 python benchmarks/trl_one_forward.py --quick      # tiny model, seconds
  OMP_NUM_THREADS=1 python benchmarks/trl_one_forward.py              # SmolLM2-135M, 2 x 8 x 32
  OMP_NUM_THREADS=1 python benchmarks/trl_one_forward.py --layers 6   # its first 6 of 30 layers
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
import _common  # noqa: E402

VARIANTS = ("trl_grpo", "ict_one_forward", "ict_two_pass")


def make_trainer(variant, model, tokenizer, texts, args, out_dir, callback, first: bool):
    """One of VARIANTS with the benchmark's settings. Every trainer after the first keeps the
    accelerate state the first built (a second TrainingArguments would reset it under it)."""
    from datasets import Dataset

    common = _common.trl_settings(args, out_dir, bf16=False, max_steps=1)
    if not first:
        common["accelerator_config"] = {"use_configured_state": True}
    if variant == "trl_grpo":
        from trl import GRPOConfig, GRPOTrainer

        config, cls = GRPOConfig(**common, loss_type="grpo"), GRPOTrainer
    else:
        from ict.integrations.trl import ICTGRPOConfig, ICTGRPOTrainer

        config = ICTGRPOConfig(
            **common, method="ict", dense_warmup_steps=0,
            one_forward=variant == "ict_one_forward",
        )  # fmt: skip
        cls = ICTGRPOTrainer
    dataset = Dataset.from_list([{"prompt": t} for t in texts])
    trainer = cls(
        model=model, reward_funcs=_common.toy_reward, args=config, train_dataset=dataset,
        processing_class=tokenizer, callbacks=[callback],
    )  # fmt: skip
    if variant != "trl_grpo":
        assert trainer.ict_one_forward == (variant == "ict_one_forward"), (
            trainer.ict_one_forward_reason
        )
    return trainer


class StepClock:
    """Trainer callback + `_generate` wrapper: seconds of each step and of its rollout."""

    def __init__(self):
        self.steps, self.t0, self.rollout = [], None, 0.0

    def wrap(self, generate):
        def timed(*a, **k):
            t = time.perf_counter()
            out = generate(*a, **k)
            self.rollout += time.perf_counter() - t
            return out

        return timed

    def callback(self):
        from transformers import TrainerCallback

        clock = self

        class Callback(TrainerCallback):
            def on_step_begin(self, targs, state, control, **kw):
                clock.t0, clock.rollout = time.perf_counter(), 0.0

            def on_step_end(self, targs, state, control, **kw):
                step = time.perf_counter() - clock.t0
                clock.steps.append({"step": step, "rollout": clock.rollout})

        return Callback()


def run(args) -> dict:
    model, tokenizer, name = _common.load_model(args.quick, args.seed, layers=args.layers)
    _common.force_length(model, tokenizer, args.max_new_tokens)
    texts = _common.prompts(tokenizer, args.prompts)
    tmp = Path(tempfile.mkdtemp(prefix="ict-bench-1fw-"))
    clocks, trainers = {}, {}
    for i, variant in enumerate(VARIANTS):
        clocks[variant] = StepClock()
        trainers[variant] = make_trainer(
            variant, _common.fresh(model), copy.deepcopy(tokenizer), texts, args,
            tmp / variant, clocks[variant].callback(), first=i == 0,
        )  # fmt: skip
        trainers[variant]._generate = clocks[variant].wrap(trainers[variant]._generate)
    start = _common.machine()
    for r in range(args.warmup + args.steps):
        for variant in VARIANTS:
            with contextlib.redirect_stdout(io.StringIO()):  # the Trainer's end-of-train summary
                trainers[variant].train()
        print(
            f"round {r + 1}: "
            + ", ".join(f"{v} {clocks[v].steps[-1]['step']:.2f} s" for v in VARIANTS),
            file=sys.stderr,
            flush=True,
        )
    end = _common.machine()
    means = {}
    for variant in VARIANTS:
        counted = clocks[variant].steps[args.warmup :]
        step = sum(s["step"] for s in counted) / len(counted)
        rollout = sum(s["rollout"] for s in counted) / len(counted)
        means[variant] = {"step": step, "rollout": rollout, "rest": step - rollout}
    return {"model": name, "machine_start": start, "machine_end": end, "means": means,
            "steps": {v: clocks[v].steps for v in VARIANTS}}  # fmt: skip


def render(result: dict, args) -> str:
    m0, m1 = result["machine_start"], result["machine_end"]
    means, base = result["means"], result["means"]["trl_grpo"]
    rows = []
    for variant in VARIANTS:
        m = means[variant]
        rows.append(
            [variant, f"{m['step']:.2f}", f"{m['rollout']:.2f}", f"{m['rest']:.2f}",
             f"{m['step'] / base['step']:.3f}x", f"{m['rest'] / base['rest']:.3f}x"]
        )  # fmt: skip
    head = (
        f"{result['model']}, {args.prompts} prompts x {args.generations} samples, "
        f"{args.max_new_tokens} new tokens, mean of {args.steps} interleaved step(s) after "
        f"{args.warmup} warm-up\n{_common.describe_machine(m0)}; load average "
        f"{m1['load_average'][0]:.2f} at the end"
    )
    table = _common.table(
        ["trainer", "step s", "rollout s", "rest s", "step / TRL", "rest / TRL"], rows
    )
    return f"{head}\n{table}"


def parse(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="tiny model, tiny batch: seconds")
    parser.add_argument("--prompts", type=int, default=None, help="B (default 2)")
    parser.add_argument("--generations", type=int, default=None, help="G (default 8; quick 4)")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="default 32; quick 8")
    parser.add_argument("--steps", type=int, default=None, help="counted rounds (default 2)")
    parser.add_argument("--warmup", type=int, default=1, help="uncounted first rounds")
    parser.add_argument(
        "--layers", type=int, default=None, help="keep only the first N decoder layers"
    )
    parser.add_argument("--lr", type=float, default=1e-6)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args(argv)
    args.prompts = args.prompts or 2
    args.generations = args.generations or (4 if args.quick else 8)
    args.max_new_tokens = args.max_new_tokens or (8 if args.quick else 32)
    args.steps = args.steps or 2
    return args


def main(argv=None) -> int:
    args = parse(argv)
    torch.set_num_threads(args.threads)
    result = run(args)
    print(render(result, args))
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), **result}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
