"""Every phase of a training step and of a held-out evaluation against this machine's floor.

Measures the machine (matmul peak at each phase's dtype: a 2048^3 GEMM, best of --repeats; the
GEMM rate at the model's own width: [1024 tokens, D] x [D, I]; memory bandwidth: a 256 MiB copy,
bytes read + written), runs real `ict.train.Trainer` steps (GRPO) and one held-out evaluation
through each evaluation path (the batched one, `EvalSettings.sampler` "batched", and the chunked
one before it), counts each phase's FLOPs and bytes from the model config and the shapes the
phase actually ran (captured from `ict.generation.generate`, the rollout and the batched
decoding's traces), and prints each phase's achieved fraction of the peak, of the GEMM rate at
the model's width and of the bandwidth: a roofline table.

Settings: the toy-cot-explore cell (its rollouts; evaluation 512 held-out problems x 32 samples
at temperature 1.5, the study's) and the default run (the embedded SmolLM2-135M-Instruct, 8 x 8
rollouts; evaluation 64 x 16).

  python benchmarks/roofline.py                         # toy cell and the default run (SmolLM2)
  python benchmarks/roofline.py --eval-paths batched    # the batched evaluation only
  python benchmarks/roofline.py --breakdown             # + the evaluation's time by kind of work
  python benchmarks/roofline.py --models toy-cot        # the small-model cell only (a minute)
  python benchmarks/roofline.py --quick                 # tiny random model (the test runs this)
  python benchmarks/roofline.py --device cuda           # the same on a GPU (scripts/gpu_check.py)

Counting (matmuls only; elementwise work, softmax and sampling are left out, so a phase dominated
by them shows a low fraction):
  forward FLOPs per token = 2 x (q, k, v, o, gate, up, down weights) + 4 x heads x head_dim x
      context (QK^T and AV over the keys the kernel computes, padding included) + 2 x D x V where
      the LM head runs;
  backward = 2 x forward (gradients of inputs and weights), so the update is 3 x its forward;
  decoding computes every row of a batch until the batch's longest response ends (the batched
      path: the rows each step ran, finished rows having left); a shared prompt
      (ict's share_prompt) runs once per group; the statistics pass runs the head twice over
      response positions (scores, then old log-probs);
  bytes = every weight read once per forward call (decoding: once per step; the backward reads
      them again and writes their gradients) + every linear layer's input read and output written
      once + the key/value cache read once per decoding step.
Times are process CPU time on a CPU (one intra-op thread: what this process computed, robust to
other jobs on a shared machine; wall time after a synchronize on a GPU): the machine's numbers
best of --repeats; each phase's the sum over --steps steps after one warm-up step (rollout: the
`generate` call; statistics: `old_policy_pass`; update: `update_policy`; evaluation: one
`training_evaluation(config).run` of the setting's eval_size x eval_num_samples per path, the
problems loaded outside the clock).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
import _common  # noqa: E402

MODELS = ("toy-cot", "smollm2")


# ---------------------------------------------------------------------------------------------
# the machine
# ---------------------------------------------------------------------------------------------
def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def clock(device: str) -> float:
    """Seconds: process CPU time on a CPU (what this one-thread process computed, whatever else
    the machine runs), wall time after a synchronize on a GPU."""
    if device.startswith("cuda"):
        sync(device)
        return time.perf_counter()
    return time.process_time()


def best_time(fn, device: str, repeats: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = clock(device)
        fn()
        best = min(best, clock(device) - t0)
    return best


def matmul_rate(m: int, k: int, n: int, dtype, device: str, repeats: int) -> float:
    """FLOP/s of an [m, k] x [k, n] GEMM (best of `repeats`)."""
    a = torch.randn(m, k, device=device).to(dtype)
    b = torch.randn(k, n, device=device).to(dtype)
    reps = max(1, int(2e9 // (2 * m * k * n)))  # about 2 GFLOP per timing

    def run():
        for _ in range(reps):
            torch.mm(a, b)

    return 2 * m * k * n * reps / best_time(run, device, repeats)


def bandwidth(device: str, repeats: int, mib: int = 256) -> float:
    """Bytes/s of copying a `mib` MiB float32 tensor (read + write)."""
    src = torch.ones(mib * 2**20 // 4, device=device)
    dst = torch.empty_like(src)
    return 2 * src.numel() * 4 / best_time(lambda: dst.copy_(src), device, repeats)


# ---------------------------------------------------------------------------------------------
# FLOPs and bytes from the config
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Shape:
    """What the counts need from a causal LM's config."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    bytes_per: int  # bytes per weight / activation element

    @classmethod
    def of(cls, model) -> Shape:
        c = model.config
        hd = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        return cls(
            c.hidden_size, c.num_hidden_layers, c.num_attention_heads,
            getattr(c, "num_key_value_heads", None) or c.num_attention_heads, hd,
            c.intermediate_size, c.vocab_size, next(model.parameters()).element_size(),
        )  # fmt: skip

    @property
    def linear_macs(self) -> int:
        """Multiply-adds per token of one pass through every decoder layer's linear layers."""
        d, q, kv = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim
        return self.layers * (d * q + 2 * d * kv + q * d + 3 * d * self.intermediate)

    @property
    def layer_weight_bytes(self) -> int:
        return self.linear_macs * self.bytes_per

    @property
    def head_bytes(self) -> int:
        return self.hidden * self.vocab * self.bytes_per

    @property
    def activation_bytes_per_token(self) -> int:
        """Inputs read and outputs written by every linear layer, per token."""
        d, q, kv, i = (
            self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim,
            self.intermediate,
        )  # fmt: skip
        per_layer = (d + q + 2 * kv) + (q + d) + (d + 2 * i) + (i + d)
        return self.layers * per_layer * self.bytes_per

    def attention_flops(self, context: int) -> int:
        return 4 * self.layers * self.heads * self.head_dim * context

    def forward(self, tokens: int, context_sum: int, head_rows: int) -> tuple[float, float]:
        """(FLOPs, bytes) of one forward call over `tokens` tokens whose attention contexts sum
        to `context_sum`, with the LM head on `head_rows` rows."""
        flops = 2 * self.linear_macs * tokens + self.attention_flops(context_sum)
        flops += 2 * self.hidden * self.vocab * head_rows
        kv_bytes = 2 * self.layers * self.kv_heads * self.head_dim * self.bytes_per
        data = (
            self.layer_weight_bytes + (self.head_bytes if head_rows else 0)
            + self.activation_bytes_per_token * tokens + kv_bytes * tokens
        )  # fmt: skip
        return float(flops), float(data)

    def decode_step(self, rows: int, context: int) -> tuple[float, float]:
        """(FLOPs, bytes) of one decoding step of `rows` rows over `context` cached keys."""
        flops, data = self.forward(rows, rows * context, rows)
        kv_read = 2 * self.layers * self.kv_heads * self.head_dim * context * rows
        return flops, data + kv_read * self.bytes_per


