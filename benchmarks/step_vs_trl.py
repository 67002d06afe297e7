"""A training step of `ict train` against TRL's `GRPOTrainer` on the same model, batch and settings.

For each method (GRPO, then the paper's ICT) one process builds both trainers from the same initial
weights and runs their steps interleaved - TRL step k, then native step k (from a TRL callback) - so
that load changes hit both alike. The first `--warmup` steps of each are not counted; the table
gives the mean seconds per counted step and per phase, and native / TRL.

Phases (wall-clock, the same boundaries on both sides):
  rollout   sampling the B x G responses: native `ict.generation.generate` (each prompt's KV cache
            computed once and repeated G times), TRL `GRPOTrainer._generate` (transformers
            `generate` on the B x G repeated prompts);
  scoring   everything between sampling and the update: rewards, advantages, the old policy's
            forward where one runs (native: always - old log-probs and token statistics, then the
            selection; TRL GRPO: none, its steps are on-policy so old log-probs are the detached new
            ones; ICTGRPOTrainer: the statistics forward), selection;
  update    forward/backward of every micro-batch and the optimizer step (TRL: the step minus
            `_generate_and_score_completions`; native: `time/update_s`);
  step      the whole step (TRL: `on_step_begin` -> `on_step_end`; native: `Trainer.train_step`).

Same on both sides: model and initial weights, the B prompts (rendered once), G, max new tokens
(every response is forced to that length: EOS suppressed by min_new_tokens), temperature 1,
top_p 1, top_k 0, the toy reward (`_common.toy_reward`: no all-equal group), AdamW (lr, betas
0.9/0.99, eps 1e-8, no weight decay, constant lr without warm-up, clip 1.0), micro-batch = one
group of G rows, one optimizer step per B x G rollouts, no KL (beta 0), clip 0.2/0.28, the
per-sequence token-mean loss (TRL loss_type "grpo" = native seq_mean_token_mean), float32, no
gradient checkpointing, dropout off. ICT: ratio 0.1, the paper's group_position score, dense
warm-up = the --warmup uncounted steps, so every counted step is sparse.

Usage:
  OMP_NUM_THREADS=1 python benchmarks/step_vs_trl.py                 # SmolLM2, both methods
  OMP_NUM_THREADS=1 python benchmarks/step_vs_trl.py --quick         # tiny model, seconds
  OMP_NUM_THREADS=1 python benchmarks/step_vs_trl.py --methods ict --prompts 4 --generations 8
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
import _common  # noqa: E402

PHASES = ("rollout", "scoring", "update", "step")


def native_trainer(model, tokenizer, texts, args, method, run_dir):
    """`ict.train.Trainer` on the prompts `texts` with the benchmark's settings."""
    from ict.train import TrainConfig
    from ict.train.trainer import Trainer

    extra = {"dense_warmup_steps": args.warmup} if method == "ict" else {}
    config = TrainConfig(
        method=method, device="cpu", autocast=args.autocast, chat_template=False, stop=[],
        prompts_per_step=args.prompts, num_generations=args.generations,
        max_new_tokens=args.max_new_tokens, temperature=1.0, top_p=1.0,
        generation_batch_size=args.prompts * args.generations, micro_batch_size=args.generations,
        learning_rate=args.lr, warmup_steps=0, lr_scheduler="constant", weight_decay=0.0,
        adam_beta1=0.9, adam_beta2=0.99, adam_epsilon=1e-8, max_grad_norm=1.0, kl_coef=0.0,
        eps_low=0.2, eps_high=0.28, max_steps=args.warmup + args.steps, seed=args.seed,
        log_samples_every=0, save_every=0, plots=False, progress=False, heldout_eval=False,
        eval_every=0, report_to="none", output_dir=str(run_dir), **extra,
    )  # fmt: skip
    problems = [{"prompt": t, "reward": _common.toy_response_reward} for t in texts]
    return Trainer(config, run_dir, model=model, tokenizer=tokenizer, problems=problems)


