"""Time and peak memory of the token statistics on a Qwen2.5-0.5B-sized LM head (V=151936, D=896).

Cases (all start from hidden states [N, D] and the head weight, so they compare like with like):
  (a) naive     full logits, log_softmax, softmax, every statistic and JS to the batch mean at once
  (b) logits    full logits, then ict.stats.token_stats(logits)            (reference batch_mean)
  (c) hidden    ict.stats.token_stats_from_hidden                          (reference batch_mean)
  (c1) hidden   ict.stats.token_stats_from_hidden, reference previous_token (one pass)
  (c2) hidden   ict.stats.token_stats_from_hidden, reference group_position (the paper's score:
                one pass, groups of G = --group rows, default 4)
  (b2) logits   full logits, then token_stats(logits, reference="group_position")
  (d) floor     LM-head matmul + one log_softmax (what any log-prob computation pays)
  (e) matmul    LM-head matmul alone
Each case runs in its own subprocess. Time: best of --repeats after one warm-up; the CPU-time
column (process time, best of the same runs) is steadier than wall time on a shared machine. Peak extra
memory: after one warm-up call (steady state, as in a training loop), on CUDA
torch.cuda.max_memory_allocated minus what is allocated before the call; on CPU the process's peak
RSS (VmHWM, reset through /proc/self/clear_refs) minus its RSS before the call, in a separate run
with glibc told to mmap every allocation >= 64 KiB (MALLOC_MMAP_THRESHOLD_) so that RSS follows the
live tensors (freed ones are returned at once). Reported relative to the full float32 logits tensor, N x V x 4 bytes.

    OMP_NUM_THREADS=2 python benchmarks/token_stats.py            # N in {1024, 4096}
    OMP_NUM_THREADS=2 python benchmarks/token_stats.py --n 1024 --dtype bfloat16
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import time

V, D = 151936, 896
CASES = {
    "a": "(a) naive full materialisation",
    "b": "(b) token_stats(logits) incl. matmul",
    "c": "(c) token_stats_from_hidden",
    "c1": "(c1) token_stats_from_hidden, previous_token",
    "c2": "(c2) token_stats_from_hidden, group_position",
    "b2": "(b2) token_stats(logits), group_position",
    "d": "(d) floor: matmul + log_softmax",
    "e": "(e) matmul alone",
}


def _inputs(n, dtype, device):
    import torch

    g = torch.Generator().manual_seed(0)
    T = 256 if n % 256 == 0 else n  # rows n // T: at n = 1024, 4 responses of 256 tokens
    hidden = (torch.randn(n // T, T, D, generator=g)).to(dtype).to(device)
    weight = (torch.randn(V, D, generator=g) * 0.05).to(dtype).to(device)
    tokens = torch.randint(0, V, (n // T, T), generator=g).to(device)
    mask = torch.ones(n // T, T, dtype=torch.bool, device=device)
    return hidden, weight, tokens, mask


def _naive(hidden, weight, tokens, mask):
    import torch

    logits = (hidden[mask] @ weight.T).float()
    logp = torch.log_softmax(logits, -1)
    p = logp.exp()
    entropy = -(p * logp).nan_to_num().sum(-1)
    renyi2 = -torch.log((p * p).sum(-1))
    logprob = logp.gather(1, tokens[mask][:, None]).squeeze(1)
    r = p.mean(0)
    m = (p + r) / 2
    h_m = -torch.special.xlogy(m, m).sum(-1)
    h_r = -torch.special.xlogy(r, r).sum()
    js = (h_m - entropy / 2 - h_r / 2).clamp(0, 0.6931471805599453)
    return entropy, renyi2, logprob, js


GROUP = 4  # rows per group for the group_position cases (set by --group)


def _case_fn(case):
    import torch

    from ict.head import LogitHead
    from ict.stats import token_stats, token_stats_from_hidden

    if case == "a":
        return _naive
    if case == "b":
        return lambda h, w, tok, m: token_stats(h @ w.T, tok, m)
    if case == "c":
        return lambda h, w, tok, m: token_stats_from_hidden(h, LogitHead(w), tok, m)
    if case == "c1":
        return lambda h, w, tok, m: token_stats_from_hidden(
            h, LogitHead(w), tok, m, reference="previous_token"
        )
    if case in ("c2", "b2"):

        def group_position(h, w, tok, m):
            gid = torch.arange(h.shape[0], device=h.device) // GROUP
            kw = {"reference": "group_position", "group_ids": gid}
            if case == "b2":
                return token_stats(h @ w.T, tok, m, **kw)
            return token_stats_from_hidden(h, LogitHead(w), tok, m, **kw)

        return group_position
    if case == "d":
        return lambda h, w, tok, m: torch.log_softmax((h @ w.T).float(), -1)
    if case == "e":
        return lambda h, w, tok, m: h @ w.T
    raise ValueError(case)


def _rss_bytes(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(field)


def _child(case, n, dtype_name, device, mode, repeats, group):
    """Runs in a subprocess: prints one JSON line."""
    import torch

    global GROUP
    GROUP = group

    dtype = getattr(torch, dtype_name)
    hidden, weight, tokens, mask = _inputs(n, dtype, device)
    fn = _case_fn(case)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    with torch.no_grad():
        if mode == "memory":
            fn(hidden, weight, tokens, mask)  # warm-up: steady state, as in a training loop
            if device == "cuda":
                sync()
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                out = fn(hidden, weight, tokens, mask)
                sync()
                extra = torch.cuda.max_memory_allocated() - base
            else:
                ctypes.CDLL("libc.so.6").malloc_trim(0)
                with open("/proc/self/clear_refs", "w") as f:
                    f.write("5")  # reset the peak-RSS high-water mark
                base = _rss_bytes("VmRSS")
                out = fn(hidden, weight, tokens, mask)
                extra = _rss_bytes("VmHWM") - base
            del out
            print(json.dumps({"extra_bytes": extra}))
        else:
            fn(hidden, weight, tokens, mask)  # warm-up
            times, cpu = [], []
            for _ in range(repeats):
                sync()
                t0, c0 = time.perf_counter(), time.process_time()
                fn(hidden, weight, tokens, mask)
                sync()
                times.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
            print(json.dumps({"seconds": min(times), "all": times, "cpu_seconds": min(cpu)}))


def _run(case, n, dtype, device, mode, repeats, group):
    env = dict(os.environ)
    if mode == "memory":
        env["MALLOC_MMAP_THRESHOLD_"] = "65536"
    cmd = [sys.executable, __file__, "--child", case, "--n", str(n), "--dtype", dtype,
           "--device", device, "--mode", mode, "--repeats", str(repeats), "--group", str(group)]  # fmt: skip
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"case {case} n={n} {mode} failed:\n{res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--n", type=int, nargs="+", default=[1024, 4096], help="valid positions N")
    ap.add_argument(
        "--dtype",
        default="auto",
        choices=["auto", "float32", "bfloat16", "float16"],
        help="auto: bfloat16 where the device computes bf16 natively, else float32 "
        "(ict.precision.choose_precision)",
    )
    ap.add_argument("--device", default="cuda" if _cuda() else "cpu")
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--group", type=int, default=4, help="rows per group (G) for c2/b2")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="time", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return _child(
            args.child, args.n[0], args.dtype, args.device, args.mode, args.repeats, args.group
        )

    if args.dtype == "auto":
        from ict.precision import choose_precision

        choice = choose_precision("auto", args.device)
        args.dtype = "bfloat16" if choice.name == "bf16" else "float32"
        print(f"# dtype auto -> {args.dtype}: {choice.reason}")
    print(
        f"# V={V} D={D} dtype={args.dtype} device={args.device} G={args.group} (c2, b2) "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}"
    )
    for n in args.n:
        full = n * V * 4
        rows = {}
        for case in args.cases:
            t = _run(case, n, args.dtype, args.device, "time", args.repeats, args.group)
            m = _run(case, n, args.dtype, args.device, "memory", 1, args.group)
            rows[case] = (t["seconds"], m["extra_bytes"], t["cpu_seconds"])
            print(f"  n={n} {case}: {t['seconds']:.3f} s (runs {', '.join(f'{x:.2f}' for x in t['all'])}), "
                  f"peak extra {m['extra_bytes'] / 2**20:.0f} MiB", file=sys.stderr)  # fmt: skip
        floor, _, floor_cpu = rows.get("d", (float("nan"),) * 3)
        print(f"\nN = {n}, full float32 logits = {full / 2**20:.0f} MiB\n")
        print(
            "| case | time (s) | time / (d) | CPU time / (d) | peak extra memory (MiB) | / full logits |"
        )
        print("|---|---:|---:|---:|---:|---:|")
        for case, (sec, extra, cpu) in rows.items():
            print(
                f"| {CASES[case]} | {sec:.2f} | {sec / floor:.2f}x | {cpu / floor_cpu:.2f}x | "
                f"{extra / 2**20:.0f} | {100 * extra / full:.1f}% |"
            )
        sys.stdout.flush()


def _cuda():
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


if __name__ == "__main__":
    sys.exit(main())
