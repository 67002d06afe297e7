"""The prepared GPU check: token statistics at paper size, a training step of a Qwen2.5-0.5B-shaped
model, and short ICT runs of the native trainer and of ICTGRPOTrainer; prints ratios.

    python3 scripts/gpu_check.py                  # CUDA, full sizes (< 10 min on one H200)
    python3 scripts/gpu_check.py --cpu --tiny     # CPU, small sizes (the test suite runs this)

Parts (each in its own subprocess with a time limit; a part that cannot run is reported as
SKIPPED or FAILED with its reason, and the others still run):
  env          python, torch, CUDA device, transformers / accelerate / trl / datasets / vllm versions
  roofline     benchmarks/roofline.py: the matmul peak (float32, bfloat16) and memory bandwidth of
               the device, and each phase of a training step and an evaluation (rollout,
               statistics, update, evaluation) against them, for the toy-cot cell's and
               SmolLM2-135M's shapes (random weights; bf16 autocast; tiny: --quick)
  token_stats  benchmarks/token_stats.py: V = 151936 (Qwen2.5), D = 896, N = 4096 (tiny: 256),
               cases (c) hidden-state statistics, (d) matmul + log_softmax floor, (a) naive
  train_step   benchmarks/train_step.py on a random-weight model of Qwen2.5-0.5B's shape (24 layers,
               hidden 896, 14 heads / 2 KV heads, MLP 4864, V = 151936, tied head; bfloat16 on
               CUDA) with a synthetic 151936-token vocabulary (tiny: its --tiny model)
  native       `ict.train.Trainer`, tiny model, toy reward, GRPO then ICT, a few steps each
  trl          `ict.integrations.trl.ICTGRPOTrainer`, tiny model, GRPO then ICT, a few steps each
Ratios printed: (c)/(d) time and peak memory / full logits; train step ICT/GRPO (update phase and
whole step); native and TRL seconds per step ICT/GRPO. `--out DIR` also writes gpu_check.json and
the raw logs there.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QWEN05B_SHAPE = dict(
    hidden_size=896,
    intermediate_size=4864,
    num_hidden_layers=24,
    num_attention_heads=14,
    num_key_value_heads=2,
    vocab_size=151936,
    max_position_embeddings=32768,
    rope_theta=1000000.0,
    tie_word_embeddings=True,
)
PARTS = ("env", "roofline", "token_stats", "train_step", "native", "trl")


# ---------------------------------------------------------------------------------------------
# helpers run inside child processes (python3 scripts/gpu_check.py --child <name> ...)
# ---------------------------------------------------------------------------------------------
def big_tokenizer(vocab_size: int):
    """The tiny character tokenizer (ict.testing) padded with `<tN>` tokens to `vocab_size`."""
    from ict.testing import tiny_tokenizer

    return tiny_tokenizer(vocab_size)


def save_qwen_shaped(directory: Path, dtype: str) -> Path:
    """A random-weight Qwen2ForCausalLM of Qwen2.5-0.5B's shape and its tokenizer, saved."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tokenizer = big_tokenizer(QWEN05B_SHAPE["vocab_size"])
    config = Qwen2Config(
        **QWEN05B_SHAPE,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config).to(getattr(torch, dtype))
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def toy_problems(count: int = 16):
    """Problems whose reward varies inside a group (so advantages are not all zero)."""
    from ict.train import Problem

    return [
        Problem(f"Say a digit {i}:", lambda t: float(sum(map(ord, t)) % 3 == 0))
        for i in range(count)
    ]


def train_step_ratios(summary: dict) -> dict[str, float]:
    """The ratios the check reports from benchmarks/train_step.py's --json summary: ICT's update
    (skip rows, head on loss positions, stop at the last column) over GRPO's as it is today and
    over GRPO with row skipping, and the statistics pass over its floor."""
    ict = summary["variants"]["ict_123"]
    return {
        "update_ict_over_grpo": ict["vs_grpo_today"],
        "update_ict_over_grpo_skip_rows": ict["vs_grpo_1"],
        "stats_over_floor": summary["stats_vs_floor"]["ratio"],
    }


