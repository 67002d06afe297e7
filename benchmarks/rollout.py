"""The native rollout against a bare `model.generate` on the same batch.

B prompts x G samples, every response exactly --max-new-tokens long (EOS suppressed until then by
min_new_tokens), temperature 1, top_p 1, top_k 0. Variants, timed alternately, best of --repeats
after one warm-up each (wall and CPU time):
  bare          `model.generate` on the B x G repeated, left-padded prompts (what TRL runs)
  bare_static   the same with `cache_implementation="static"` (a pre-allocated KV cache, no
                torch.compile)
  ict           `ict.generation.generate(share_prompt=False)`: the wrapper alone (tokenising,
                per-batch seeding, response masks, decoding)
  ict_shared    `ict.generation.generate` as the trainer calls it (share_prompt=True: each
                prompt's first P - 1 tokens run once and their KV cache is repeated G times)
Ratios are against `bare`.

  OMP_NUM_THREADS=1 python benchmarks/rollout.py               # SmolLM2, 4 x 8, 32 tokens
  python benchmarks/rollout.py --quick                         # tiny model
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
import _common  # noqa: E402

VARIANTS = ("bare", "bare_static", "ict", "ict_shared")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--prompts", type=int, default=None, help="B (default 4; quick 2)")
    parser.add_argument("--generations", type=int, default=None, help="G (default 8; quick 4)")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="default 32; quick 8")
    parser.add_argument("--repeats", type=int, default=None, help="default 2; quick 1")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--json", default=None)
    a = parser.parse_args(argv)
    q = a.quick
    B, G = a.prompts or (2 if q else 4), a.generations or (4 if q else 8)
    L, repeats = a.max_new_tokens or (8 if q else 32), a.repeats or (1 if q else 2)
    torch.set_num_threads(a.threads)

    from ict.generation import generate

    model, tokenizer, name = _common.load_model(q)
    _common.force_length(model, tokenizer, L)
    texts = _common.prompts(tokenizer, B)
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    tokenizer.padding_side = side
    ids = enc["input_ids"].repeat_interleave(G, 0)
    attn = enc["attention_mask"].repeat_interleave(G, 0)
    sampling = dict(
        do_sample=True, temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=L,
        pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip

    @torch.no_grad()
    def bare(static=False):
        torch.manual_seed(0)
        extra = {"cache_implementation": "static"} if static else {}
        out = model.generate(input_ids=ids, attention_mask=attn, **sampling, **extra)
        return int(out.shape[1] - ids.shape[1]) * ids.shape[0]

    def ours(share):
        r = generate(
            model, tokenizer, texts, num_samples=G, temperature=1.0, top_p=1.0, max_new_tokens=L,
            batch_size=B * G, seed=0, share_prompt=share,
        )  # fmt: skip
        return int(r.response_mask.sum())

    fns = {
        "bare": bare,
        "bare_static": lambda: bare(static=True),
        "ict": lambda: ours(False),
        "ict_shared": lambda: ours(True),
    }
    fns = {k: fns[k] for k in a.variants}
    info = _common.machine()
    tokens = {k: f() for k, f in fns.items()}  # warm-up, and the token counts
    best = {k: (float("inf"), float("inf")) for k in fns}
    for _ in range(repeats):
        for k, f in fns.items():
            t0, c0 = time.perf_counter(), time.process_time()
            f()
            w, c = time.perf_counter() - t0, time.process_time() - c0
            best[k] = (min(best[k][0], w), min(best[k][1], c))
    info_end = _common.machine()
    base = best.get("bare", next(iter(best.values())))
    rows = [
        [k, tokens[k], f"{w:.2f}", f"{w / base[0]:.2f}x", f"{c:.2f}", f"{c / base[1]:.2f}x"]
        for k, (w, c) in best.items()
    ]
    prompt_lens = enc["attention_mask"].sum(1).tolist()
    print(
        f"{name}: {B} prompts ({min(prompt_lens)}-{max(prompt_lens)} tokens) x {G} samples, "
        f"{L} new tokens each, best of {repeats}; {_common.describe_machine(info)}; load average "
        f"{info_end['load_average'][0]:.2f} at the end"
    )
    print(
        _common.table(
            ["variant", "new tokens", "wall (s)", "/ bare", "CPU (s)", "CPU / bare"], rows
        )
    )
    if a.json:
        result = {"machine": info, "model": name, "B": B, "G": G, "L": L, "best": best}
        result["tokens"] = tokens
        Path(a.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
