"""One forward per row when on-policy: a training step with and without the separate old-policy pass.

Issue 31, item 2. One rollout batch is built once (benchmarks/train_step.py's batches: the embedded
SmolLM2-135M-Instruct on the default task by default, --qwen-shape, --tiny); then for each method
and each path the same initial weights and AdamW state are restored and `TrainingStep.train_on_rollout` (steps
4-7: advantages, statistics, selection, update) is timed, paths interleaved, best of --repeats
after one warm-up run, in process CPU time (--clock wall: elapsed):
  separate     `one_forward: false`: the old-policy pass (no gradient: hidden states, token
               statistics, old log-probs), then the update (today's path before this change);
  one forward  `one_forward: true` (ict.train.stats_in_update): the update's own forward gives the
               statistics (and, for the paper's ICT, the selection before each micro-batch's loss).
ICT runs past its dense warm-up (the sparse step, selection from the statistics). For each pair
the script also reports the token positions the model ran (an embedding hook) and whether the two
paths computed the same update: the selected tokens that differ, the relative difference of the
pre-clip gradient norms and the difference of the losses (float rounding only). (Not the weights:
AdamW's first step moves each weight by about lr x sign(gradient), so rounding-level gradient
differences on near-zero components show up as whole steps.)

  OMP_NUM_THREADS=1 python benchmarks/one_forward.py --autocast off          # SmolLM2, 8 x 8 x 32
  OMP_NUM_THREADS=1 python benchmarks/one_forward.py --tiny --repeats 1      # seconds (a test runs it)
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
import _common  # noqa: E402
import train_step  # noqa: E402

PATHS = ("separate", "one forward")


def parse(argv):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument("--tiny", action="store_true", help="offline tiny model, synthetic batch")
    kind.add_argument("--qwen-shape", action="store_true", help="Qwen2.5-0.5B-shaped, random")
    parser.add_argument("--num-layers", type=int, default=24, help="--qwen-shape: depth")
    parser.add_argument("--methods", nargs="+", default=["grpo", "ict"])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--prompts-per-step", type=int, default=8)
    parser.add_argument("--num-generations", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--prompt-length", type=int, default=64, help="synthetic batches")
    parser.add_argument("--constant-groups", type=int, default=None, help="synthetic batches")
    parser.add_argument("--micro-batch-size", type=int, default=8)
    parser.add_argument("--autocast", default="auto", choices=["auto", "bf16", "fp16", "off"])
    parser.add_argument("--repeats", type=int, default=2, help="best of")
    parser.add_argument(
        "--clock", default="cpu", choices=["cpu", "wall"],
        help="cpu: process CPU time (what the step computed, whatever else runs on the machine; "
        "the measure on a loaded machine with one thread); wall: elapsed time",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the results here")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    from ict.testing import TokenCounter
    from ict.train import TrainConfig
    from ict.train.plan import RunPlan
    from ict.train.schedule import LRSchedule, make_optimizer
    from ict.train.step import PolicyContext, TrainingStep

    base = TrainConfig(
        device=args.device, prompts_per_step=args.prompts_per_step,
        num_generations=args.num_generations, max_new_tokens=args.max_new_tokens,
        micro_batch_size=args.micro_batch_size, autocast=args.autocast, seed=args.seed,
        progress=False, plots=False, max_steps=1, warmup_steps=0, dense_warmup_steps=0,
    )  # fmt: skip
    plan = RunPlan.from_config(base)
    model, name, rollout, rewards, rewards_from, setup_s = train_step.rollout_batch(
        args, base, plan
    )
    print(f"{name}: model + rollout {setup_s:.1f} s", file=sys.stderr, flush=True)
    initial = copy.deepcopy(model.state_dict())
    optimizer = make_optimizer(model, base)
    initial_opt = copy.deepcopy(optimizer.state_dict())

    def run(method, path):
        variant = RunPlan.from_config(base.replace(method=method, one_forward=path != "separate"))
        assert variant.one_forward == (path != "separate"), variant.one_forward_off
        model.load_state_dict(initial)
        optimizer.load_state_dict(initial_opt)
        scheduler = LRSchedule(optimizer, warmup_steps=0, kind="constant", max_steps=1)
        step = TrainingStep(variant, PolicyContext.of(variant, model), optimizer, scheduler)
        counter = TokenCounter(model)
        train_step.sync(variant.device)
        t, cpu = time.perf_counter(), time.process_time()
        metrics, scored = step.train_on_rollout(rollout, rewards, step=1)
        train_step.sync(variant.device)
        wall, cpu = time.perf_counter() - t, time.process_time() - cpu
        seconds = cpu if args.clock == "cpu" else wall
        counter.close()
        print(f"{method} / {path}: {seconds:.2f} s", file=sys.stderr, flush=True)
        return seconds, metrics, counter.tokens, scored.selection.selected.cpu()

    run(args.methods[0], PATHS[1])  # warm-up: allocator, kernels, optimizer state
    results = {}
    for method in args.methods:
        best = {p: float("inf") for p in PATHS}
        kept = {}
        for _ in range(args.repeats):
            for path in PATHS:
                seconds, metrics, tokens, selected = run(method, path)
                if seconds < best[path]:
                    best[path] = seconds
                    kept[path] = (metrics, tokens, selected)
        (m_sep, tok_sep, s_sep), (m_one, tok_one, s_one) = kept[PATHS[0]], kept[PATHS[1]]
        results[method] = {
            "separate_s": best["separate"], "one_forward_s": best["one forward"],
            "ratio": best["one forward"] / best["separate"],
            "separate_stats_s": m_sep["time/stats_s"], "one_forward_stats_s": m_one["time/stats_s"],
            "separate_tokens": tok_sep, "one_forward_tokens": tok_one,
            "selection_differs": int((s_one != s_sep).sum()),
            "grad_norm_difference_rel": abs(m_one["grad_norm"] - m_sep["grad_norm"])
            / max(m_sep["grad_norm"], 1e-30),
            "loss_difference": abs(m_one["loss/total"] - m_sep["loss/total"]),
        }  # fmt: skip
    summary = {
        "model": name, "rewards": rewards_from, "machine": _common.machine(),
        "batch": {"prompts": args.prompts_per_step, "generations": args.num_generations,
                  "response_tokens": int(rollout.response_mask.sum()),
                  "tokens": int(rollout.attention_mask.sum())},
        "precision": plan.precision.as_dict(), "torch_threads": torch.get_num_threads(),
        "repeats": args.repeats, "clock": args.clock, "methods": results,
    }  # fmt: skip
    rows = [
        [m, f"{r['separate_s']:.3f}", f"{r['one_forward_s']:.3f}", f"{r['ratio']:.2f}x",
         f"{r['separate_stats_s']:.3f}", f"{r['one_forward_stats_s']:.3f}",
         f"{r['separate_tokens']} -> {r['one_forward_tokens']}",
         str(r["selection_differs"]), f"{r['grad_norm_difference_rel']:.1e}",
         f"{r['loss_difference']:.1e}"]
        for m, r in results.items()
    ]  # fmt: skip
    print(_common.describe_machine(summary["machine"]))
    print(f"{name}; {summary['batch']}; {plan.precision.describe()}; {args.clock} seconds")
    print(
        _common.table(
            [
                "method",
                "separate s / step",
                "one forward s / step",
                "one / separate",
                "stats s (separate)",
                "stats s (in update)",
                "tokens through the model",
                "selected tokens that differ",
                "grad norm rel. difference",
                "loss difference",
            ],
            rows,
            "lrrrrrrrrr",
        )  # fmt: skip
    )
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
