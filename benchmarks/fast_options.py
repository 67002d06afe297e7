"""The options for a faster toy-cot-long cell, each measured against today's code on the same
inputs (docs/benchmarks.md, "Study throughput": which were taken and why).

The toy-cot-long warm start (3-layer 128-wide Llama, cached under ~/.cache/ict) or, with --quick,
the tiny random test model. Every option is timed against its baseline alternately, best of
--repeats, in process CPU time (robust to other jobs on a shared machine) and wall time:

  decode B=32       the training rollout (4 prompts x 8, 60-token budget): HF `generate` via
                    ict.generation against ict.fast's static-cache loop; same samples?
  decode B=256      one held-out evaluation chunk (4 problems x 64): the same two
  eval batch        one evaluation's 32 x 64 samples as 8 chunks of 256 (today) against one
                    batch of 2048 (the fast loop both times)
  seeds batched     K cells' rollouts as one batch of K x 32 rows against K batches of 32 (the
                    fast loop): an upper bound of what training K seeds in one process with
                    batched weights could save in the rollout
  forward           the statistics pass's forward (no gradient, 32 rows) and one update
                    micro-batch's forward + backward (16 rows), the model's own forward against a
                    lean one (fused q/k/v and gate/up, F.rms_norm; same values)
  prompt encoding   tokenising the step's 4 prompts and building their masks (what a cached
                    encoding would save per step)
  compile           (--compile) torch.compile of the static-cache decoding step: compile time
                    and per-step CPU time against the eager step

  OMP_NUM_THREADS=1 python benchmarks/fast_options.py --repeats 5
  python benchmarks/fast_options.py --quick
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).parent))
import _common  # noqa: E402


def timed(fn):
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def compare(name, baseline, option, repeats, detail=""):
    """Alternate baseline and option `repeats` times after a warm-up each; best-of times."""
    baseline(), option()
    best = {"baseline": [float("inf")] * 2, "option": [float("inf")] * 2}
    for _ in range(repeats):
        for key, fn in (("baseline", baseline), ("option", option)):
            _, wall, cpu = timed(fn)
            best[key] = [min(best[key][0], wall), min(best[key][1], cpu)]
    return {
        "option": name, "detail": detail,
        "baseline_wall_s": best["baseline"][0], "option_wall_s": best["option"][0],
        "baseline_cpu_s": best["baseline"][1], "option_cpu_s": best["option"][1],
        "speedup_cpu": best["baseline"][1] / max(best["option"][1], 1e-12),
        "speedup_wall": best["baseline"][0] / max(best["option"][0], 1e-12),
    }  # fmt: skip


def lean_hidden(lean, ids, attn):
    """Final hidden states of full sequences with LeanLlama's fused pieces (differentiable)."""
    x = F.embedding(ids, lean.embed)
    positions = (attn.long().cumsum(-1) - 1).clamp(min=0)
    cos, sin = lean._rope(positions, x.dtype)
    cos, sin = cos[:, None], sin[:, None]
    cols = torch.arange(ids.shape[1])
    mask = lean._mask(attn, cols, cols)
    for layer in lean.layers:
        qkv, o, gate_up, down, n1, n2 = lean._weights(layer)
        h = F.rms_norm(x, (x.shape[-1],), n1, lean.eps)
        q, k, v = lean._split_qkv(h, qkv)
        q, k = lean._rotate(q, cos, sin), lean._rotate(k, cos, sin)
        a = F.scaled_dot_product_attention(
            q, lean._repeat_kv(k), lean._repeat_kv(v), attn_mask=mask, scale=lean.scaling
        )
        x = x + F.linear(a.transpose(1, 2).reshape(x.shape[0], x.shape[1], -1), o)
        x = x + lean._mlp(F.rms_norm(x, (x.shape[-1],), n2, lean.eps), gate_up, down)
    return F.rms_norm(x, (x.shape[-1],), lean.norm, lean.eps)


