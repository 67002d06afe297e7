"""The native trainer: token-selective RLVR (ICT, GRPO, 20-Entropy, STAPO, random), top to bottom.

One training step:
  1. sample B prompts (seeded, resumable order);
  2. G rollouts per prompt (ict.generation);
  3. rewards from the task's verifier (errors / time-outs score 0 and are counted);
  4. group-relative advantages (ict.loss.compute_advantages);
  5. without gradient: final hidden states -> old log-probs and token statistics H, H2, JS
     (ict.stats.token_stats_from_hidden; the full batch logits are never built);
  6. token selection for the method (ict.select), plus ICT / 20-Entropy / STAPO for diagnostics;
  7. `num_epochs` passes over mini-batches, gradient accumulation over micro-batches with one
     normaliser for the whole mini-batch, AdamW with warm-up and clipping, optional KL to a frozen
     reference model;
  8. metrics.jsonl (one line, flushed), samples.jsonl, checkpoints, entropy-health flags.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import random
import time
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
import torch

from ict.errors import ConfigError, DataError, UserError
from ict.train import checkpoint as ckpt
from ict.train.config import TrainConfig
from ict.train.logprobs import (
    final_hidden,
    lm_head_params,
    policy_logprobs,
    shared_prompt_hidden,
    shifted_hidden,
)
from ict.train.outputs import EntropyHealth, ExternalLogger, JsonlWriter, truncate_jsonl
from ict.train.rewards import score_responses

logger = logging.getLogger("ict.train")

DIAGNOSTIC_SELECTORS = ("ict", "entropy", "stapo")


# ---------------------------------------------------------------------------------------------
# Data: problems and a resumable prompt sampler
# ---------------------------------------------------------------------------------------------
@dataclass
class Problem:
    """One training problem: a prompt (text or chat messages) and a scorer response -> reward."""

    prompt: str | list
    score: object  # Callable[[str], float | (float, bool) | dict]
    own_time_limit: bool = False  # the scorer enforces its own time limit (ict.data items)


def as_problem(item) -> Problem:
    """Adapt a task item (ict.data item, dict or Problem) to a Problem."""
    if isinstance(item, Problem):
        return item
    get = item.get if isinstance(item, dict) else lambda k, d=None: getattr(item, k, d)
    prompt = get("messages") or get("prompt")  # ict.data.Item: the full (few-shot) messages
    scorer = get("score") or get("scoring") or get("reward_fn")
    if prompt is None or not callable(scorer):
        raise DataError(f"task item {item!r:.120} needs a prompt and a callable score(response)")
    # ict.data items score through ict.rewards, whose sandbox enforces the time limit itself
    return Problem(prompt, scorer, own_time_limit=hasattr(item, "verifier"))


class PromptSampler:
    """Prompt indices in seeded epoch-wise permutations; its state is the number consumed."""

    def __init__(self, size: int, seed: int):
        self.size, self.seed, self.consumed = size, seed, 0

    def next(self, count: int) -> list[int]:
        out = []
        for _ in range(count):
            epoch, pos = divmod(self.consumed, self.size)
            out.append(int(np.random.default_rng([self.seed, epoch]).permutation(self.size)[pos]))
            self.consumed += 1
        return out

    def state_dict(self) -> dict:
        return {"consumed": self.consumed, "size": self.size, "seed": self.seed}

    def load_state_dict(self, state: dict) -> None:
        self.consumed = int(state["consumed"])


def task_spec(config: TrainConfig) -> str:
    """The ict.data spec string: `task` plus `task_config` as ?key=value options."""
    if not config.task_config:
        return config.task
    options = "&".join(
        f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in config.task_config.items()
    )
    return f"{config.task}{'&' if '?' in config.task else '?'}{options}"


def load_problems(
    config: TrainConfig, split: str = "train", size: int | None = None
) -> list[Problem]:
    """Problems of the task via ict.data.load_task (train split by default)."""
    from ict.data import load_task

    items = load_task(
        task_spec(config), split=split, seed=config.data_seed, size=size or config.train_size
    )
    problems = [as_problem(item) for item in items]
    if not problems:
        raise DataError(
            f"task {config.task!r} produced no training problems; check task_config / train_size"
        )
    return problems


# ---------------------------------------------------------------------------------------------
# Set-up helpers
# ---------------------------------------------------------------------------------------------
def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device={name!r} but CUDA is not available; use --device cpu")
    return torch.device(name)


def autocast_context(config: TrainConfig, device: torch.device):
    """The autocast context of the statistics and update passes (bf16 by default, CPU included)."""
    if config.autocast == "off":
        return nullcontext()
    dtype = torch.float16 if config.autocast == "fp16" else torch.bfloat16
    return torch.autocast(device_type=device.type, dtype=dtype)


def default_run_dir(config: TrainConfig) -> Path:
    from ict.data import file_stem

    task = file_stem(Path(str(config.task).split("?")[0]).stem)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{stamp}-{config.method}-{task}-seed{config.seed}"


def make_scheduler(optimizer, config: TrainConfig, total_updates: int):
    """Linear warm-up over `warmup_steps` optimizer steps, then constant / linear / cosine to 0."""
    warmup = config.warmup_steps

    def factor(update: int) -> float:
        if update < warmup:
            return (update + 1) / (warmup + 1)
        if config.lr_scheduler == "constant":
            return 1.0
        progress = min(1.0, (update - warmup) / max(1, total_updates - warmup))
        if config.lr_scheduler == "linear":
            return 1.0 - progress
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def render_prompts(tokenizer, prompts: list, config: TrainConfig) -> list[str]:
    if config.chat_template and getattr(tokenizer, "chat_template", None):
        from ict.models import format_prompt

        return [format_prompt(tokenizer, p, system=config.system_prompt) for p in prompts]
    return [p if isinstance(p, str) else "\n".join(m["content"] for m in p) for p in prompts]


def _span(attention_mask: torch.Tensor) -> slice:
    """Columns that hold any real token in these rows (trims shared left/right padding)."""
    cols = torch.nonzero(attention_mask.any(0)).flatten()
    return slice(int(cols[0]), int(cols[-1]) + 1) if cols.numel() else slice(0, 1)


def _mean(values: torch.Tensor, where: torch.Tensor) -> float:
    n = int(where.sum())
    return float((values * where).sum() / n) if n else float("nan")


def _close_default_verifier() -> None:
    """Stop the shared verifier's child process now (left to interpreter shutdown it can abort)."""
    try:
        from ict.rewards.verify import default_verifier
    except ImportError:
        return
    if default_verifier.cache_info().currsize:
        default_verifier().close()
        default_verifier.cache_clear()


