"""What the policy update costs, GRPO as today against GRPO and ICT with the update's savings.

One rollout batch is built once; then, for each variant, the same initial weights and optimizer
state are restored and `ict.train.update.update_policy` is timed (best of --repeats, variants
interleaved so that load changes hit them alike). The savings (src/ict/train/update.py):
  (1) skip rows with advantage exactly 0 (no KL / entropy term reads them);
  (2) LM head + log-softmax only at the positions the loss reads;
  (3) each micro-batch's forward/backward stops at the last column any of its rows needs.
Variants:
  grpo_today    GRPO (every valid token), none of (1)-(3)
  grpo_1        GRPO with (1)
  grpo_123      GRPO with (1)-(3)
  ict_123       the paper's ICT selection after its dense warm-up (`ict.step.select_method`, sparse)
                with (1)-(3)
Also the statistics pass (`token_stats_from_hidden`, reference "group_position") against the floor
(one chunked LM-head matmul over the valid positions + one log-softmax) on the same hidden states,
and how many passes over the LM head it makes (rows through the head / valid positions).

Batches:
  default          embedded SmolLM2-135M-Instruct, B x G prompts sampled from the default task and
                   scored by the real verifier (zero-advantage groups occur naturally)
  --qwen-shape     a random-weight model with Qwen2.5-0.5B's sizes (V = 151936, D = 896, tied head;
                   --num-layers to cut its depth) and a synthetic rollout: random prompt and
                   response tokens, ragged lengths, synthetic rewards with --constant-groups of the
                   B groups all-equal (no download, no tokenizer)
  --tiny           the offline tiny test model, synthetic rollout: a smoke test in seconds

Usage:
  OMP_NUM_THREADS=2 python benchmarks/train_step.py --autocast off
  OMP_NUM_THREADS=2 python benchmarks/train_step.py --qwen-shape --num-layers 4 --autocast off
  python benchmarks/train_step.py --tiny
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import sys
import time

import torch

VARIANTS = {  # name: (method, skip_rows, head_on_loss_only, stop_at_last)
    "grpo_today": ("grpo", False, False, False),
    "grpo_1": ("grpo", True, False, False),
    "grpo_123": ("grpo", True, True, True),
    "ict_123": ("ict", True, True, True),
}


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def qwen_shaped_model(num_layers: int, seed: int):
    """Random weights with Qwen2.5-0.5B's sizes (tied LM head); nothing is downloaded."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=151936,
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=num_layers,
        num_attention_heads=14,
        num_key_value_heads=2,
        max_position_embeddings=32768,
        rope_theta=1000000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        attn_implementation="sdpa",
    )
    return Qwen2ForCausalLM(config).eval()