def load(quick: bool):
    if quick:
        from ict.testing import tiny_model_and_tokenizer

        model, tok = tiny_model_and_tokenizer(seed=0)
        return model, tok, "tiny random Llama (ict.testing)"
    from ict.compare.presets import get_preset
    from ict.compare.warm_start import warm_start

    preset = get_preset("toy-cot-long")
    model, tok, info = warm_start(preset.task, preset.warm)
    return model, tok, f"toy-cot-long warm start ({info['path']})"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=None, help="default 3; quick 1")
    parser.add_argument("--seeds", type=int, default=8, help="K of 'seeds batched' (default 8)")
    parser.add_argument("--compile", action="store_true", help="also time torch.compile")
    parser.add_argument("--json", default=None)
    a = parser.parse_args(argv)
    torch.set_num_threads(1)
    repeats = a.repeats or (1 if a.quick else 3)
    budget = 12 if a.quick else 60
    from ict.data.toy.cot import prompt as cot_prompt
    from ict.fast import fast_path
    from ict.fast.generate import decode, eos_of
    from ict.fast.llama import LeanLlama
    from ict.generation import generate
    from ict.train.logprobs import final_hidden

    model, tok, label = load(a.quick)
    info = _common.machine()
    prompts = [cot_prompt(1234 + 977 * i, 4321 + 1301 * i) for i in range(64)]
    results = []

    def sample(fast, count, n, batch):
        with fast_path(fast):
            return generate(model, tok, prompts[:count], num_samples=n, max_new_tokens=budget,
                            batch_size=batch, seed=3)  # fmt: skip

    for rows, (count, n) in (("32", (4, 8)), ("256", (4, 64))):
        same = torch.equal(
            sample(False, count, n, count * n).input_ids,
            sample(True, count, n, count * n).input_ids,
        )
        r = compare(
            f"decode B={rows}", lambda c=count, k=n: sample(False, c, k, c * k),
            lambda c=count, k=n: sample(True, c, k, c * k), repeats,
            f"HF generate -> ict.fast; same samples: {same}",
        )  # fmt: skip
        results.append({**r, "same_samples": same})
    results.append(
        compare(
            "eval batch",
            lambda: sample(True, 32, 64, 256),
            lambda: sample(True, 32, 64, 2048),
            max(1, repeats - 1),
            "32 x 64 samples: 8 batches of 256 -> 1 batch of 2048 (fast loop)",
        )  # fmt: skip
    )
    tok.padding_side = "left"
    enc = tok(prompts[:4], return_tensors="pt", padding=True, add_special_tokens=False)
    lean = LeanLlama(model)
    k = a.seeds
    ids_k = enc["input_ids"].repeat(k, 1)
    attn_k = enc["attention_mask"].repeat(k, 1)
    kw = dict(temperature=1.0, top_p=1.0, max_new_tokens=budget, pad_id=tok.pad_token_id,
              eos_ids=eos_of(model))  # fmt: skip
    results.append(
        compare(
            "seeds batched",
            lambda: [
                decode(lean, enc["input_ids"], enc["attention_mask"], 8, **kw) for _ in range(k)
            ],
            lambda: decode(lean, ids_k, attn_k, 8, **kw),
            repeats,
            f"{k} rollouts of 32 rows -> one of {32 * k} rows (fast loop)",
        )  # fmt: skip
    )
    rollout = sample(False, 4, 8, 32)
    ids, attn = rollout.input_ids, rollout.attention_mask
    with torch.no_grad():
        diff = (final_hidden(model, ids, attn) - lean_hidden(lean, ids, attn))[attn.bool()]
    results.append(
        compare(
            "forward, no gradient",
            lambda: _no_grad(final_hidden, model, ids, attn),
            lambda: _no_grad(lambda m, i, t: lean_hidden(lean, i, t), model, ids, attn),
            repeats,
            f"32 rows x {ids.shape[1]} columns; max |difference| {float(diff.abs().max()):.1e}",
        )  # fmt: skip
    )
    half = slice(0, 16)
    results.append(
        compare(
            "forward + backward",
            lambda: final_hidden(model, ids[half], attn[half]).square().mean().backward(),
            lambda: lean_hidden(lean, ids[half], attn[half]).square().mean().backward(),
            repeats,
            "16 rows (one update micro-batch)",
        )  # fmt: skip
    )
    model.zero_grad(set_to_none=True)

    def encode():
        tok(prompts[:4], return_tensors="pt", padding=True, add_special_tokens=False)

    _, wall, cpu = timed(lambda: [encode() for _ in range(100)])
    step_cpu = results[0]["option_cpu_s"]
    results.append({
        "option": "prompt encoding", "detail": "4 prompts, per step", "option_cpu_s": cpu / 100,
        "option_wall_s": wall / 100, "share_of_fast_rollout": cpu / 100 / step_cpu,
    })  # fmt: skip
    if a.compile:
        results.append(compile_option(lean, enc, kw, budget))
    print(f"machine: {_common.describe_machine(info)}; model: {label}\n")
    headers = ["option", "what", "today CPU s", "option CPU s", "speed-up (CPU)",
               "speed-up (wall)"]  # fmt: skip
    rows = []
    for r in results:
        if "baseline_cpu_s" in r:
            rows.append([r["option"], r["detail"], f"{r['baseline_cpu_s']:.4f}",
                         f"{r['option_cpu_s']:.4f}", f"{r['speedup_cpu']:.2f}x",
                         f"{r['speedup_wall']:.2f}x"])  # fmt: skip
        else:
            rows.append([r["option"], r["detail"], "", f"{r['option_cpu_s']:.5f}", "", ""])
    print(_common.table(headers, rows, "ll" + "r" * 4))
    if a.json:
        Path(a.json).write_text(json.dumps({"machine": info, "model": label, "results": results},
                                           indent=1))  # fmt: skip
    return 0