# ---------------------------------------------------------------------------------------------
# The trainer
# ---------------------------------------------------------------------------------------------
class Trainer:
    """Holds the model, optimizer and run outputs; `train()` runs to `max_steps` and returns the summary.

    Args:
        config: the resolved TrainConfig.
        run_dir: where outputs go (created); for a resume, the existing run directory.
        model, tokenizer: pass both to train an in-memory model (tests); else loaded by ict.models.
        problems: training problems (Problem / task items); else loaded by ict.data from config.task.
        resume: continue from run_dir's latest checkpoint.
    """

    def __init__(
        self,
        config: TrainConfig,
        run_dir: str | Path | None = None,
        *,
        model=None,
        tokenizer=None,
        problems=None,
        resume: bool = False,
    ):
        self.config = config
        self.run_dir = Path(run_dir or config.output_dir or default_run_dir(config))
        self.device = resolve_device(config.device)
        self.resume = resume
        random.seed(config.seed)
        np.random.seed(config.seed)
        torch.manual_seed(config.seed)

        # the task first: a bad task spec fails before a model is loaded
        self.problems = (
            [as_problem(p) for p in problems] if problems is not None else load_problems(config)
        )
        if (model is None) != (tokenizer is None):
            raise UserError(
                "pass both model and tokenizer, or neither (then config.model is loaded)"
            )
        if model is None:
            from ict.models import load_model_and_tokenizer

            dtype = getattr(torch, config.dtype)
            model, tokenizer = load_model_and_tokenizer(
                config.model, dtype=dtype, device=self.device
            )
        else:
            model.to(self.device)
        if tokenizer.pad_token_id is None:
            from ict.models import ensure_pad_token

            ensure_pad_token(tokenizer)
        self.model, self.tokenizer = model, tokenizer
        self.ref_model = None
        if config.needs_reference_model:
            self.ref_model = copy.deepcopy(model).eval().requires_grad_(False)

        self.sampler = PromptSampler(len(self.problems), config.seed)
        self.optimizer = torch.optim.AdamW(
            [p for p in model.parameters() if p.requires_grad],
            lr=config.learning_rate,
            betas=(config.adam_beta1, config.adam_beta2),
            eps=config.adam_epsilon,
            weight_decay=config.weight_decay,
        )
        mini = config.mini_batch_size or config.batch_size
        updates_per_step = config.num_epochs * math.ceil(config.batch_size / mini)
        self.scheduler = make_scheduler(self.optimizer, config, config.max_steps * updates_per_step)
        self.health = EntropyHealth(
            config.health_window,
            config.collapse_fraction,
            config.explosion_multiple,
            config.format_drop_fraction,
        )
        self.step = 0
        self.history: list[dict] = []
        self._setup_run_dir()

    # ---- run directory, resume --------------------------------------------------------------
    def _setup_run_dir(self) -> None:
        cfg = self.config
        self.run_dir.mkdir(parents=True, exist_ok=True)
        metrics_path, samples_path = self.run_dir / "metrics.jsonl", self.run_dir / "samples.jsonl"
        if self.resume:
            ckpt.clean_partial(self.run_dir)
            last = ckpt.latest_checkpoint(self.run_dir)
            if last is not None:
                state = ckpt.load_checkpoint(last, self.model)
                self.optimizer.load_state_dict(state["optimizer"])
                self.scheduler.load_state_dict(state["scheduler"])
                self.sampler.load_state_dict(state["sampler"])
                self.health.load_state_dict(state["health"])
                self.step = int(state["step"])
                ckpt.set_rng_state(state["rng"])
                logger.info("resumed %s from %s (step %d)", self.run_dir, last.name, self.step)
            else:
                logger.info("no checkpoint in %s: starting it from step 0", self.run_dir)
            truncate_jsonl(metrics_path, self.step)
            truncate_jsonl(samples_path, self.step)
            from ict.report.runs import read_jsonl

            self.history = read_jsonl(metrics_path) if metrics_path.exists() else []
        elif metrics_path.exists() and metrics_path.stat().st_size > 0:
            raise UserError(
                f"{self.run_dir} already holds a run (metrics.jsonl); continue it with "
                f"`ict train --resume {self.run_dir}` or choose another --output-dir"
            )
        cfg.save_yaml(self.run_dir / "config.yaml")
        self.metrics_file = JsonlWriter(metrics_path)
        self.samples_file = JsonlWriter(samples_path)
        self.external = None
        if cfg.report_to != "none":
            self.external = ExternalLogger(cfg.report_to, self.run_dir, cfg.to_dict(grouped=False))

    def save(self) -> Path:
        state = {
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "sampler": self.sampler.state_dict(),
            "health": self.health.state_dict(),
        }
        return ckpt.save_checkpoint(
            self.run_dir,
            self.step,
            self.model,
            self.tokenizer,
            state,
            keep_last=self.config.keep_last,
        )

    # ---- one step, top to bottom ------------------------------------------------------------
    def rollout(self, step: int):
        """Steps 1-3: prompts, G samples each, rewards. Returns (rollout, rewards[N], metrics)."""
        from ict.generation import generate

        cfg = self.config
        problems = [self.problems[i] for i in self.sampler.next(cfg.prompts_per_step)]
        prompts = render_prompts(self.tokenizer, [p.prompt for p in problems], cfg)
        self.model.eval()
        t0 = time.perf_counter()
        amp = autocast_context(cfg, self.device) if cfg.rollout_autocast else nullcontext()
        with torch.no_grad(), amp:
            rollout = generate(
                self.model,
                self.tokenizer,
                prompts,
                num_samples=cfg.num_generations,
                temperature=cfg.temperature,
                top_p=cfg.top_p,
                max_new_tokens=cfg.max_new_tokens,
                batch_size=cfg.generation_batch_size,
                seed=cfg.seed * 1_000_003 + step,
                stop=list(cfg.stop) or None,
            )
        rollout_s = time.perf_counter() - t0
        prompt_index = rollout.prompt_index.tolist()
        scored = score_responses(
            [problems[i].score for i in prompt_index],
            list(rollout.texts),
            timeout_s=cfg.reward_timeout_s,
            guarded=[problems[i].own_time_limit for i in prompt_index],
        )
        rewards = torch.tensor(scored.rewards, dtype=torch.float32)
        formats = [f for f in scored.formatted if f is not None]
        new_tokens = int(rollout.response_mask.sum())
        metrics = {
            "reward/mean": float(rewards.mean()),
            "reward/std": float(rewards.std()) if rewards.numel() > 1 else 0.0,
            "accuracy": float((rewards > 0.5).float().mean()),
            "format_rate": float(np.mean(formats)) if formats else None,
            "reward/errors": scored.errors,
            "reward/timeouts": scored.timeouts,
            "response_length/mean": new_tokens / max(1, len(prompt_index)),
            "time/rollout_s": rollout_s,
            "throughput/rollout_tok_s": new_tokens / max(rollout_s, 1e-9),
        }
        self._prompts = prompts
        return rollout, rewards, metrics

    @torch.no_grad()
    def token_statistics(self, rollout):
        """Step 5: old log-probs and H, H2, JS from final hidden states (no gradient, no full logits).

        Returns (stats: TokenStats [N, T] fields, ref_logprob [N, T] or None).
        """
        from ict.stats import token_stats_from_hidden

        cfg = self.config
        ids, attn = rollout.input_ids.to(self.device), rollout.attention_mask.to(self.device)
        mask = rollout.response_mask.to(self.device).bool()
        self.model.eval()

        group, step_rows = self._grouping(ids.shape[0])

        def hidden_of(model):
            out = None
            for start in range(0, ids.shape[0], step_rows):
                rows = slice(start, start + step_rows)
                cols = _span(attn[rows])
                with autocast_context(cfg, self.device):
                    if group > 1:
                        h = shared_prompt_hidden(
                            model,
                            ids[rows, cols],
                            attn[rows, cols],
                            rollout.prompt_length - cols.start,
                            group,
                        )
                    else:
                        h = final_hidden(model, ids[rows, cols], attn[rows, cols])
                if out is None:
                    out = h.new_zeros(ids.shape + (h.shape[-1],))
                out[rows, cols] = h
            return shifted_hidden(out)

        weight, bias = lm_head_params(self.model)
        ref_kwargs = {}
        if cfg.reference == "reference_policy":
            ref_weight, ref_bias = lm_head_params(self.ref_model)
            ref_kwargs = dict(
                reference_hidden=hidden_of(self.ref_model),
                reference_lm_head_weight=ref_weight,
                reference_lm_head_bias=ref_bias,
            )
        stats = token_stats_from_hidden(
            hidden_of(self.model),
            weight,
            ids,
            mask,
            lm_head_bias=bias,
            temperature=cfg.temperature,
            reference=cfg.reference,
            group_ids=rollout.prompt_index.to(self.device),
            chunk_size=cfg.stats_chunk_size,
            **ref_kwargs,
        )
        ref_logprob = self.sampled_logprobs(self.ref_model, rollout) if cfg.kl_coef > 0 else None
        return stats, ref_logprob

    @torch.no_grad()
    def sampled_logprobs(self, model, rollout) -> torch.Tensor:
        """[N, T] float32 log-probs of the rollout's tokens under `model` (0 off the response),
        micro-batched and prompt-shared like the statistics pass; no gradient."""
        cfg = self.config
        ids, attn = rollout.input_ids.to(self.device), rollout.attention_mask.to(self.device)
        mask = rollout.response_mask.to(self.device).bool()
        group, step_rows = self._grouping(ids.shape[0])
        out = torch.zeros(ids.shape, device=self.device)
        for start in range(0, ids.shape[0], step_rows):
            rows = slice(start, start + step_rows)
            cols = _span(attn[rows])
            with autocast_context(cfg, self.device):
                lp, _ = policy_logprobs(
                    model,
                    ids[rows, cols],
                    attn[rows, cols],
                    mask[rows, cols],
                    temperature=cfg.temperature,
                    chunk_size=cfg.stats_chunk_size,
                    prompt_length=rollout.prompt_length - cols.start,
                    group_size=group,
                )
            out[rows, cols] = lp
        return out

    def _grouping(self, rows: int) -> tuple[int, int]:
        """(G if prompts are shared else 1, rows per micro-batch: a multiple of G when shared)."""
        cfg = self.config
        group = cfg.num_generations if cfg.share_prompt and rows % cfg.num_generations == 0 else 1
        return group, max(1, cfg.micro_batch_size // group) * group

    def select(self, method: str, mask, stats, advantages, tokens, step: int):
        """Step 6: bool [N, T] selection of `method` (config ratio/scope/options apply to it)."""
        from ict.select import select_tokens

        cfg = self.config
        parts = method.split("+")
        options = dict(cfg.selector_options)
        if "stapo" in parts:
            options.setdefault("prob_below", cfg.stapo_prob_below)
            options.setdefault("entropy_quantile", cfg.stapo_entropy_quantile)
        ratio = (
            cfg.ratio
            if method == cfg.method and any(p in ("ict", "entropy", "random") for p in parts)
            else None
        )
        known = {"prob_below", "entropy_quantile"} if "stapo" in parts else set()
        if method != cfg.method:
            options = {k: v for k, v in options.items() if k in known}
        return select_tokens(
            method,
            mask,
            stats=stats,
            advantages=advantages,
            tokens=tokens,
            ratio=ratio,
            scope=cfg.scope,
            granularity=cfg.granularity,
            micro_batch_size=self._grouping(mask.shape[0])[1],
            seed=cfg.seed * 1_000_003 + step,
            **options,
        )

    def update(self, rollout, old_logprob, advantages, selected, ref_logprob):
        """Step 7: epochs x mini-batches x micro-batches; returns averaged loss metrics."""
        from ict.loss import policy_loss

        cfg = self.config
        ids, attn = rollout.input_ids.to(self.device), rollout.attention_mask.to(self.device)
        mask = rollout.response_mask.to(self.device).bool()
        rows_all = torch.arange(ids.shape[0])
        if cfg.drop_zero_variance_groups:
            rows_all = rows_all[self._informative_rows(rollout, advantages)]
        if rows_all.numel() == 0:
            return {"update/skipped": 1}
        self.model.train()
        group, micro_rows = self._grouping(rows_all.numel())
        units = rows_all.view(-1, group)  # whole groups of G rows when prompts are shared
        mini_units = max(1, (cfg.mini_batch_size or rows_all.numel()) // group)
        gen = torch.Generator().manual_seed(cfg.seed * 1_000_003 + self.step)
        sums: dict[str, float] = {}
        weight_total = 0.0
        grad_norms, tokens_done = [], 0
        for _epoch in range(cfg.num_epochs):
            shuffle = cfg.num_epochs > 1 or cfg.mini_batch_size
            order = units[torch.randperm(units.shape[0], generator=gen)] if shuffle else units
            for mini in (chunk.flatten() for chunk in order.split(mini_units)):
                self.optimizer.zero_grad(set_to_none=True)
                m_mask, m_sel = mask[mini], selected[mini]
                denom_mask = m_sel & m_mask if cfg.normalize_by == "selected" else m_mask
                denominator = float(denom_mask.sum().clamp(min=1))
                for micro in mini.split(micro_rows):
                    cols = _span(attn[micro])
                    with autocast_context(cfg, self.device):
                        logprob, entropy = policy_logprobs(
                            self.model,
                            ids[micro, cols],
                            attn[micro, cols],
                            mask[micro, cols],
                            temperature=cfg.temperature,
                            chunk_size=cfg.stats_chunk_size,
                            with_entropy=cfg.entropy_coef > 0,
                            prompt_length=rollout.prompt_length - cols.start,
                            group_size=group,
                        )
                    kwargs = dict(
                        eps_low=cfg.eps_low,
                        eps_high=cfg.eps_high,
                        dual_clip=cfg.dual_clip,
                        loss_agg=cfg.loss_agg,
                        normalize_by=cfg.normalize_by,
                        max_response_length=cfg.max_new_tokens,
                        kl_coef=cfg.kl_coef,
                        kl_estimator=cfg.kl_estimator,
                        kl_on=cfg.kl_on,
                        entropy=entropy,
                        entropy_coef=cfg.entropy_coef,
                    )
                    if ref_logprob is not None:
                        kwargs["ref_logprob"] = ref_logprob[micro, cols]
                    share = micro.numel() / mini.numel()
                    if cfg.loss_agg == "token_mean":
                        kwargs["denominator"] = denominator
                        scale = 1.0
                    else:  # per-sequence means: weight each micro-batch by its share of sequences
                        scale = share
                    loss, metrics = policy_loss(
                        logprob,
                        old_logprob[micro, cols],
                        advantages[micro],
                        mask[micro, cols],
                        selected[micro, cols],
                        **kwargs,
                    )
                    (loss * scale).backward()
                    for key, value in metrics.items():
                        if isinstance(value, (int, float)) and value == value:
                            sums[key] = sums.get(key, 0.0) + float(value) * share
                    tokens_done += int(attn[micro, cols].sum())
                weight_total += 1.0
                max_norm = cfg.max_grad_norm if cfg.max_grad_norm > 0 else float("inf")
                grad_norms.append(
                    float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm))
                )
                self.optimizer.step()
                self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.model.eval()
        out = {key: value / weight_total for key, value in sums.items()}
        out["grad_norm"] = float(np.mean(grad_norms))
        out["update/tokens"] = tokens_done
        return out

    def _informative_rows(self, rollout, advantages) -> torch.Tensor:
        """Rows whose group has non-constant rewards (dynamic sampling)."""
        nonzero = advantages.abs() > 0
        groups = rollout.prompt_index
        informative = torch.zeros(int(groups.max()) + 1, dtype=torch.bool).index_put_(
            (groups,), nonzero.cpu(), accumulate=True
        )
        return informative[groups]

    def train_step(self) -> dict:
        """One full step (1-8); returns the metrics line written to metrics.jsonl."""
        from ict.loss import compute_advantages
        from ict.select import jaccard

        cfg = self.config
        step = self.step + 1
        rollout, rewards, metrics = self.rollout(step)

        advantages, adv_info = compute_advantages(rewards, rollout.prompt_index, mode=cfg.advantage)
        advantages = advantages.to(self.device)
        metrics["zero_variance_groups"] = int(adv_info.get("zero_variance_groups", 0))

        t0 = time.perf_counter()
        stats, ref_logprob = self.token_statistics(rollout)
        mask = rollout.response_mask.to(self.device).bool()
        tokens = rollout.input_ids.to(self.device)
        selections = {
            name: self.select(name, mask, stats, advantages, tokens, step)
            for name in dict.fromkeys([*DIAGNOSTIC_SELECTORS, cfg.method])
        }
        selected = selections[cfg.method]
        metrics["time/stats_s"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        lr_used = self.optimizer.param_groups[0]["lr"]  # this step's (first) optimizer step
        loss_metrics = self.update(rollout, stats.logprob, advantages, selected, ref_logprob)
        update_s = time.perf_counter() - t0
        self.step = step

        metrics.update(self._token_metrics(stats, mask, selected, selections))
        metrics["overlap/ict_entropy_jaccard"] = jaccard(selections["ict"], selections["entropy"])
        metrics.update(self._loss_metrics(loss_metrics))
        metrics["lr"] = lr_used
        metrics["time/update_s"] = update_s
        metrics["throughput/update_tok_s"] = loss_metrics.get("update/tokens", 0) / max(
            update_s, 1e-9
        )
        metrics.update(
            self.health.update(step, metrics["valid/entropy"], metrics.get("format_rate"))
        )
        metrics = {"step": step, **metrics}

        if cfg.log_samples_every and (step == 1 or step % cfg.log_samples_every == 0):
            self._write_samples(step, rollout, rewards, stats, mask, selections)
        if cfg.eval_every and step % cfg.eval_every == 0:
            metrics.update(self._evaluate(step))
        return metrics

    # ---- metrics ----------------------------------------------------------------------------
    @staticmethod
    def _token_metrics(stats, mask, selected, selections) -> dict:
        prob = stats.logprob.exp()
        fields = {"entropy": stats.entropy, "renyi2": stats.renyi2, "js": stats.js, "prob": prob}
        out = {}
        for where_name, where in (("valid", mask), ("selected", selected & mask)):
            for key, values in fields.items():
                out[f"{where_name}/{key}"] = _mean(values, where)
        n_valid = int(mask.sum())
        out["selected_fraction"] = int((selected & mask).sum()) / max(1, n_valid)
        out["valid_tokens"] = n_valid
        for name, sel in selections.items():  # per-method selected statistics on the same batch
            out[f"by_selector/{name}/fraction"] = int((sel & mask).sum()) / max(1, n_valid)
            for key, values in fields.items():
                out[f"by_selector/{name}/{key}"] = _mean(values, sel & mask)
        return out

    @staticmethod
    def _loss_metrics(loss_metrics: dict) -> dict:
        out = {}
        for key, value in loss_metrics.items():
            if key in ("clip_fraction", "kl_ref", "grad_norm") or key.startswith(
                ("update/", "loss/")
            ):
                out[key] = value
            elif key == "loss":
                out["loss/total"] = value
            elif key in ("kl", "kl_mean"):
                out["kl_ref"] = value
            else:
                out[f"loss/{key}"] = value
        return out

    def _write_samples(self, step, rollout, rewards, stats, mask, selections) -> None:
        cfg = self.config
        for row in range(min(cfg.num_log_samples, rollout.input_ids.shape[0])):
            cols = mask[row].nonzero().flatten()
            ids = rollout.input_ids[row, cols.cpu()].tolist()
            self.samples_file.write(
                {
                    "step": step,
                    "prompt": self._prompts[int(rollout.prompt_index[row])],
                    "response": rollout.texts[row],
                    "reward": float(rewards[row]),
                    "tokens": [self.tokenizer.decode([i]) for i in ids],
                    "entropy": [round(float(x), 5) for x in stats.entropy[row, cols]],
                    "renyi2": [round(float(x), 5) for x in stats.renyi2[row, cols]],
                    "js": [round(float(x), 6) for x in stats.js[row, cols]],
                    "prob": [round(float(x), 5) for x in stats.logprob[row, cols].exp()],
                    "selected": {
                        name: sel[row, cols].int().tolist() for name, sel in selections.items()
                    },
                }
            )

    def _evaluate(self, step: int) -> dict:
        """Held-out pass@k via ict.eval (optional: skipped with a warning if unavailable)."""
        try:
            from ict.eval import evaluate
        except ImportError:
            logger.warning("ict.eval is not available; skipping evaluation at step %d", step)
            return {}
        cfg = self.config
        try:
            result = evaluate(
                self.model,
                self.tokenizer,
                task_spec(cfg),
                n=cfg.eval_num_samples,
                temperature=cfg.temperature,
                top_p=cfg.top_p,
                max_new_tokens=cfg.max_new_tokens,
                batch_size=cfg.generation_batch_size,
                seed=cfg.seed,
                limit=cfg.eval_size,
            )
        except UserError:
            raise
        except Exception as err:  # noqa: BLE001 - evaluation must not kill the run
            logger.warning("evaluation at step %d failed: %s", step, err)
            return {}
        self.model.eval()
        return {
            k if str(k).startswith("eval/") else f"eval/{k}": v
            for k, v in result.items()
            if isinstance(v, (int, float))
        }

    # ---- the loop ---------------------------------------------------------------------------
    def train(self, *, stop_after: int | None = None) -> dict:
        """Run until `max_steps` (or `stop_after` steps in this call); returns the summary dict."""
        from tqdm.auto import tqdm

        cfg = self.config
        start_time = time.perf_counter()
        bar = tqdm(
            total=cfg.max_steps,
            initial=self.step,
            desc=f"ict train [{cfg.method}]",
            disable=not cfg.progress,
            dynamic_ncols=True,
        )
        done_here = 0
        try:
            while self.step < cfg.max_steps and (stop_after is None or done_here < stop_after):
                metrics = self.train_step()
                self.metrics_file.write(metrics)
                self.history.append(metrics)
                if self.external is not None:
                    self.external.log(metrics, self.step)
                if (
                    cfg.save_every and self.step % cfg.save_every == 0
                ) or self.step == cfg.max_steps:
                    self.save()
                done_here += 1
                bar.update(1)
                bar.set_postfix(
                    reward=f"{metrics['reward/mean']:.3f}",
                    H=f"{metrics['valid/entropy']:.3f}",
                    sel=f"{metrics['selected_fraction']:.2f}",
                    refresh=False,
                )
        finally:
            bar.close()
        if self.step < cfg.max_steps:  # stopped early (stop_after): leave the run resumable
            self.close()
            return {}
        return self.finish(time.perf_counter() - start_time)

    def close(self) -> None:
        self.metrics_file.close()
        self.samples_file.close()
        if self.external is not None:
            self.external.close()
        _close_default_verifier()

    def finish(self, seconds: float) -> dict:
        """Plots, summary.json; closes the outputs. Returns the summary."""
        cfg = self.config
        self.close()
        plots_dir = None
        if cfg.plots:
            try:
                from ict.report.plots import plot_run

                plot_run(self.run_dir)
                plots_dir = str(self.run_dir / "plots")
            except Exception as err:  # noqa: BLE001 - plots are a convenience, never lose a run
                logger.warning("could not write plots: %s", err)
        last = self.history[-1] if self.history else {}
        window = self.history[-max(1, min(5, len(self.history))) :]
        first = self.history[: max(1, min(5, len(self.history)))]

        def avg(rows, key):
            values = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
            return float(np.mean(values)) if values else None

        latest = ckpt.latest_checkpoint(self.run_dir)
        summary = {
            "method": cfg.method,
            "model": cfg.model or "smollm2-135m-instruct",
            "task": cfg.task,
            "seed": cfg.seed,
            "steps": self.step,
            "seconds_this_session": round(seconds, 2),
            "final": last,
            "reward_first_steps": avg(first, "reward/mean"),
            "reward_last_steps": avg(window, "reward/mean"),
            "accuracy_first_steps": avg(first, "accuracy"),
            "accuracy_last_steps": avg(window, "accuracy"),
            "health": {
                "entropy_collapse": self.health.ever_collapsed,
                "entropy_explosion": self.health.ever_exploded,
            },
            "paths": {
                "run_dir": str(self.run_dir),
                "config": str(self.run_dir / "config.yaml"),
                "metrics": str(self.run_dir / "metrics.jsonl"),
                "samples": str(self.run_dir / "samples.jsonl"),
                "checkpoint": str(latest) if latest else None,
                "plots": plots_dir,
            },
        }
        (self.run_dir / "summary.json").write_text(
            json.dumps(summary, indent=2, default=str), encoding="utf-8"
        )
        return summary


def train(
    config: TrainConfig,
    *,
    run_dir: str | Path | None = None,
    resume: bool = False,
    model=None,
    tokenizer=None,
    problems=None,
    stop_after: int | None = None,
) -> dict:
    """Train per `config` (see Trainer); returns the summary ({} if stopped early by `stop_after`)."""
    trainer = Trainer(
        config, run_dir, model=model, tokenizer=tokenizer, problems=problems, resume=resume
    )
    return trainer.train(stop_after=stop_after)