def synthetic_rollout(B, G, prompt_len, max_new, vocab, constant_groups, seed, *, pad_id=0):
    """A Rollout of random tokens: prompts of ragged length (left-padded to prompt_len), responses
    of ragged length 1..max_new (right-padded); rewards 0/1 with `constant_groups` of the B groups
    all-equal (spread over the batch) and the others mixed."""
    from ict.generation import Rollout

    g = torch.Generator().manual_seed(seed)
    N, T = B * G, prompt_len + max_new
    ids = torch.full((N, T), pad_id, dtype=torch.long)
    attn = torch.zeros(N, T, dtype=torch.long)
    resp = torch.zeros(N, T, dtype=torch.bool)
    for i in range(B):
        p = int(torch.randint(prompt_len // 2, prompt_len + 1, (1,), generator=g))
        prompt = torch.randint(1, vocab, (p,), generator=g)
        for j in range(G):
            r = i * G + j
            n = int(torch.randint(max(1, max_new // 4), max_new + 1, (1,), generator=g))
            ids[r, prompt_len - p : prompt_len] = prompt
            ids[r, prompt_len : prompt_len + n] = torch.randint(1, vocab, (n,), generator=g)
            attn[r, prompt_len - p : prompt_len + n] = 1
            resp[r, prompt_len : prompt_len + n] = True
    constant = set(torch.linspace(0, B - 1, constant_groups).round().long().tolist()[:B])
    constant = constant if constant_groups else set()
    rewards = torch.zeros(N)
    for i in range(B):
        if i in constant:
            rewards[i * G : (i + 1) * G] = float(i % 2)
        else:
            r = (torch.rand(G, generator=g) < 0.5).float()
            r[0], r[1] = 1.0, 0.0  # mixed for sure
            rewards[i * G : (i + 1) * G] = r
    rollout = Rollout(
        prompt_index=torch.arange(B).repeat_interleave(G),
        input_ids=ids,
        attention_mask=attn,
        response_mask=resp,
        prompt_length=prompt_len,
        texts=[""] * N,
        prompts=[""] * B,
    )
    return rollout, rewards


class HeadRows(torch.overrides.TorchFunctionMode):
    """Counts the rows multiplied by the LM-head weight (F.linear / matmul / mm / addmm with it or
    a view of it such as weight.t())."""

    def __init__(self, weight):
        super().__init__()
        self.ptr, self.numel, self.rows = weight.data_ptr(), weight.numel(), 0

    def is_head(self, a) -> bool:
        return isinstance(a, torch.Tensor) and a.numel() == self.numel and a.data_ptr() == self.ptr

    FUNCS = {
        torch.nn.functional.linear,
        torch.matmul,
        torch.mm,
        torch.addmm,
        torch.Tensor.matmul,
        torch.Tensor.__matmul__,
        torch.Tensor.mm,
    }

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self.FUNCS and any(self.is_head(a) for a in args):
            other = next(
                (a for a in args if isinstance(a, torch.Tensor) and not self.is_head(a)), None
            )
            if other is not None:
                self.rows += other.numel() // other.shape[-1]
        return func(*args, **kwargs)


def stats_vs_floor(policy, rollout, plan, repeats):
    """Seconds of the statistics pass and of the floor on the same hidden states; head passes."""
    from ict.stats import token_stats_from_hidden
    from ict.train.old_policy import rollout_hidden

    cfg, method, device = plan.config, plan.method, policy.device
    hidden = rollout_hidden(policy.model, rollout, plan, policy)
    weight, bias = policy.head.weight, policy.head.bias
    ids = rollout.input_ids.to(device)
    mask = rollout.response_mask.to(device).bool()
    groups = rollout.prompt_index.to(device)
    n_valid = int(mask.sum())
    chunk = cfg.stats_chunk_size

    @torch.no_grad()
    def stats():
        return token_stats_from_hidden(
            hidden,
            policy.head,
            ids,
            mask,
            temperature=cfg.temperature,
            reference=method.reference,
            group_ids=groups,
            chunk_size=chunk,
        )

    @torch.no_grad()
    def floor():
        h = hidden[mask].to(weight.dtype)
        total = 0.0
        for s in range(0, h.shape[0], chunk):
            z = torch.nn.functional.linear(h[s : s + chunk], weight, bias)
            total += float(torch.log_softmax(z.float(), -1)[:, 0].sum())
        return total

    counter = HeadRows(weight)
    with counter:
        stats()  # warm-up, counted
    passes = counter.rows / max(n_valid, 1)
    best = {"stats": float("inf"), "floor": float("inf")}
    floor()
    for _ in range(repeats):
        for name, fn in (("floor", floor), ("stats", stats)):
            sync(device)
            t0 = time.perf_counter()
            fn()
            sync(device)
            best[name] = min(best[name], time.perf_counter() - t0)
    return {
        "valid_positions": n_valid,
        "stats_s": best["stats"],
        "floor_s": best["floor"],
        "ratio": best["stats"] / best["floor"],
        "head_passes": passes,
        "reference": method.reference,
    }


def head_flop_share(model, rollout) -> float:
    """LM head's share of the dense forward matmul FLOPs per token (2 x params; attention's
    sequence-length term left out, it is small at these lengths): head / (body + head)."""
    head = model.get_output_embeddings().weight
    emb = model.get_input_embeddings().weight
    body = sum(p.numel() for p in model.parameters() if p.dim() >= 2) - emb.numel()
    if head is not emb:
        body -= head.numel()
    return head.numel() / (body + head.numel())


def rollout_batch(args, base, plan):
    """The benchmark's model and one rollout batch (see the module docstring's "Batches"):
    (model, its label, Rollout, rewards [B*G], where the rewards come from, set-up seconds)."""
    B, G = args.prompts_per_step, args.num_generations
    device = plan.device
    t0 = time.perf_counter()
    if args.tiny or args.qwen_shape:
        if args.tiny:
            from ict.testing import tiny_model_and_tokenizer

            model, _ = tiny_model_and_tokenizer(seed=args.seed)
            name = "tiny (random weights)"
        else:
            model = qwen_shaped_model(args.num_layers, args.seed)
            name = f"Qwen2.5-0.5B-shaped, random weights, {args.num_layers} of 24 layers"
        model.to(device)
        constant = B // 2 if args.constant_groups is None else args.constant_groups
        rollout, rewards = synthetic_rollout(
            B,
            G,
            min(args.prompt_length, 16) if args.tiny else args.prompt_length,
            min(args.max_new_tokens, 12) if args.tiny else args.max_new_tokens,
            model.config.vocab_size,
            constant,
            args.seed,
        )
        rewards_from = f"synthetic ({constant} of {B} groups all-equal by construction)"
    else:
        from ict.models import load_model_and_tokenizer
        from ict.train.problems import PromptSampler, load_problems
        from ict.train.rollout import collect_rollout

        model, tokenizer = load_model_and_tokenizer(base.model, device=device)
        name = "SmolLM2-135M-Instruct (embedded)"
        problems = load_problems(base)
        picked = PromptSampler(len(problems), plan.seeds.prompts).next(B)
        batch, _ = collect_rollout(model, tokenizer, [problems[i] for i in picked], plan, step=1)
        rollout, rewards = batch.rollout, batch.rewards
        rewards_from = "the task's verifier"
    setup_s = time.perf_counter() - t0  # model load + rollout
    return model, name, rollout, rewards, rewards_from, setup_s


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument("--tiny", action="store_true", help="offline tiny model, synthetic batch")
    kind.add_argument(
        "--qwen-shape",
        action="store_true",
        help="random-weight model with Qwen2.5-0.5B's sizes, synthetic batch",
    )
    parser.add_argument("--num-layers", type=int, default=24, help="--qwen-shape: depth")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--prompts-per-step", type=int, default=8)
    parser.add_argument("--num-generations", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--prompt-length", type=int, default=64, help="synthetic batches")
    parser.add_argument(
        "--constant-groups",
        type=int,
        default=None,
        help="synthetic batches: groups with all-equal rewards (default: half)",
    )
    parser.add_argument("--micro-batch-size", type=int, default=8)
    parser.add_argument(
        "--autocast",
        default="auto",
        choices=["auto", "bf16", "fp16", "off"],
        help="auto: bf16 only where the device computes it natively, else float32 (ict.precision)",
    )
    parser.add_argument("--repeats", type=int, default=None, help="best of (default 3 tiny, 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args(argv)
    repeats = args.repeats or (3 if args.tiny else 2)

    from ict.step import StepInputs, select_method
    from ict.train import TrainConfig
    from ict.train.plan import RunPlan
    from ict.train.schedule import LRSchedule, make_optimizer
    from ict.train.step import PolicyContext, TrainingStep
    from ict.train.update import UpdateSwitches

    base = TrainConfig(
        device=args.device,
        prompts_per_step=args.prompts_per_step,
        num_generations=args.num_generations,
        max_new_tokens=args.max_new_tokens,
        micro_batch_size=args.micro_batch_size,
        autocast=args.autocast,
        seed=args.seed,
        progress=False,
        plots=False,
        max_steps=1,
    )
    plan = RunPlan.from_config(base.replace(method="ict"))  # the one statistics pass: ICT's
    device, precision = plan.device, plan.precision
    print(precision.describe(), file=sys.stderr)

    B, G = args.prompts_per_step, args.num_generations
    model, name, rollout, rewards, rewards_from, setup_s = rollout_batch(args, base, plan)
    print(f"model + rollout: {setup_s:.1f} s", file=sys.stderr, flush=True)
    policy = PolicyContext.of(plan, model)
    ict_step = TrainingStep(plan, policy)
    advantages, _ = ict_step.advantages(rollout, rewards)
    equal_groups = int((rewards.view(B, G).std(-1) == 0).sum())

    # one statistics pass (no gradient, initial weights): old log-probs and the ICT selection of
    # the first step past its dense warm-up
    scored = ict_step.select_on_rollout(
        rollout, advantages, step=plan.method.dense_warmup_steps + 1
    )
    mask, ict_selected = scored.mask, scored.selection.own
    inputs = StepInputs(mask, scored.stats, advantages, rollout.input_ids.to(device))
    stats_floor = stats_vs_floor(policy, rollout, plan, repeats)

    initial = copy.deepcopy(model.state_dict())
    optimizer = make_optimizer(model, base)  # the trainer's AdamW
    initial_opt = copy.deepcopy(optimizer.state_dict())

    def run(variant):
        method_name, skip, head, stop = VARIANTS[variant]
        variant_plan = RunPlan.from_config(base.replace(method=method_name))
        cfg = variant_plan.config
        selected = (
            ict_selected
            if method_name == "ict"
            else select_method(variant_plan.method, cfg, inputs, seed=0, micro_batch_size=8)
        )
        model.load_state_dict(initial)
        optimizer.load_state_dict(initial_opt)
        scheduler = LRSchedule(
            optimizer, warmup_steps=cfg.warmup_steps, kind=cfg.lr_scheduler, max_steps=1
        )
        service = TrainingStep(variant_plan, policy, optimizer, scheduler)
        variant_scored = dataclasses.replace(  # the variant's selection and its normaliser
            scored,
            selection=dataclasses.replace(scored.selection, selected=selected),
            counts=variant_plan.step_plan.counts(scored.mask, selected),
        )
        sync(device)
        t = time.perf_counter()
        out = service.update_on_selection(
            variant_scored,
            step=1,
            switches=UpdateSwitches(skip_rows=skip, head_on_loss_only=head, stop_at_last=stop),
        )
        sync(device)
        seconds = time.perf_counter() - t
        print(f"{variant}: {seconds:.2f} s", file=sys.stderr, flush=True)
        return seconds, {
            "rows_run": out.get("update/rows_run", 0),
            "rows": out.get("update/rows", 0),
            "tokens": out.get("update/tokens", 0),
            "loss_tokens": int((mask & selected.to(device)).sum()),
            "grad_norm": out.get("grad_norm"),
        }

    run("ict_123")  # warm-up (allocator, kernels, optimizer state code paths)
    results = {v: {"seconds": float("inf")} for v in VARIANTS}
    for _ in range(repeats):
        for variant in VARIANTS:
            seconds, info = run(variant)
            r = results[variant]
            r.update(info)
            r["seconds"] = min(r["seconds"], seconds)
    today, skip1 = results["grpo_today"]["seconds"], results["grpo_1"]["seconds"]
    for r in results.values():
        r["vs_grpo_today"] = r["seconds"] / today
        r["vs_grpo_1"] = r["seconds"] / skip1
    model.load_state_dict(initial)

    summary = {
        "model": name,
        "device": str(device),
        "precision": precision.as_dict(),
        "torch_threads": torch.get_num_threads(),
        "batch": {
            "prompts": B,
            "generations": G,
            "sequences": len(rollout),
            "tokens": int(rollout.attention_mask.sum()),
            "response_tokens": int(mask.sum()),
            "ict_selected_tokens": int((mask & ict_selected).sum()),
            "all_equal_groups": equal_groups,
            "rewards": rewards_from,
            "setup_s": setup_s,
        },
        "lm_head_flop_share": head_flop_share(model, rollout),
        "variants": results,
        "stats_vs_floor": stats_floor,
        "targets": {
            "ict_123_vs_grpo_today_le_0.6": results["ict_123"]["vs_grpo_today"] <= 0.6,
            "ict_123_vs_grpo_1_le_0.75": results["ict_123"]["vs_grpo_1"] <= 0.75,
            "stats_vs_floor_le_1.5": stats_floor["ratio"] <= 1.5,
            "stats_one_head_pass": stats_floor["head_passes"] <= 1.0 + 1e-9,
        },
    }
    b = summary["batch"]
    print(
        f"{name} on {device}, autocast {args.autocast} -> {precision.name}, "
        f"torch threads {torch.get_num_threads()}, best of {repeats}"
    )
    print(
        f"batch {B} x {G} = {b['sequences']} sequences, {b['tokens']} tokens "
        f"({b['response_tokens']} response, ICT selects {b['ict_selected_tokens']}); rewards: "
        f"{rewards_from}; {equal_groups} of {B} groups all-equal (advantage 0); "
        f"LM head {summary['lm_head_flop_share']:.0%} of the forward matmul FLOPs per token"
    )
    print(
        "| variant | update (s) | / GRPO today | / GRPO (1) | rows run | tokens run | loss tokens |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for variant, r in results.items():
        print(
            f"| {variant} | {r['seconds']:.3f} | {r['vs_grpo_today']:.2f}x | "
            f"{r['vs_grpo_1']:.2f}x | {r['rows_run']}/{r['rows']} | {r['tokens']} | "
            f"{r['loss_tokens']} |"
        )
    s = stats_floor
    print(
        f"statistics pass ({s['reference']}) {s['stats_s']:.3f} s vs floor {s['floor_s']:.3f} s "
        f"over {s['valid_positions']} valid positions: {s['ratio']:.2f}x (target <= 1.5), "
        f"{s['head_passes']:.2f} LM-head passes (target 1)"
    )
    for target, met in summary["targets"].items():
        print(f"{target}: {'met' if met else 'MISSED'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