@dataclass
class Generation:
    """One `ict.generation.generate` call's shapes: rows N, prompts U, prompt width P, response
    widths of its batches (each batch decodes until its longest row ends)."""

    rows: int
    prompts: int
    prompt_width: int
    widths: list[int]
    batch_rows: list[int]


def generation_cost(shape: Shape, g: Generation) -> tuple[float, float]:
    """(FLOPs, bytes) of a generate call: each prompt's first P - 1 tokens once, then every step
    of every batch over all its rows."""
    p = g.prompt_width
    flops, data = 0.0, 0.0
    if p > 1:
        f, d = shape.forward(g.prompts * (p - 1), g.prompts * (p - 1) * p // 2, 0)
        flops, data = flops + f, data + d
    for width, rows in zip(g.widths, g.batch_rows, strict=True):
        for j in range(width):
            f, d = shape.decode_step(rows, p + j)
            flops, data = flops + f, data + d
    return flops, data


def trace_cost(shape: Shape, trace) -> tuple[float, float]:
    """(FLOPs, bytes) of a batched evaluation's decoding (an ict.fast.batched.DecodeTrace): each
    prompt's first P - 1 tokens once, then every step over the rows it ran (finished rows leave)
    and the cache columns they attended to."""
    p = trace.prompt_width
    flops, data = 0.0, 0.0
    if p > 1:
        flops, data = shape.forward(trace.prompts * (p - 1), trace.prompts * (p - 1) * p // 2, 0)
    for rows, columns in zip(trace.rows, trace.columns, strict=True):
        f, d = shape.decode_step(rows, columns)
        flops, data = flops + f, data + d
    return flops, data


def sequence_cost(shape, rows, groups, prompt, width, head_rows, passes=1):
    """(FLOPs, bytes) of a full forward over `rows` rows: `groups` shared prompts of `prompt`
    columns (run once each), then `width` response columns per row; attention over every key
    column the kernel sees (a masked kernel computes them all); `passes` = 3: forward +
    backward."""
    tokens = groups * prompt + rows * width
    context = groups * prompt * prompt + rows * width * (prompt + width)
    flops, data = shape.forward(tokens, context, head_rows)
    return passes * flops, passes * data


# ---------------------------------------------------------------------------------------------
# running the phases
# ---------------------------------------------------------------------------------------------
class Clocked:
    """Wrap `owner.attr` so that each call's seconds (`clock`) land in `self.calls[name]`."""

    def __init__(self, device: str):
        self.device, self.calls, self._undo = device, {}, []

    def wrap(self, owner, attr: str, name: str, after=None):
        original = getattr(owner, attr)

        def timed(*a, **k):
            t0 = clock(self.device)
            out = original(*a, **k)
            self.calls.setdefault(name, []).append(clock(self.device) - t0)
            if after is not None:
                after(a, k, out)
            return out

        setattr(owner, attr, timed)
        self._undo.append((owner, attr, original))

    def restore(self):
        for owner, attr, original in reversed(self._undo):
            setattr(owner, attr, original)


def generation_shapes(log: list):
    """`after` hook for ict.generation.generate: each call's shapes into `log`."""

    def after(args, kw, out):
        n = out.input_ids.shape[0]
        samples = kw.get("num_samples", 1)
        per = max(1, kw.get("batch_size", 32) // samples) * samples
        lengths = out.response_lengths.tolist()
        widths = [max(lengths[i : i + per]) for i in range(0, n, per)]
        rows = [len(lengths[i : i + per]) for i in range(0, n, per)]
        log.append(Generation(n, len(args[2]), out.prompt_length, widths, rows))

    return after


SMOLLM2_135M = dict(
    hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
    num_key_value_heads=3, vocab_size=49152, max_position_embeddings=8192, rope_theta=100000.0,
    rms_norm_eps=1e-5, tie_word_embeddings=True,
)  # fmt: skip


def random_model(name: str):
    """(model, tokenizer) of the setting's shape with random weights and the character tokenizer
    of ict.testing padded to the vocabulary (no download, no cache: a GPU machine runs this)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from ict.testing import tiny_tokenizer

    if name == "toy-cot":
        from ict.compare.presets import get_preset
        from ict.compare.warm_start import new_warm_model

        return new_warm_model(get_preset("toy-cot").warm, 128)
    tokenizer = tiny_tokenizer(SMOLLM2_135M["vocab_size"])
    config = LlamaConfig(
        **SMOLLM2_135M, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def setting(name: str, quick: bool, device: str, random_weights: bool = False):
    """(model, tokenizer, TrainConfig overrides, label) of a roofline setting."""
    if quick:
        from ict.testing import tiny_model_and_tokenizer

        model, tokenizer = tiny_model_and_tokenizer(seed=0)
        train = dict(
            task="toy:cot", chat_template=False, stop=[], max_new_tokens=16,
            prompts_per_step=2, num_generations=4, generation_batch_size=64,
            micro_batch_size=8, eval_size=8, eval_num_samples=8,
        )  # fmt: skip
        return model, tokenizer, train, f"{name} (--quick: tiny random Llama)"
    if name == "toy-cot":
        from ict.compare.presets import get_preset
        from ict.compare.warm_start import warm_start

        preset = get_preset("toy-cot-explore")
        if random_weights:
            model, tokenizer = random_model(name)
        else:
            model, tokenizer, _ = warm_start(preset.task, preset.warm)
        keep = (
            "task", "chat_template", "stop", "max_new_tokens", "prompts_per_step",
            "num_generations", "generation_batch_size", "micro_batch_size", "mini_batch_size",
            "eval_size", "eval_num_samples", "temperature", "learning_rate",
        )  # fmt: skip
        train = {k: preset.train[k] for k in keep if k in preset.train}
        # the study's final evaluation: 512 held-out problems x 32 samples
        train.update(eval_size=preset.eval.size, eval_num_samples=preset.eval.n)
        weights = "random weights" if random_weights else "warm start"
        return model, tokenizer, train, f"toy-cot-explore cell (3-layer 128-wide Llama, {weights})"
    if random_weights:
        model, tokenizer = random_model(name)
        label = "SmolLM2-135M's shape, random weights"
    else:
        model, tokenizer, label = _common.load_model(False)
    return model, tokenizer, dict(eval_size=64, eval_num_samples=16), "default run: " + label


def run_evaluation(config, model, tokenizer, label, shape, path, device, gens):
    """(CPU seconds, FLOPs, bytes) of one held-out evaluation of `config` through `path`
    ("batched": ict.fast.batched, FLOPs from its traces; "chunked": ict.generation, FLOPs from
    the captured `generate` shapes in `gens`)."""
    from ict.eval import default_ks
    from ict.eval.backends import hf_sampler
    from ict.train.evaluation import training_evaluation

    samplers = []

    def factory(model, tokenizer, settings):
        samplers.append(hf_sampler(model, tokenizer, settings))
        return samplers[-1]

    sampler, dtype = ("batched", "bf16") if path == "bf16" else (path, "float32")
    evaluation = training_evaluation(
        config, sampler_factory=factory, sampler=sampler, dtype=dtype,
        k=default_ks(config.eval_num_samples),
    )  # fmt: skip
    evaluation.items()  # the problems load outside the clock
    gens[:] = []
    t0 = clock(device)
    result = evaluation.run(model, tokenizer, model_label=label)
    seconds = clock(device) - t0
    flops = data = 0.0
    costs = (
        [trace_cost(shape, t) for t in samplers[0].traces]
        if sampler == "batched"
        else [generation_cost(shape, g) for g in gens]
    )
    for f, d in costs:
        flops, data = flops + f, data + d
    if dtype == "bf16":  # weights and cache in 2 bytes
        data /= 2
    return seconds, flops, data, result


# torch ops by the kind of work they do in a decoding step (anything else: "other ops")
KINDS = {
    "matmuls (q/k/v, o, MLP, LM head)": ("aten::mm", "aten::addmm", "aten::bmm", "aten::linear"),
    "attention over the cache": ("scaled_dot_product",),
    "sampling (hash, softmax, cumulative sum, search)": (
        "aten::__rshift__", "aten::__lshift__", "aten::bitwise_", "aten::__xor__", "aten::__and__",
        "aten::__or__", "aten::_softmax", "aten::cumsum", "aten::searchsorted", "aten::nextafter",
        "aten::minimum", "aten::isin", "aten::argmax",
    ),
    "cache writes, row gathers, copies": (
        "aten::index", "aten::copy_", "aten::fill_", "aten::cat", "aten::empty", "aten::clone",
        "aten::_to_copy", "aten::embedding", "aten::index_select", "aten::nonzero",
    ),
    "norms, rotary, activation (elementwise)": (
        "aten::mul", "aten::add", "aten::silu", "aten::pow", "aten::mean", "aten::rsqrt",
        "aten::neg", "aten::where", "aten::_fused_rms_norm", "aten::div", "aten::sum",
    ),
}  # fmt: skip


def eval_breakdown(config, model, tokenizer, label) -> dict:
    """Where a batched evaluation's time goes: one more evaluation under torch.profiler, its ops'
    self times summed by kind (KINDS), the rest of the run ("outside torch ops": Python, dispatch,
    decoding texts, judging, the profiler's own cost). The profiler clocks wall time, so each
    kind's share of the run's wall time is scaled to its process CPU time (on a loaded machine
    the two differ). {kind: CPU seconds}, plus "total" (the profiled run's process CPU seconds)."""
    from torch.profiler import ProfilerActivity, profile

    from ict.eval import default_ks
    from ict.train.evaluation import training_evaluation

    evaluation = training_evaluation(
        config, sampler="batched", k=default_ks(config.eval_num_samples)
    )
    evaluation.items()
    t0, w0 = time.process_time(), time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        evaluation.run(model, tokenizer, model_label=label)
    total, wall = time.process_time() - t0, time.perf_counter() - w0
    out = dict.fromkeys([*KINDS, "other ops"], 0.0)
    for event in prof.key_averages():
        seconds = event.self_cpu_time_total / 1e6
        kind = next(
            (k for k, names in KINDS.items() if any(n in event.key for n in names)), "other ops"
        )
        out[kind] += seconds
    out["outside torch ops"] = max(0.0, wall - sum(out.values()))
    scale = total / max(wall, sum(out.values()), 1e-12)
    return {**{k: v * scale for k, v in out.items()}, "total": total}


def print_breakdown(name: str, breakdown: dict) -> None:
    total = breakdown["total"]
    rows = [
        [kind, f"{seconds:.2f}", f"{100 * seconds / total:.0f}%"]
        for kind, seconds in breakdown.items()
        if kind != "total"
    ]
    print(f"\nwhere the batched evaluation's time goes ({name}; one more run under torch.profiler, "
          f"{total:.1f} s of process CPU with the profiler's own cost):\n")  # fmt: skip
    print(_common.table(["kind of work", "CPU s", "share"], rows, "lrr"))


def run_setting(
    name, quick, device, steps, machine_rates, fast, autocast="off", random=False,
    eval_paths=("batched", "chunked"), breakdown=False,
):  # fmt: skip
    from ict.train import TrainConfig, Trainer
    from ict.train.problems import Problem, load_problems

    model, tokenizer, train, label = setting(name, quick, device, random)
    shape = Shape.of(model)
    weights = str(next(model.parameters()).dtype).replace("torch.", "")
    out = tempfile.mkdtemp(prefix="ict_roofline_")
    config = TrainConfig(
        **{
            **train, "method": "grpo", "max_steps": steps + 1, "device": device,
            "autocast": autocast, "save_every": 0, "log_samples_every": 0, "plots": False,
            "progress": False, "heldout_eval": False, "output_dir": out, "warmup_steps": 0,
            # the statistics pass as its own phase (on-policy, `one_forward` would run it inside
            # the update's forward: benchmarks/one_forward.py measures that)
            "one_forward": False,
        }
    )  # fmt: skip
    import contextlib

    import ict.generation as generation
    import ict.train.step as step_module
    import ict.train.trainer as trainer_module
    from ict.fast import fast_path

    gens: list[Generation] = []
    batches = []
    clocked = Clocked(device)
    # each name where its caller looks it up: generate (the rollout's and the evaluation's, both
    # through ict.generation.Sampling), the step's three phases (ict.train.trainer and the step
    # service ict.train.step bind them at import)
    clocked.wrap(generation, "generate", "generate", generation_shapes(gens))
    clocked.wrap(trainer_module, "collect_rollout", "collect",
                 lambda a, k, out: batches.append(out[0]))  # fmt: skip
    clocked.wrap(step_module, "old_policy_pass", "statistics")
    clocked.wrap(step_module, "update_policy", "update")
    ctx = fast_path() if fast else contextlib.nullcontext()
    try:
        with ctx:
            # the task's prompts with the hash reward of the step benchmarks: no all-equal group,
            # so every update does its full work (the held-out evaluation scores for real)
            problems = [
                Problem(p.prompt, _common.toy_response_reward) for p in load_problems(config)
            ]
            trainer = Trainer(config, model=model, tokenizer=tokenizer, problems=problems)
            rows = [trainer.train_step() for _ in range(steps + 1)]
            step_gens = list(gens)
            evaluations = {
                path: run_evaluation(
                    config, trainer.model, tokenizer, label, shape, path, device, gens
                )
                for path in eval_paths
            }
            where = eval_breakdown(config, trainer.model, tokenizer, label) if breakdown else None
        trainer.close()
    finally:
        clocked.restore()
    seconds = {k: v[1 : steps + 1] for k, v in clocked.calls.items()}  # the first step warms up
    rows, batches, step_gens = rows[1:], batches[1:], step_gens[1:]
    phases = {"rollout": [0.0, 0.0, 0.0], "statistics": [0.0, 0.0, 0.0], "update": [0.0, 0.0, 0.0]}
    for i, (r, batch, gen) in enumerate(zip(rows, batches, step_gens, strict=True)):
        ro = batch.rollout
        n, p = ro.input_ids.shape[0], ro.prompt_length
        g = config.num_generations if config.share_prompt else 1
        lengths = ro.response_lengths.tolist()
        width = ro.input_ids.shape[1] - p
        valid = sum(lengths)
        share = r.get("update/rows_run", n) / max(1, r.get("update/rows", n))
        counts = {
            "rollout": generation_cost(shape, gen),
            "statistics": sequence_cost(shape, n, n // g, p, width, 2 * valid),
            "update": tuple(
                x * share for x in sequence_cost(shape, n, n // g, p, width, valid, passes=3)
            ),
        }
        timers = {"rollout": "generate", "statistics": "statistics", "update": "update"}
        for phase, (f, d) in counts.items():
            t = seconds[timers[phase]][i]
            phases[phase] = [phases[phase][0] + t, phases[phase][1] + f, phases[phase][2] + d]
    for path, cost in evaluations.items():
        phases["evaluation" if path == "batched" else f"evaluation ({path})"] = list(cost[:3])
    # the statistics and update passes (autocast)
    passes = trainer.plan.precision.as_dict()["dtype"] or weights
    bw = machine_rates["bandwidth"]
    table = []
    for phase, (seconds, flops, data) in phases.items():
        dtype = passes if phase in ("statistics", "update") else weights
        dtype = "bfloat16" if phase == "evaluation (bf16)" else dtype
        peak = machine_rates["peak"][dtype]
        model_rate = machine_rates["model_gemm"][name][dtype]
        rate, bps = flops / max(seconds, 1e-12), data / max(seconds, 1e-12)
        intensity = flops / max(data, 1.0)
        ridge = peak / bw
        table.append(
            dict(
                phase=phase, dtype=dtype, seconds=seconds, gflop=flops / 1e9, mib=data / 2**20,
                gflop_s=rate / 1e9, peak_fraction=rate / peak, model_gemm_fraction=rate / model_rate,
                gb_s=bps / 1e9, bandwidth_fraction=bps / bw, intensity=intensity,
                bound="compute" if intensity > ridge else "memory",
            )
        )  # fmt: skip
    return dict(
        model=name, label=label, shape=shape.__dict__, steps=steps, fast=fast,
        eval=dict(
            problems=config.eval_size, samples=config.eval_num_samples,
            temperature=config.temperature, paths=list(eval_paths),
            per_problem={path: cost[3]["per_problem"] for path, cost in evaluations.items()},
            breakdown=where,
        ),
        phases=table,
    )  # fmt: skip


def print_table(result: dict) -> None:
    headers = [
        "phase", "dtype", "time (s)", "GFLOP", "MiB moved", "GFLOP/s", "% matmul peak",
        "% GEMM at model width", "GB/s", "% bandwidth", "FLOP/byte", "bound",
    ]  # fmt: skip
    rows = [
        [
            r["phase"], r["dtype"], f"{r['seconds']:.3f}", f"{r['gflop']:.2f}", f"{r['mib']:.0f}",
            f"{r['gflop_s']:.1f}", f"{100 * r['peak_fraction']:.1f}%",
            f"{100 * r['model_gemm_fraction']:.1f}%", f"{r['gb_s']:.2f}",
            f"{100 * r['bandwidth_fraction']:.1f}%", f"{r['intensity']:.1f}", r["bound"],
        ]
        for r in result["phases"]
    ]  # fmt: skip
    print(f"\n### {result['label']}{' (fast path)' if result['fast'] else ''}")
    print(
        f"{result['steps']} GRPO step(s) after one warm-up; evaluation "
        f"{result['eval']['problems']} problems x {result['eval']['samples']} samples at "
        f"temperature {result['eval']['temperature']} (batched path; chunked: the path before "
        f"it, through ict.generation)\n"
    )
    print(_common.table(headers, rows, "ll" + "r" * 9 + "l"))
    for r in result["phases"]:
        if r["phase"].startswith("evaluation"):
            print(
                f"{r['phase']}: {100 * r['model_gemm_fraction']:.1f}% of the {r['dtype']} GEMM "
                f"rate at the model's width"
            )
    print_pass_at_k(result["eval"]["per_problem"])
    if result["eval"]["breakdown"]:
        print_breakdown(result["model"], result["eval"]["breakdown"])


def print_pass_at_k(per_problem: dict) -> None:
    """pass@1 and pass@n of each evaluation path, and each path's difference from the batched
    float32 one, paired by problem (mean and a 95% Student-t interval over problems)."""
    import numpy as np
    from scipy import stats

    from ict.eval.metrics import pass_at_k_per_problem

    def per_k(per, k):
        (counts,) = per.values()
        return pass_at_k_per_problem(np.array(counts["n"]), np.array(counts["correct"]), k)

    n = next(iter(next(iter(per_problem.values())).values()))["n"][0]
    for k in sorted({1, n}):
        values = {path: per_k(per, k) for path, per in per_problem.items()}
        line = ", ".join(f"{path} {v.mean():.4f}" for path, v in values.items())
        print(f"pass@{k}: {line}")
        base = values.get("batched")
        for path, v in values.items():
            if path == "batched" or base is None:
                continue
            d = v - base
            half = stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d))
            print(
                f"  {path} - batched, paired over {len(d)} problems: {d.mean():+.4f} "
                f"[{d.mean() - half:+.4f}, {d.mean() + half:+.4f}]"
            )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument(
        "--steps", type=int, default=None, help="counted steps (default 3; quick 1)"
    )
    parser.add_argument("--repeats", type=int, default=None, help="machine timings (default 5)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--fast", action="store_true", help="with ict.fast's fast path on")
    parser.add_argument(
        "--autocast",
        default="off",
        help="of the statistics and update passes "
        "(TrainConfig.autocast: off | auto | bf16; default off)",
    )
    parser.add_argument(
        "--random-weights",
        action="store_true",
        help="each setting's shape with random weights (no warm start, no "
        "embedded model: what the GPU check runs)",
    )
    parser.add_argument(
        "--eval-paths", nargs="+", choices=("batched", "chunked", "bf16"),
        default=["batched", "chunked"],
        help="the evaluation paths measured: EvalSettings.sampler batched or chunked, or bf16 "
        "(batched with dtype bf16); default batched chunked",
    )  # fmt: skip
    parser.add_argument(
        "--breakdown", action="store_true",
        help="one more batched evaluation under torch.profiler: its time by kind of work",
    )  # fmt: skip
    parser.add_argument("--json", default=None)
    a = parser.parse_args(argv)
    steps = a.steps or (1 if a.quick else 3)
    repeats = a.repeats or (2 if a.quick else 5)
    info = _common.machine()
    dtypes = [torch.float32, torch.bfloat16]
    big = 512 if a.quick else 2048
    peak = {str(t).replace("torch.", ""): matmul_rate(big, big, big, t, a.device, repeats)
            for t in dtypes}  # fmt: skip
    widths = {"toy-cot": (128, 256), "smollm2": (576, 1536)}
    if a.quick:
        widths = {m: (32, 64) for m in MODELS}
    model_gemm = {
        m: {str(t).replace("torch.", ""): matmul_rate(1024, w[0], w[1], t, a.device, repeats)
            for t in dtypes}
        for m, w in widths.items() if m in a.models
    }  # fmt: skip
    rates = {"peak": peak, "model_gemm": model_gemm, "bandwidth": bandwidth(a.device, repeats)}
    print(f"machine: {_common.describe_machine(info)}, device {a.device}")
    print(
        "matmul peak (2048^3 GEMM): "
        + ", ".join(f"{k} {v / 1e9:.1f} GFLOP/s" for k, v in peak.items())
        + f"; memory bandwidth (256 MiB copy): {rates['bandwidth'] / 1e9:.1f} GB/s"
    )
    for m, r in model_gemm.items():
        print(
            f"GEMM at {m}'s width ([1024, {widths[m][0]}] x [{widths[m][0]}, {widths[m][1]}]): "
            + ", ".join(f"{k} {v / 1e9:.1f} GFLOP/s" for k, v in r.items())
        )
    results = []
    for m in a.models:
        results.append(
            run_setting(
                m,
                a.quick,
                a.device,
                steps,
                rates,
                a.fast,
                a.autocast,
                a.random_weights,
                a.eval_paths,
                a.breakdown,
            )  # fmt: skip
        )
        print_table(results[-1])
        sys.stdout.flush()
    if a.json:
        Path(a.json).write_text(
            json.dumps(
                {"machine": info, "rates": rates, "widths": widths, "results": results}, indent=1
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