def _no_grad(fn, *args):
    with torch.no_grad():
        return fn(*args)


def compile_option(lean, enc, kw, budget) -> dict:
    """torch.compile of one static-cache decoding step (the whole cache as keys, masked, so the
    shapes stay fixed): compile seconds and per-step CPU time against the eager step."""
    state = lean.start(enc["input_ids"], enc["attention_mask"], samples=8, max_new_tokens=budget)
    n = state.valid.shape[0]
    kv, rep, hd = lean.kv_heads, lean.heads // lean.kv_heads, lean.head_dim

    def step(tokens, col, position, valid, caches):
        x = F.embedding(tokens, lean.embed)[:, None]
        cos, sin = state.cos[position][:, None, None], state.sin[position][:, None, None]
        mask = valid[:, None, None, :]
        for (qkv, o, gate_up, down, n1, n2), (kc, vc) in zip(state.weights, caches, strict=True):
            h = F.rms_norm(x, (x.shape[-1],), n1, lean.eps)
            q, k, v = lean._split_qkv(h, qkv)
            q, k = lean._rotate(q, cos, sin), lean._rotate(k, cos, sin)
            kc.index_copy_(2, col.view(1), k)
            vc.index_copy_(2, col.view(1), v)
            att = F.scaled_dot_product_attention(
                q.reshape(n, kv, rep, hd), kc, vc, attn_mask=mask, scale=lean.scaling
            )
            x = x + F.linear(att.reshape(n, 1, -1), o)
            x = x + lean._mlp(F.rms_norm(x, (x.shape[-1],), n2, lean.eps), gate_up, down)
        return F.linear(F.rms_norm(x[:, 0], (x.shape[-1],), lean.norm, lean.eps), lean.lm_head)

    tokens = torch.zeros(n, dtype=torch.long)
    start_col = state.column

    def run(fn):
        for j in range(budget):
            col = start_col + j
            state.valid[:, col] = True
            fn(tokens, torch.tensor(col), state.position + j, state.valid, state.caches)

    with torch.no_grad():
        run(step)
        _, _, eager = timed(lambda: run(step))
        compiled = torch.compile(step, dynamic=False)
        _, compile_wall, _ = timed(lambda: compiled(tokens, torch.tensor(start_col),
                                                    state.position, state.valid, state.caches))  # fmt: skip
        run(compiled)
        _, _, fast = timed(lambda: run(compiled))
    return {
        "option": "compile", "detail": f"decoding step, B={n}; compile {compile_wall:.0f} s wall",
        "baseline_cpu_s": eager, "option_cpu_s": fast, "baseline_wall_s": float("nan"),
        "option_wall_s": float("nan"), "speedup_cpu": eager / fast, "speedup_wall": float("nan"),
        "compile_s": compile_wall,
    }  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