def trl_trainer(model, tokenizer, texts, args, method, out_dir, callbacks):
    """TRL's GRPOTrainer (GRPO) or ICTGRPOTrainer (ICT) with the same settings."""
    from datasets import Dataset

    common = _common.trl_settings(
        args, out_dir, bf16=args.autocast == "bf16", max_steps=args.warmup + args.steps
    )
    if method == "ict":
        from ict.integrations.trl import ICTGRPOConfig, ICTGRPOTrainer

        # entropy_coef: ICTGRPOConfig leaves it None, which TRL 1.16 multiplies (TypeError)
        config = ICTGRPOConfig(
            **common, method="ict", dense_warmup_steps=args.warmup, entropy_coef=0.0
        )
        cls = ICTGRPOTrainer
    else:
        from trl import GRPOConfig, GRPOTrainer

        config = GRPOConfig(**common, loss_type="grpo")
        cls = GRPOTrainer
    dataset = Dataset.from_list([{"prompt": t} for t in texts])
    return cls(
        model=model, reward_funcs=_common.toy_reward, args=config, train_dataset=dataset,
        processing_class=tokenizer, callbacks=callbacks,
    )  # fmt: skip


def timed(record: dict, key: str, fn, count=None):
    """fn wrapped to add its wall-clock seconds to record[key] (and count(result) to record['tokens'])."""

    def wrapper(*a, **k):
        t0 = time.perf_counter()
        out = fn(*a, **k)
        record[key] = record.get(key, 0.0) + time.perf_counter() - t0
        if count is not None:
            record["tokens"] = record.get("tokens", 0) + count(out)
        return out

    return wrapper


def run_method(method: str, args) -> dict:
    """Both trainers for one method, steps interleaved; per-step phase seconds of each."""
    import copy

    from transformers import TrainerCallback

    model, tokenizer, name = _common.load_model(args.quick, args.seed)
    _common.force_length(model, tokenizer, args.max_new_tokens)
    texts = _common.prompts(tokenizer, args.prompts)
    prompt_tokens = [len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]
    tmp = Path(tempfile.mkdtemp(prefix="ict-bench-"))
    native = native_trainer(
        _common.fresh(model), copy.deepcopy(tokenizer), texts, args, method, tmp / "native"
    )
    trl_steps, native_steps = [], []
    current: dict = {}

    class Interleave(TrainerCallback):
        def on_step_begin(self, targs, state, control, **kw):
            current.clear()
            current["t0"] = time.perf_counter()

        def on_step_end(self, targs, state, control, **kw):
            step = time.perf_counter() - current.pop("t0")
            gs = current.get("gs", 0.0)
            rollout = current.get("rollout", 0.0)
            trl_steps.append(
                {
                    "rollout": rollout,
                    "scoring": gs - rollout,
                    "update": step - gs,
                    "step": step,
                    "tokens": current.get("tokens", 0),
                }
            )
            t0 = time.perf_counter()
            metrics = native.train_step()
            step = time.perf_counter() - t0
            rollout, update = metrics["time/rollout_s"], metrics["time/update_s"]
            native_steps.append(
                {
                    "rollout": rollout,
                    "scoring": step - rollout - update,
                    "update": update,
                    "step": step,
                    "tokens": round(
                        metrics["response_length/mean"] * args.prompts * args.generations
                    ),
                }
            )
            if args.json:  # what is done so far survives an interrupted run
                partial = {"trl_steps": trl_steps, "native_steps": native_steps}
                Path(args.json + ".partial").write_text(json.dumps(partial, indent=2))
            print(
                f"[{method}] step {state.global_step}: TRL {trl_steps[-1]['step']:.2f} s, "
                f"native {step:.2f} s",
                file=sys.stderr,
                flush=True,
            )

    trl = trl_trainer(
        _common.fresh(model), copy.deepcopy(tokenizer), texts, args, method, tmp / "trl",
        [Interleave()],
    )  # fmt: skip
    trl._generate = timed(current, "rollout", trl._generate)
    trl._generate_and_score_completions = timed(
        current,
        "gs",
        trl._generate_and_score_completions,
        count=lambda out: int(out["completion_mask"].sum()),
    )
    info = _common.machine()
    trl.train()
    info_end = _common.machine()
    native.close()

    def mean(steps):
        counted = steps[args.warmup :]
        return {k: sum(s[k] for s in counted) / len(counted) for k in (*PHASES, "tokens")}

    n, t = mean(native_steps), mean(trl_steps)
    return {
        "method": method,
        "model": name,
        "prompt_tokens": prompt_tokens,
        "machine_start": info,
        "machine_end": info_end,
        "native": n,
        "trl": t,
        "ratio": {k: n[k] / t[k] if t[k] > 0 else None for k in PHASES},
        "native_steps": native_steps,
        "trl_steps": trl_steps,
    }