def child_train_step(argv: list[str]) -> int:
    """benchmarks/train_step.py's main(argv), with toy problems instead of the default task
    (train_step.py has no --task flag; the Qwen-shaped model needs no reasoning-gym this way)."""
    import ict.train.trainer as trainer_module

    trainer_module.load_problems = lambda config, *a, **k: toy_problems()
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import train_step

    return train_step.main(argv)


def child_native(device: str, steps: int) -> int:
    """Seconds per step of the native trainer, GRPO and ICT, tiny model; prints one JSON line."""
    from ict.testing import tiny_model_and_tokenizer
    from ict.train import TrainConfig, Trainer

    result = {}
    for method in ("grpo", "ict"):
        model, tokenizer = tiny_model_and_tokenizer(seed=0)
        config = TrainConfig(
            method=method, device=device, max_steps=steps, prompts_per_step=4,
            num_generations=8, max_new_tokens=16, stop=[], chat_template=False,
            learning_rate=1e-3, warmup_steps=0, save_every=10**6, log_samples_every=10**6,
            plots=False, progress=False, output_dir=tempfile.mkdtemp(prefix="ict_gpu_check_"),
        )  # fmt: skip
        trainer = Trainer(config, model=model, tokenizer=tokenizer, problems=toy_problems())
        trainer.train()
        # per-step seconds from the trainer's own timers; the first step (warm-up) is left out
        rows = trainer.history[1:] or trainer.history
        parts = ("time/rollout_s", "time/stats_s", "time/update_s")
        seconds = sum(sum(float(r.get(k, 0.0)) for k in parts) for r in rows) / len(rows)
        result[method] = {"s_per_step": seconds, "device": str(trainer.plan.device)}
    print(json.dumps(result))
    return 0


def child_trl(device: str, steps: int) -> int:
    """Seconds per step of ICTGRPOTrainer, GRPO and ICT, tiny model; prints one JSON line."""
    from datasets import Dataset

    from ict.integrations.trl import ICTGRPOConfig, ICTGRPOTrainer
    from ict.testing import tiny_model_and_tokenizer

    def reward(completions, **kwargs):
        return [(sum(map(ord, c)) % 7) / 7 for c in completions]

    data = Dataset.from_list([{"prompt": f"{a}+{b}="} for a in range(4) for b in range(4)])
    result = {}
    for method in ("grpo", "ict"):
        model, tokenizer = tiny_model_and_tokenizer(seed=0)
        args = ICTGRPOConfig(
            output_dir=tempfile.mkdtemp(prefix="ict_gpu_check_trl_"), method=method,
            per_device_train_batch_size=8, num_generations=8, max_completion_length=16,
            max_steps=steps, learning_rate=1e-3, logging_steps=1, report_to=[],
            use_cpu=device == "cpu", save_strategy="no", seed=0, bf16=False,
            dataloader_num_workers=0,
        )  # fmt: skip
        trainer = ICTGRPOTrainer(
            model=model, reward_funcs=reward, args=args, train_dataset=data,
            processing_class=tokenizer,
        )  # fmt: skip
        start = time.perf_counter()
        trainer.train()
        result[method] = {
            "s_per_step": (time.perf_counter() - start) / steps,
            "device": str(trainer.model.device),
        }
    print(json.dumps(result))
    return 0


