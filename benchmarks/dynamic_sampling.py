"""Dynamic sampling with refill on a hard task: GRPO and ICT, with and without refill (issue 42).

The task: `toy:cot` (4-digit addition written digit by digit with carries, reward 1 only for the
right final answer) from a tiny transformer warm-started only until `--target-accuracy` of its
sampled answers are right (ict.compare.warm_start, cached), so that most groups of 8 samples are
all wrong at the start. Each run: the same seed, the same number of updates (`--steps`, one
update per step), held-out pass@1 before and after (the run's own evaluation: `--eval-size`
problems x 4 samples). Reported per run: the share of informative groups in the trained batches
(1 - zero_variance_share, mean over steps, and over the first 5), the share among every group drawn, held-out pass@1
before -> after (difference with its 95% bootstrap interval), generated sequences per update, the
steps that hit the cap, and the wall time.

    python benchmarks/dynamic_sampling.py --out runs/dynamic-sampling

Writes OUT/<method>-<refill|plain>/ (run directories) and OUT/results.json, and prints a
markdown table (docs/training.md, "Dynamic sampling").
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from ict.compare.presets import WarmStart
from ict.compare.warm_start import warm_start
from ict.train import TrainConfig, train

# the toy-cot preset's model and warm start (ict/configs/presets/toy-cot.yaml), stopped earlier
WARM = WarmStart(
    hidden_size=128, num_layers=3, num_heads=4, intermediate_size=256, max_steps=3000,
    batch_size=64, learning_rate=3e-3, check_every=25,
)  # fmt: skip


def run_config(args, method: str, refill: bool, out: Path) -> TrainConfig:
    return TrainConfig(
        task="toy:cot", chat_template=False, stop=[], max_new_tokens=60, temperature=1.0,
        prompts_per_step=8, num_generations=8, generation_batch_size=64, micro_batch_size=64,
        learning_rate=2e-4, warmup_steps=0, max_steps=args.steps, save_every=0,
        log_samples_every=0, plots=False, progress=False, device="cpu", autocast="off",
        method=method, seed=args.seed, heldout_eval=True, eval_size=args.eval_size,
        eval_num_samples=4, health_window=5, dynamic_sampling=refill,
        max_generation_rounds=args.max_rounds, output_dir=str(out),
    )  # fmt: skip


def summarize(run_dir: Path, summary: dict, seconds: float) -> dict:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    shares = [r["zero_variance_share"] for r in rows]
    sampled = [r.get("dynamic/sampled_zero_variance_share", r["zero_variance_share"]) for r in rows]
    held = summary["heldout"]
    return {
        "informative_share": 1 - float(np.mean(shares)),
        "informative_share_first5": 1 - float(np.mean(shares[:5])),
        "sampled_informative_share": 1 - float(np.mean(sampled)),
        "pass1_before": held["before"]["mean"],
        "pass1_after": held["after"]["mean"],
        "pass1_difference": held["difference"],
        "sequences_per_update": float(np.mean([r["rollout/sequences"] for r in rows])),
        "cap_hit_steps": sum(bool(r.get("dynamic/cap_hit")) for r in rows),
        "no_signal_steps": sum(s >= 1.0 for s in shares),
        "headline": summary["headline"],
        "seconds": round(seconds, 1),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="runs/dynamic-sampling")
    p.add_argument("--steps", type=int, default=20, help="updates per run")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--target-accuracy", type=float, default=0.1)
    p.add_argument("--max-rounds", type=int, default=10, help="max_generation_rounds")
    p.add_argument("--eval-size", type=int, default=100)
    p.add_argument("--methods", default="grpo,ict")
    args = p.parse_args()
    out = Path(args.out)
    model, tokenizer, info = warm_start(
        "toy:cot", replace(WARM, target_accuracy=args.target_accuracy)
    )
    print(f"warm start: {info['steps']} steps, sampled accuracy {info['accuracy']:.2f}")
    results = {"warm_start": {k: info[k] for k in ("steps", "accuracy")}, "args": vars(args)}
    for method in args.methods.split(","):
        for refill in (False, True):
            name = f"{method}-{'refill' if refill else 'plain'}"
            config = run_config(args, method, refill, out / name)
            t0 = time.perf_counter()
            summary = train(config, model=copy.deepcopy(model), tokenizer=copy.deepcopy(tokenizer))
            results[name] = summarize(out / name, summary, time.perf_counter() - t0)
            print(name, json.dumps(results[name]), flush=True)
    (out / "results.json").write_text(json.dumps(results, indent=2))
    print("| method | refill | informative groups (trained) | first 5 steps | of all drawn | "
          "held-out pass@1 before -> after (diff [95% CI]) | sequences / update | cap hit | "
          "no-signal steps | s |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, r in results.items():
        if name in ("warm_start", "args"):
            continue
        d = r["pass1_difference"]
        method, mode = name.rsplit("-", 1)
        print(
            f"| {method} | {'yes' if mode == 'refill' else 'no'} | {r['informative_share']:.2f} | "
            f"{r['informative_share_first5']:.2f} | {r['sampled_informative_share']:.2f} | "
            f"{r['pass1_before']:.3f} -> {r['pass1_after']:.3f} ({d['mean']:+.3f} "
            f"[{d['low']:+.3f}, {d['high']:+.3f}]) | {r['sequences_per_update']:.0f} | "
            f"{r['cap_hit_steps']} | {r['no_signal_steps']} | {r['seconds']:.0f} |"
        )


if __name__ == "__main__":
    main()
