"""The cost of bf16 (and fp16) matmuls against float32 on this machine: the benchmark behind
`ict.precision.choose_precision` (autocast `auto` picks bf16 only where it is fast).

Times `[M, K] @ [K, N]` (default 512x576 @ 576x1536, a SmolLM2-135M MLP projection of one
micro-batch) with one thread by default, and prints each dtype's median seconds, its ratio to
float32, and what `choose_precision("auto", device)` decides here, with its reason.

Usage:
  OMP_NUM_THREADS=1 python benchmarks/precision.py                  # CPU, one thread, 5 repeats
  python benchmarks/precision.py --device cuda --repeats 20
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def time_matmul(dtype: torch.dtype, shape, device: torch.device, repeats: int) -> float:
    """Median seconds of one `a @ b` in `dtype` (one untimed warm-up call first)."""
    m, k, n = shape
    g = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=g).to(device=device, dtype=dtype)
    b = torch.randn(k, n, generator=g).to(device=device, dtype=dtype)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    a @ b
    sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch threads on CPU (default 1)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--shape", type=int, nargs=3, default=[512, 576, 1536], metavar=("M", "K", "N")
    )
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16", "float16"])
    args = parser.parse_args(argv)

    from ict.precision import choose_precision

    device = torch.device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(args.threads)
    choice = choose_precision("auto", device)
    m, k, n = args.shape
    print(
        f"# {m}x{k} @ {k}x{n}, device {device}, torch {torch.__version__}, "
        f"threads {torch.get_num_threads()}, cpu capability {torch.backends.cpu.get_cpu_capability()}"
    )
    print(f"# autocast auto -> {choice.name}: {choice.reason}")
    base = time_matmul(torch.float32, args.shape, device, args.repeats)
    for name in args.dtypes:
        seconds = time_matmul(getattr(torch, name), args.shape, device, args.repeats)
        print(f"{name:9s} {seconds:9.5f} s  {seconds / base:6.2f}x float32")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