# ---------------------------------------------------------------------------------------------
# the driver
# ---------------------------------------------------------------------------------------------
def run_part(name: str, cmd: list[str], timeout_s: float, log_dir: Path | None) -> dict:
    """Run one part; {"status": ok|FAILED|TIMEOUT, "seconds", "stdout", "stderr_tail"}."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT / "src"), env.get("PYTHONPATH", "")) if p
    )
    start = time.perf_counter()
    try:
        res = subprocess.run(
            cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s
        )
        status = "ok" if res.returncode == 0 else f"FAILED (exit {res.returncode})"
        out, err = res.stdout, res.stderr
    except subprocess.TimeoutExpired as exc:
        status = f"TIMEOUT after {timeout_s:.0f} s"
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
    seconds = time.perf_counter() - start
    if log_dir is not None:
        (log_dir / f"{name}.log").write_text(f"$ {' '.join(cmd)}\n{out}\n--- stderr\n{err}")
    print(f"[{name}] {status} in {seconds:.1f} s", flush=True)
    if status != "ok":
        print(err[-1500:], flush=True)
    return {"status": status, "seconds": seconds, "stdout": out, "stderr_tail": err[-1500:]}


def missing_modules(names) -> list[str]:
    missing = []
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - any import failure means the part cannot run
            missing.append(name)
    return missing


def env_report(device: str) -> dict:
    import torch

    info = {"python": sys.version.split()[0], "torch": torch.__version__, "device": device}
    if torch.cuda.is_available():
        info["cuda_device"] = torch.cuda.get_device_name(0)
        info["cuda"] = torch.version.cuda
    for name in ("transformers", "accelerate", "trl", "datasets", "vllm", "tokenizers"):
        try:
            info[name] = importlib.import_module(name).__version__
        except Exception as err:  # noqa: BLE001
            info[name] = f"missing ({type(err).__name__})"
    return info


def parse_token_stats(text: str) -> dict:
    """{case letter: {"seconds", "vs_floor", "mib", "pct_full"}} from token_stats.py's table (with
    or without its "CPU time / (d)" column)."""
    rows = {}
    pattern = r"\| \((\w+)\)[^|]*\| ([\d.]+) \| ([\d.]+)x \|(?: [\d.]+x \|)? (\d+) \| ([\d.]+)% \|"
    for case, sec, ratio, mib, pct in re.findall(pattern, text):
        rows[case] = dict(
            seconds=float(sec), vs_floor=float(ratio), mib=int(mib), pct_full=float(pct)
        )
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--cpu", action="store_true", help="run on the CPU (default: CUDA)")
    ap.add_argument("--tiny", action="store_true", help="small sizes (for tests and dry runs)")
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated subset of {PARTS}")
    ap.add_argument("--out", default=None, help="write gpu_check.json and per-part logs here")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args, rest = ap.parse_known_args(argv)
    device = "cpu" if args.cpu else "cuda"
    steps = 3 if args.tiny else 6
    if args.child == "train_step":
        return child_train_step(rest)
    if args.child == "native":
        return child_native(device, steps)
    if args.child == "trl":
        return child_trl(device, steps)
    if args.child == "save_qwen":
        save_qwen_shaped(Path(rest[0]), rest[1])
        return 0

    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        ap.error(f"unknown parts {unknown}; choose from {PARTS}")
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        print("CUDA is not available: run on a GPU machine, or pass --cpu --tiny for a dry run")
        return 2
    log_dir = Path(args.out) if args.out else None
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
    py, me = sys.executable, str(Path(__file__).resolve())
    mode_flags = (["--cpu"] if args.cpu else []) + (["--tiny"] if args.tiny else [])
    report: dict = {"mode": {"device": device, "tiny": args.tiny}, "parts": {}, "ratios": {}}
    ratios = report["ratios"]
    if "env" in parts:
        report["env"] = env_report(device)
        print("[env] " + ", ".join(f"{k} {v}" for k, v in report["env"].items()), flush=True)

    if "roofline" in parts:
        json_path = Path(tempfile.mkdtemp(prefix="ict_gpu_check_")) / "roofline.json"
        cmd = [py, "benchmarks/roofline.py", "--device", device, "--json", str(json_path)]
        cmd += ["--quick"] if args.tiny else ["--random-weights", "--autocast", "auto"]
        part = run_part("roofline", cmd, 240 if args.tiny else 150, log_dir)
        if json_path.is_file():
            part["result"] = json.loads(json_path.read_text())
            for result in part["result"]["results"]:
                for phase in result["phases"]:
                    key = f"roofline {result['model']} {phase['phase']} % matmul peak"
                    ratios[key] = 100 * phase["peak_fraction"]
        report["parts"]["roofline"] = part
        print(part["stdout"][part["stdout"].find("matmul peak") :], flush=True)

    if "token_stats" in parts:
        n, cases, repeats = (
            ("256", ["c", "d"], "1") if args.tiny else ("4096", ["a", "c", "d"], "3")
        )
        cmd = [py, "benchmarks/token_stats.py", "--n", n, "--device", device, "--repeats", repeats]
        part = run_part(
            "token_stats", cmd + ["--cases", *cases], 240 if args.tiny else 200, log_dir
        )
        rows = parse_token_stats(part["stdout"])
        part["table"] = rows
        if "c" in rows:
            ratios["token_stats (c)/(d) time"] = rows["c"]["vs_floor"]
            ratios["token_stats (c) peak memory / full logits (%)"] = rows["c"]["pct_full"]
        if "a" in rows and "c" in rows:
            ratios["token_stats (a)/(c) time"] = rows["a"]["seconds"] / rows["c"]["seconds"]
        report["parts"]["token_stats"] = part

    if "train_step" in parts:
        json_path = Path(tempfile.mkdtemp(prefix="ict_gpu_check_")) / "train_step.json"
        if args.tiny:
            step_args = ["--tiny", "--device", device, "--repeats", "1", "--prompts-per-step", "2"]
            step_args += ["--num-generations", "4", "--max-new-tokens", "8"]
        else:
            model_dir = Path(tempfile.mkdtemp(prefix="ict_qwen05b_shape_"))
            made = run_part(
                "save_qwen",
                [py, me, "--child", "save_qwen", str(model_dir), "bfloat16"],
                180,
                log_dir,
            )
            report["parts"]["save_qwen"] = made
            step_args = ["--model", str(model_dir), "--device", device, "--repeats", "3"]
            step_args += [
                "--prompts-per-step",
                "8",
                "--num-generations",
                "8",
                "--max-new-tokens",
                "128",
            ]
            step_args += ["--micro-batch-size", "16"]
        cmd = [py, me, "--child", "train_step", *step_args, "--json", str(json_path)]
        part = run_part("train_step", cmd, 240 if args.tiny else 200, log_dir)
        if json_path.is_file():
            part["result"] = json.loads(json_path.read_text())
            for key, value in train_step_ratios(part["result"]).items():
                ratios[f"train_step {key}"] = value
        report["parts"]["train_step"] = part

    for name, modules in (
        ("native", ["ict.train"]),
        ("trl", ["trl", "datasets", "ict.integrations.trl"]),
    ):
        if name not in parts:
            continue
        missing = missing_modules(modules)
        if missing:
            reason = (
                f"SKIPPED: cannot import {', '.join(missing)} (ship wheels: scripts/gpu_check.sh)"
            )
            print(f"[{name}] {reason}", flush=True)
            report["parts"][name] = {"status": reason}
            continue
        cmd = [py, me, *mode_flags, "--child", name]
        part = run_part(name, cmd, 240 if args.tiny else 150, log_dir)
        lines = [ln for ln in part["stdout"].splitlines() if ln.startswith("{")]
        if part["status"] == "ok" and lines:
            part["result"] = json.loads(lines[-1])
            ratios[f"{name} s/step ICT/GRPO"] = (
                part["result"]["ict"]["s_per_step"] / part["result"]["grpo"]["s_per_step"]
            )
        report["parts"][name] = part

    print("\n## GPU check: ratios\n")
    print(f"device {device}{' (tiny sizes)' if args.tiny else ''}")
    print("| ratio | value |\n|---|---:|")
    for key, value in ratios.items():
        print(f"| {key} | {value:.3f} |")
    print("\n| part | status | seconds |\n|---|---|---:|")
    for name, part in report["parts"].items():
        print(f"| {name} | {part['status']} | {part.get('seconds', 0):.1f} |")
    if log_dir is not None:
        slim = json.loads(json.dumps(report))
        for part in slim["parts"].values():
            part.pop("stdout", None)
        (log_dir / "gpu_check.json").write_text(json.dumps(slim, indent=2))
    failed = [
        n for n, p in report["parts"].items() if p["status"].startswith(("FAILED", "TIMEOUT"))
    ]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
