"""Seconds per training step, split into rollout / statistics / update, for GRPO and ICT on the same batch.

One rollout batch is sampled once; then, for each method, from the same initial weights:
  statistics: the no-grad pass that gives old log-probs (GRPO needs only these) or old log-probs +
              H, H2, JS and the selection (ICT; the trainer computes these for every method as
              diagnostics, so `stats (full)` is what a training step actually costs);
  update:     the policy forward/backward over the batch and the optimizer step.
Peak memory: process max RSS on CPU, torch.cuda.max_memory_allocated per phase on CUDA.

Usage:
  python benchmarks/train_step.py                       # embedded SmolLM2-135M, default batch (8 x 8)
  python benchmarks/train_step.py --tiny --repeats 3    # offline tiny model, seconds
  python benchmarks/train_step.py --model DIR --device cuda --prompts-per-step 16
"""

from __future__ import annotations

import argparse
import copy
import json
import resource
import sys
import time

import torch


def peak_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(fn, device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    t0 = time.perf_counter()
    out = fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return out, time.perf_counter() - t0, peak_mb(device)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model", default=None, help="HF id / dir; default: embedded SmolLM2-135M-Instruct"
    )
    parser.add_argument("--tiny", action="store_true", help="use the offline tiny test model")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--prompts-per-step", type=int, default=8)
    parser.add_argument("--num-generations", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--micro-batch-size", type=int, default=8)
    parser.add_argument(
        "--autocast",
        default="auto",
        choices=["auto", "bf16", "fp16", "off"],
        help="auto: bf16 only where the device computes it natively, else float32 (ict.precision)",
    )
    parser.add_argument(
        "--no-share-prompt", action="store_true", help="plain forward of every sequence"
    )
    parser.add_argument(
        "--repeats", type=int, default=1, help="statistics/update repeats per method (median)"
    )
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args(argv)

    from ict.train import TrainConfig, Trainer
    from ict.train.trainer import Problem

    config = TrainConfig(
        model=args.model,
        device=args.device,
        prompts_per_step=args.prompts_per_step,
        num_generations=args.num_generations,
        max_new_tokens=args.max_new_tokens,
        micro_batch_size=args.micro_batch_size,
        autocast=args.autocast,
        progress=False,
        share_prompt=not args.no_share_prompt,
        plots=False,
        max_steps=1,
        output_dir=f"/tmp/ict_bench_{time.time_ns()}",
    )
    kwargs = {}
    if args.tiny:
        from ict.testing import tiny_model_and_tokenizer

        model, tokenizer = tiny_model_and_tokenizer(seed=0)
        kwargs = {"model": model, "tokenizer": tokenizer}
        kwargs["problems"] = [
            Problem(f"Say a digit {i}:", lambda t: float(t[:1].isdigit())) for i in range(16)
        ]
        config = config.replace(stop=[], max_new_tokens=min(args.max_new_tokens, 8))
    trainer = Trainer(config, **kwargs)
    device = trainer.device
    from ict.precision import choose_precision

    precision = choose_precision(config.autocast, device)
    print(precision.describe(), file=sys.stderr)
    initial = copy.deepcopy(trainer.model.state_dict())
    initial_opt = copy.deepcopy(trainer.optimizer.state_dict())

    (rollout, rewards, rollout_metrics), rollout_s, rollout_mem = timed(
        lambda: trainer.rollout(1), device
    )
    from ict.loss import compute_advantages

    advantages, _ = compute_advantages(rewards, rollout.prompt_index.cpu(), mode=config.advantage)
    advantages = advantages.to(device)
    mask = rollout.response_mask.bool()
    n_tokens = int(rollout.attention_mask.sum())

    def old_logprobs_only():  # what plain GRPO needs
        return trainer.sampled_logprobs(trainer.model, rollout)

    results = {
        "precision": precision.as_dict(),
        "batch": {
            "sequences": len(rollout),
            "response_tokens": int(mask.sum()),
            "tokens": n_tokens,
            "rollout_s": rollout_s,
            "rollout_peak_mb": rollout_mem,
            "reward_mean": rollout_metrics["reward/mean"],
        },
        "methods": {},
    }
    warmed: set[str] = set()
    for method in ("grpo", "ict", "grpo", "ict"):  # the first round warms up (allocator, kernels)
        warm = method not in warmed
        warmed.add(method)
        trainer.config = config.replace(method=method)
        rows = []
        for _ in range(1 if warm else args.repeats):
            trainer.model.load_state_dict(initial)
            trainer.optimizer.load_state_dict(initial_opt)
            _, lp_s, lp_mem = timed(old_logprobs_only, device)

            def full_stats(name=method):
                stats, _ = trainer.token_statistics(rollout)
                return stats, trainer.select(name, mask, stats, advantages, rollout.input_ids, 1)

            def update(stats, selected):
                return trainer.update(rollout, stats.logprob, advantages, selected, None)

            (stats, selected), stats_s, stats_mem = timed(full_stats, device)
            _, update_s, update_mem = timed(lambda s=stats, m=selected: update(s, m), device)
            rows.append(
                dict(
                    logprob_only_s=lp_s,
                    stats_full_s=stats_s,
                    update_s=update_s,
                    stats_peak_mb=stats_mem,
                    update_peak_mb=update_mem,
                    selected_fraction=float(selected.sum() / mask.sum()),
                )
            )
        if not warm:
            results["methods"][method] = {
                k: sorted(r[k] for r in rows)[len(rows) // 2] for k in rows[0]
            }
    g, i = results["methods"]["grpo"], results["methods"]["ict"]
    results["ratios"] = {
        "update_ict_over_grpo": i["update_s"] / g["update_s"],
        "step_ict_over_grpo_minimal": (rollout_s + i["stats_full_s"] + i["update_s"])
        / (rollout_s + g["logprob_only_s"] + g["update_s"]),
    }
    b = results["batch"]
    print(
        f"device {device}, model {args.model or ('tiny' if args.tiny else 'smollm2-135m-instruct')}, "
        f"batch {b['sequences']} sequences, {b['response_tokens']} response / {b['tokens']} total tokens, "
        f"autocast {config.autocast} -> {precision.name}, share_prompt {config.share_prompt}, torch threads {torch.get_num_threads()}"
    )
    print(f"rollout: {rollout_s:.2f} s (peak {rollout_mem:.0f} MB)")
    print(
        "| method | old log-probs only (s) | statistics + selection (s) | update (s) | selected | peak MB (stats / update) |"
    )
    print("|---|---|---|---|---|---|")
    for method, r in results["methods"].items():
        print(
            f"| {method} | {r['logprob_only_s']:.2f} | {r['stats_full_s']:.2f} | {r['update_s']:.2f} | "
            f"{r['selected_fraction']:.3f} | {r['stats_peak_mb']:.0f} / {r['update_peak_mb']:.0f} |"
        )
    print(
        f"update phase ICT / GRPO: {results['ratios']['update_ict_over_grpo']:.3f} (target <= 1.10)"
    )
    print(
        f"whole step ICT (full stats) / minimal GRPO (log-probs only): "
        f"{results['ratios']['step_ict_over_grpo_minimal']:.3f}"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
