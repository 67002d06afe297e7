"""Shared pieces of the step benchmarks: model, prompts, reward, machine description, tables.

Every benchmark that trains uses the same ingredients so that its numbers compare:
  model     the embedded SmolLM2-135M-Instruct (float32) or, for --quick, the offline tiny Llama of
            `ict.testing` (random weights);
  prompts   the default task's first B training prompts, rendered once with the model's chat
            template (~180 tokens for SmolLM2) and then given to every trainer as plain text;
  reward    `toy_reward`, a deterministic hash of the response text in [0, 1): it differs inside
            every group, so no group has all-equal rewards (no row is skipped for advantage 0 and
            both trainers do the full work);
  lengths   every response is exactly `max_new_tokens` long: EOS is suppressed until then
            (`min_new_tokens` = `max_new_tokens`), so both sides process the same number of tokens.
"""

from __future__ import annotations

import copy
import os
import platform
import resource
import time

import torch


def toy_reward(completions, **kwargs):
    """[len(completions)] floats in [0, 1): a hash of each completion's text (TRL's signature)."""
    return [(sum(map(ord, c)) % 7) / 7 for c in completions]


def toy_response_reward(response: str) -> float:
    """`toy_reward` for one response (the native trainer's Problem.reward signature)."""
    return toy_reward([response])[0]


def trl_settings(args, out_dir, *, bf16: bool, max_steps: int) -> dict:
    """The GRPOConfig keyword arguments of the TRL step benchmarks (step_vs_trl.py,
    trl_one_forward.py; docs/benchmarks.md section 1): one group of `args.generations` rows per
    micro-batch, `args.prompts` micro-batches per optimizer step, responses forced to
    `args.max_new_tokens` tokens, temperature 1, AdamW at `args.lr` (betas 0.9/0.99), beta 0,
    clip 0.2/0.28, one iteration, no gradient checkpointing, dropout off, CPU, no logging or
    saving, seed `args.seed`."""
    return dict(
        output_dir=str(out_dir), per_device_train_batch_size=args.generations,
        gradient_accumulation_steps=args.prompts, num_generations=args.generations,
        max_completion_length=args.max_new_tokens,
        generation_kwargs={"min_new_tokens": args.max_new_tokens}, temperature=1.0, top_p=1.0,
        top_k=0, learning_rate=args.lr, lr_scheduler_type="constant", warmup_steps=0,
        weight_decay=0.0, adam_beta1=0.9, adam_beta2=0.99, adam_epsilon=1e-8, max_grad_norm=1.0,
        beta=0.0, epsilon=0.2, epsilon_high=0.28, num_iterations=1, gradient_checkpointing=False,
        disable_dropout=True, bf16=bf16, use_cpu=True, report_to=[], logging_strategy="no",
        disable_tqdm=True, log_level="error", save_strategy="no", dataloader_num_workers=0,
        seed=args.seed, max_steps=max_steps,
    )  # fmt: skip


def load_model(quick: bool, seed: int = 0, layers: int | None = None):
    """(model, tokenizer, name): float32 SmolLM2-135M-Instruct, or the tiny test model (quick).

    layers: keep only the first `layers` decoder layers (same embeddings, head and vocabulary; a
    cheaper body for sweeps that would not fit the time otherwise)."""
    if quick:
        from ict.testing import tiny_model_and_tokenizer

        model, tokenizer = tiny_model_and_tokenizer(seed=seed)
        name = "tiny Llama (ict.testing, random weights)"
    else:
        from ict.models import drop_gguf_marker, load_model_and_tokenizer

        model, tokenizer = load_model_and_tokenizer(None, dtype=torch.float32)
        # the weights are dequantised floats; TRL's Trainer refuses a model still marked quantized
        drop_gguf_marker(model)
        model.is_quantized = False
        name = "SmolLM2-135M-Instruct (embedded, float32)"
    if layers is not None and layers < model.config.num_hidden_layers:
        full = model.config.num_hidden_layers
        model.model.layers = model.model.layers[:layers]
        model.config.num_hidden_layers = layers
        if getattr(model.config, "layer_types", None):
            model.config.layer_types = model.config.layer_types[:layers]
        name += f", first {layers} of {full} layers"
    from ict.models import ensure_pad_token

    ensure_pad_token(tokenizer)
    return model.eval(), tokenizer, name


def eos_ids(model, tokenizer) -> list[int]:
    """Every token id that ends a response (the tokenizer's and the generation config's EOS)."""
    ids = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    gen = getattr(model.generation_config, "eos_token_id", None)
    ids |= set(gen if isinstance(gen, list) else [] if gen is None else [gen])
    return sorted(ids)


def force_length(model, tokenizer, max_new_tokens: int) -> None:
    """Make `model.generate` (with the model's generation config) never end a response before
    `max_new_tokens`: min_new_tokens suppresses every EOS id until then."""
    model.generation_config.eos_token_id = eos_ids(model, tokenizer)
    model.generation_config.min_new_tokens = max_new_tokens


def prompts(tokenizer, count: int) -> list[str]:
    """The default task's first `count` training prompts, rendered (chat template if any)."""
    from ict.train import TrainConfig
    from ict.train.plan import sampling_of
    from ict.train.problems import load_problems

    config = TrainConfig()
    problems = load_problems(config)[:count]
    return sampling_of(config).render(tokenizer, [p.prompt for p in problems])


def fresh(model):
    """An independent copy of `model` (same initial weights for every trainer)."""
    return copy.deepcopy(model)


def machine() -> dict:
    """CPU, threads, torch version and the load average when called (1, 5, 15 min)."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def describe_machine(info: dict) -> str:
    return (
        f"{info['cpu']}, {info['cores']} cores, torch {info['torch']}, "
        f"{info['torch_threads']} torch thread(s), load average {info['load_average'][0]:.2f} at "
        f"{info['time']}"
    )


def peak_rss_mib() -> float:
    """This process's peak resident set size so far, MiB (Linux ru_maxrss is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def table(headers: list[str], rows: list[list], align: str | None = None) -> str:
    """A markdown table; align: one char per column, 'l' or 'r' (default: first l, others r)."""
    align = align or "l" + "r" * (len(headers) - 1)
    out = ["| " + " | ".join(headers) + " |"]
    out.append("|" + "|".join("---" if a == "l" else "---:" for a in align) + "|")
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)
