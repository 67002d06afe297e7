"""The paper's score in the shapes of a real training step, against its floor, by thread count.

What the native step's statistics pass runs (`ict.train.old_policy.old_policy_pass`), on the
hidden states it has: `token_stats_from_hidden(reference="group_position")` over the valid
response positions of B x G rollouts, against the floor `token_logprobs_from_hidden` on the same
hidden states - one LM-head pass + log-softmax at the same positions, the old log-probs' kernel
(every RL step pays it). Layout as in a step: B groups of G rows, a prompt of --prompt-length
columns (not scored), responses of ragged length uniform in [L/4, L] (or exactly L with
--equal-lengths). Heads: `smollm2` (V = 49152, D = 576, SmolLM2-135M's sizes) and `qwen`
(V = 151936, D = 896, Qwen2.5-0.5B's), random weights (the cost depends on the shapes only).

Variants:
  fixed     as shipped: on CPU the elementwise block math runs on one thread, the LM-head matmul
            on all of them (`ict.stats.logit_sources.elementwise_on_one_thread`);
  unfixed   as before that change: every op on all threads (the context made a no-op).
Each (head, dtype, threads, variant) runs in its own process with OMP_NUM_THREADS = threads; the
floor and the statistics are timed alternately, best of --repeats after a warm-up; wall and CPU
(process) time. Peak extra memory of the statistics call (fixed, 1 thread): peak RSS minus RSS
before it, glibc told to mmap every allocation >= 64 KiB so that RSS follows live tensors, as a
share of the full float32 logits (positions x V x 4 bytes).

  OMP_NUM_THREADS=1 python benchmarks/stats_in_step.py                  # both heads, fp32 + bf16
  python benchmarks/stats_in_step.py --quick                            # small shapes, seconds
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import _common  # noqa: E402

HEADS = {"smollm2": (49152, 576), "qwen": (151936, 896), "tiny": (4096, 64)}


def inputs(head, dtype_name, B, G, P, L, equal, seed=0):
    """hidden [B*G, P+L, D], weight [V, D] (dtype), tokens [B*G, P+L], mask, group ids [B*G]."""
    import torch

    V, D = HEADS[head]
    g = torch.Generator().manual_seed(seed)
    N, T = B * G, P + L
    dtype = getattr(torch, dtype_name)
    hidden = torch.randn(N, T, D, generator=g).to(dtype)
    weight = (torch.randn(V, D, generator=g) * 0.05).to(dtype)
    tokens = torch.randint(0, V, (N, T), generator=g)
    mask = torch.zeros(N, T, dtype=torch.bool)
    for r in range(N):
        n = L if equal else int(torch.randint(max(1, L // 4), L + 1, (1,), generator=g))
        mask[r, P : P + n] = True
    groups = torch.arange(B).repeat_interleave(G)
    return hidden, weight, tokens, mask, groups


def _rss(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(field)


def child(a) -> dict:
    """One (head, dtype, threads, variant) in this process: times (and memory) as a dict."""
    import torch

    torch.set_num_threads(a.threads)
    import ict.stats.compute as compute
    from ict.head import LogitHead
    from ict.stats import token_stats_from_hidden
    from ict.train.logprobs import token_logprobs_from_hidden

    if a.variant == "unfixed":
        compute.elementwise_on_one_thread = lambda device: contextlib.nullcontext()
    hidden, weight, tokens, mask, groups = inputs(
        a.head, a.dtype, a.prompts, a.generations, a.prompt_length, a.length, a.equal_lengths
    )

    @torch.no_grad()
    def stats():
        return token_stats_from_hidden(
            hidden, LogitHead(weight), tokens, mask, reference="group_position",
            group_ids=groups, chunk_size=a.chunk_size,
        )  # fmt: skip

    @torch.no_grad()
    def floor():
        return token_logprobs_from_hidden(
            hidden, LogitHead(weight), tokens, mask, chunk_size=a.chunk_size
        )

    out = {"positions": int(mask.sum()), "torch_threads": torch.get_num_threads()}
    if a.memory:
        stats()
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        base = _rss("VmRSS")
        res = stats()
        out["extra_bytes"] = _rss("VmHWM") - base
        del res
        return out
    stats(), floor()
    best = {}
    for _ in range(a.repeats):
        for name, fn in (("floor", floor), ("stats", stats)):
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            w, c = time.perf_counter() - t0, time.process_time() - c0
            bw, bc = best.get(name, (float("inf"), float("inf")))
            best[name] = (min(bw, w), min(bc, c))
    out.update(
        floor_s=best["floor"][0], stats_s=best["stats"][0], floor_cpu_s=best["floor"][1],
        stats_cpu_s=best["stats"][1], ratio=best["stats"][0] / best["floor"][0],
        cpu_ratio=best["stats"][1] / best["floor"][1],
    )  # fmt: skip
    return out


def run_child(a, head, dtype, threads, variant, memory=False) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    if memory:
        env["MALLOC_MMAP_THRESHOLD_"] = "65536"
    cmd = [
        sys.executable, __file__, "--child", "--head", head, "--dtype", dtype, "--threads",
        str(threads), "--variant", variant, "--prompts", str(a.prompts), "--generations",
        str(a.generations), "--prompt-length", str(a.prompt_length), "--length", str(a.length),
        "--repeats", str(a.repeats), "--chunk-size", str(a.chunk_size),
    ]  # fmt: skip
    cmd += ["--equal-lengths"] if a.equal_lengths else []
    cmd += ["--memory"] if memory else []
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"{head} {dtype} {threads} {variant} failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="tiny head, small batch")
    parser.add_argument("--heads", nargs="+", default=None, choices=sorted(HEADS))
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--thread-counts", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--variants", nargs="+", default=["fixed", "unfixed"])
    parser.add_argument("--prompts", type=int, default=8, help="B")
    parser.add_argument("--generations", type=int, default=8, help="G")
    parser.add_argument("--prompt-length", type=int, default=16)
    parser.add_argument("--length", type=int, default=32, help="L: longest response")
    parser.add_argument("--equal-lengths", action="store_true")
    parser.add_argument("--chunk-size", type=int, default=1024, help="TrainConfig default")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=None)
    # child mode
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--head", default="smollm2", help=argparse.SUPPRESS)
    parser.add_argument("--dtype", default="float32", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--variant", default="fixed", help=argparse.SUPPRESS)
    parser.add_argument("--memory", action="store_true", help=argparse.SUPPRESS)
    a = parser.parse_args(argv)
    if a.child:
        print(json.dumps(child(a)))
        return 0
    if a.quick:
        a.heads = a.heads or ["tiny"]
        a.prompts, a.generations, a.length, a.repeats = 2, 4, 8, 1
        a.dtypes = a.dtypes if a.dtypes != ["float32", "bfloat16"] else ["float32"]
    heads = a.heads or ["smollm2", "qwen"]
    info = _common.machine()
    rows, results = [], []
    for head in heads:
        for dtype in a.dtypes:
            mem = run_child(a, head, dtype, 1, "fixed", memory=True)
            full = mem["positions"] * HEADS[head][0] * 4
            for threads in a.thread_counts:
                for variant in a.variants:
                    r = run_child(a, head, dtype, threads, variant)
                    r.update(head=head, dtype=dtype, threads=threads, variant=variant)
                    r.update(extra_mib=mem["extra_bytes"] / 2**20, full_logits_mib=full / 2**20)
                    results.append(r)
                    print(
                        f"{head} {dtype} {threads}t {variant}: {r['ratio']:.2f}x",
                        file=sys.stderr,
                        flush=True,
                    )
                    rows.append(
                        [
                            f"{head} (V={HEADS[head][0]}, D={HEADS[head][1]})", dtype, threads,
                            variant, r["positions"], f"{r['floor_s']:.3f}", f"{r['stats_s']:.3f}",
                            f"{r['ratio']:.2f}x", f"{r['cpu_ratio']:.2f}x",
                            f"{r['extra_mib']:.0f} ({r['extra_mib'] / r['full_logits_mib']:.1%})",
                        ]
                    )  # fmt: skip
    info_end = _common.machine()
    print(
        f"B x G = {a.prompts} x {a.generations}, responses "
        f"{'exactly' if a.equal_lengths else 'uniform in [L/4, L], L ='} {a.length} tokens, "
        f"chunk {a.chunk_size}, best of {a.repeats}; {_common.describe_machine(info)}; load "
        f"average {info_end['load_average'][0]:.2f} at the end"
    )
    print(
        _common.table(
            [
                "head",
                "dtype",
                "threads",
                "variant",
                "positions",
                "floor (s)",
                "score (s)",
                "score / floor",
                "CPU time ratio",
                "peak extra MiB (/ full logits)",
            ],
            rows,
            "llrlrrrrrr",
        )  # fmt: skip
    )
    if a.json:
        Path(a.json).write_text(json.dumps({"machine": info, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