def render(results: list[dict], args) -> str:
    lines = []
    for r in results:
        m0, m1 = r["machine_start"], r["machine_end"]
        lines.append(
            f"### {r['method']}: {r['model']}, {args.prompts} prompts x {args.generations} "
            f"samples, {args.max_new_tokens} new tokens (prompts {min(r['prompt_tokens'])}-"
            f"{max(r['prompt_tokens'])} tokens), mean of {args.steps} step(s) after "
            f"{args.warmup} warm-up"
        )
        lines.append(
            f"{_common.describe_machine(m0)}; load average {m1['load_average'][0]:.2f} at the end"
        )
        rows = []
        for phase in PHASES:
            ratio = r["ratio"][phase]
            rows.append(
                [
                    phase,
                    f"{r['native'][phase]:.2f}",
                    f"{r['trl'][phase]:.2f}",
                    "-" if ratio is None else f"{ratio:.2f}x",
                ]
            )
        rows.append(
            ["response tokens / step", round(r["native"]["tokens"]), round(r["trl"]["tokens"]), ""]
        )
        lines.append(_common.table(["phase (s / step)", "ict train", "TRL", "ict / TRL"], rows))
        lines.append("")
    return "\n".join(lines)


def parse(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="tiny model, tiny batch: seconds")
    parser.add_argument("--methods", nargs="+", default=["grpo", "ict"], choices=["grpo", "ict"])
    parser.add_argument("--prompts", type=int, default=None, help="B (default 4; quick 2)")
    parser.add_argument("--generations", type=int, default=None, help="G (default 8; quick 4)")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="default 32; quick 8")
    parser.add_argument(
        "--steps", type=int, default=None, help="counted steps (default 2; quick 1)"
    )
    parser.add_argument("--warmup", type=int, default=1, help="uncounted first steps")
    parser.add_argument("--lr", type=float, default=1e-6)
    parser.add_argument("--autocast", default="off", choices=["off", "bf16"])
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    q = args.quick
    args.prompts = args.prompts or (2 if q else 4)
    args.generations = args.generations or (4 if q else 8)
    args.max_new_tokens = args.max_new_tokens or (8 if q else 32)
    args.steps = args.steps or 1 if q else args.steps or 2
    return args


def main(argv=None) -> int:
    args = parse(argv)
    torch.set_num_threads(args.threads)
    if args.in_process:  # one method, in this process (the driver below starts one per method)
        result = run_method(args.methods[0], args)
        Path(args.json).write_text(json.dumps(result, indent=2))
        return 0
    # one process per method: a second TRL TrainingArguments in one process resets accelerate's
    # state under the first trainer
    argv = list(sys.argv[1:] if argv is None else argv)
    results = []
    for method in args.methods:
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
            out = f.name
        rest = [a for a in argv if a not in ("--json",)]
        if "--json" in argv:
            i = argv.index("--json")
            rest = argv[:i] + argv[i + 2 :]
        if "--methods" in rest:
            i = rest.index("--methods")
            j = i + 1
            while j < len(rest) and not rest[j].startswith("--"):
                j += 1
            rest = rest[:i] + rest[j:]
        cmd = [sys.executable, __file__, *rest, "--methods", method, "--in-process", "--json", out]
        subprocess.run(cmd, check=True)
        results.append(json.loads(Path(out).read_text()))
    print(render(results, args))
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
