"""How a native training step grows with response length L and group size G (fixed prompts).

One process per method (GRPO, the paper's ICT), glibc told to mmap every allocation >= 64 KiB so
that the resident set follows live tensors. The model is loaded once; for every (G, L) of the
grid a fresh `ict.train.Trainer` starts from the same initial weights on the same B prompts and
runs --steps counted steps after one warm-up step of the first configuration (responses forced to
exactly L tokens, the toy reward: no all-equal group; ICT in its sparse phase: no dense warm-up).
Per step: seconds of the whole step and of its phases (rollout = `generate`, statistics = the old
policy's forward + token statistics + old log-probs + selection, update), seconds per 1000 response
tokens, and two memory figures:
  stats peak   peak RSS during `old_policy_pass` minus RSS when it starts (hidden states, the
               statistics' chunk buffers, the outputs), next to the full float32 logits of the
               response positions (positions x V x 4 bytes), which the statistics never build;
  step peak    the process's peak RSS during the step (model, optimizer state, activations).

  OMP_NUM_THREADS=1 python benchmarks/scaling.py                     # SmolLM2, B = 1
  OMP_NUM_THREADS=1 python benchmarks/scaling.py --layers 4 --parallel   # its first 4 layers,
                                                                     # both methods at once
  python benchmarks/scaling.py --quick                               # tiny model

--layers N keeps SmolLM2's embeddings, head and vocabulary (so the statistics and their memory are
the real ones) with only its first N decoder layers: the body's share of the cost falls, the
trend with L and G stays.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
import _common  # noqa: E402


def rss(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(field)


def reset_peak() -> None:
    import ctypes

    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS


def grid(a) -> list[tuple[int, int]]:
    """(G, L) pairs: L over --lengths at the first G, then G over --groups at the first L."""
    out = [(a.groups[0], L) for L in a.lengths]
    out += [(G, a.lengths[0]) for G in a.groups[1:]]
    return out


def run_method(method: str, a) -> list[dict]:
    import ict.train.step as step_module
    from ict.train import TrainConfig
    from ict.train.trainer import Trainer

    model, tokenizer, name = _common.load_model(a.quick, layers=a.layers)
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    texts = _common.prompts(tokenizer, a.prompts)
    V = model.get_output_embeddings().weight.shape[0]
    phase = {}
    original = step_module.old_policy_pass

    def measured(*args, **kwargs):  # the statistics pass as the step service calls it
        reset_peak()
        base = rss("VmRSS")
        out = original(*args, **kwargs)
        phase["stats_peak"] = rss("VmHWM") - base
        return out

    step_module.old_policy_pass = measured
    rows = []
    for i, (G, L) in enumerate(grid(a)):
        model.load_state_dict(initial)
        _common.force_length(model, tokenizer, L)
        extra = {"dense_warmup_steps": 0} if method == "ict" else {}
        config = TrainConfig(
            method=method, device="cpu", autocast="off", chat_template=False, stop=[],
            prompts_per_step=a.prompts, num_generations=G, max_new_tokens=L,
            generation_batch_size=a.prompts * G, micro_batch_size=G, warmup_steps=0,
            learning_rate=1e-6, max_steps=a.steps + 1, log_samples_every=0, save_every=0,
            plots=False, progress=False, heldout_eval=False, eval_every=0, report_to="none",
            seed=0, one_forward=False, **extra,  # the statistics pass as its own phase
        )  # fmt: skip
        run_dir = Path(tempfile.mkdtemp(prefix="ict-scaling-"))
        problems = [{"prompt": t, "reward": _common.toy_response_reward} for t in texts]
        trainer = Trainer(config, run_dir, model=model, tokenizer=tokenizer, problems=problems)
        steps = []
        for k in range(a.steps + (1 if i == 0 else 0)):
            reset_peak()
            t0 = time.perf_counter()
            m = trainer.train_step()
            step_s = time.perf_counter() - t0
            if i == 0 and k == 0:
                continue  # warm-up
            tokens = round(m["response_length/mean"] * a.prompts * G)
            steps.append(
                {
                    "step_s": step_s,
                    "rollout_s": m["time/rollout_s"],
                    "stats_s": m["time/stats_s"],
                    "update_s": m["time/update_s"],
                    "tokens": tokens,
                    "stats_peak_mib": phase["stats_peak"] / 2**20,
                    "step_peak_mib": rss("VmHWM") / 2**20,
                    "full_logits_mib": tokens * V * 4 / 2**20,
                }
            )
        trainer.close()
        row = {k: sum(s[k] for s in steps) / len(steps) for k in steps[0]}
        row.update(method=method, G=G, L=L, model=name)
        row["s_per_1k_tokens"] = 1000 * row["step_s"] / row["tokens"]
        rows.append(row)
        print(
            f"[{method}] G={G} L={L}: {row['step_s']:.2f} s, stats peak "
            f"{row['stats_peak_mib']:.0f} MiB",
            file=sys.stderr,
            flush=True,
        )
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--methods", nargs="+", default=["grpo", "ict"], choices=["grpo", "ict"])
    parser.add_argument("--prompts", type=int, default=1, help="B (fixed)")
    parser.add_argument("--lengths", nargs="+", type=int, default=None, help="default 32 128 512")
    parser.add_argument("--groups", nargs="+", type=int, default=None, help="default 4 8 16")
    parser.add_argument("--steps", type=int, default=1, help="counted steps per configuration")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--layers", type=int, default=None, help="keep the first N decoder layers")
    parser.add_argument(
        "--parallel", action="store_true", help="run the methods' processes at the same time"
    )
    parser.add_argument("--json", default=None)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = parser.parse_args(argv)
    a.lengths = a.lengths or ([8] if a.quick else [32, 128, 512])
    a.groups = a.groups or ([2, 4] if a.quick else [4, 8, 16])
    torch.set_num_threads(a.threads)
    if a.child:
        method, out = a.child.split(":", 1)
        Path(out).write_text(json.dumps(run_method(method, a)))
        return 0
    info = _common.machine()
    rows = []
    argv = list(sys.argv[1:] if argv is None else argv)
    procs = []
    for method in a.methods:
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
            out = f.name
        env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
        cmd = [sys.executable, __file__, *argv, "--child", f"{method}:{out}"]
        procs.append((subprocess.Popen(cmd, env=env), out))
        if not a.parallel:
            procs[-1][0].wait()
    for proc, out in procs:
        if proc.wait() != 0:
            raise SystemExit(f"{proc.args} failed")
        rows += json.loads(Path(out).read_text())
    info_end = _common.machine()
    print(
        f"{rows[0]['model']}, {a.prompts} prompt(s), responses exactly L tokens, mean of "
        f"{a.steps} step(s){', methods run concurrently' if a.parallel else ''}; "
        f"{_common.describe_machine(info)}; load average "
        f"{info_end['load_average'][0]:.2f} at the end"
    )
    table = [
        [
            r["method"], r["G"], r["L"], round(r["tokens"]), f"{r['step_s']:.2f}",
            f"{r['rollout_s']:.2f}", f"{r['stats_s']:.2f}", f"{r['update_s']:.2f}",
            f"{r['s_per_1k_tokens']:.2f}", f"{r['stats_peak_mib']:.0f}",
            f"{r['full_logits_mib']:.0f}", f"{r['step_peak_mib']:.0f}",
        ]
        for r in rows
    ]  # fmt: skip
    print(
        _common.table(
            [
                "method",
                "G",
                "L",
                "response tokens",
                "step (s)",
                "rollout (s)",
                "statistics (s)",
                "update (s)",
                "s / 1k tokens",
                "stats peak (MiB)",
                "full logits (MiB)",
                "step peak RSS (MiB)",
            ],
            table,
            "lrrrrrrrrrrr",
        )  # fmt: skip
    )
    if a.json:
        Path(a.json).write_text(json.dumps({"machine": info, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
