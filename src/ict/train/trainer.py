"""The native trainer: token-selective RLVR (ICT, GRPO, 20-Entropy, STAPO, random), top to bottom.

One training step:
  1. sample B prompts (seeded, resumable order);
  2. G rollouts per prompt (ict.generation);
  3. rewards from the task's verifier (errors / time-outs score 0 and are counted); with
     `dynamic_sampling`, 1-3 again until B groups carry signal (ict.train.refill);
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
import logging
import random
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import torch

from ict.data import file_stem
from ict.errors import UserError
from ict.eval.runner import only_benchmark
from ict.files import (
    JsonlWriter,
    latest_checkpoint,
    read_json_if_present,
    read_jsonl,
    truncate_jsonl,
    write_atomic,
    write_json_atomic,
)
from ict.models import disable_dropout, ensure_pad_token, load_model_and_tokenizer, model_label
from ict.report.samples import sample_records
from ict.report.tokenmap import render_html
from ict.rewards import default_verifier
from ict.train import checkpoint as ckpt
from ict.train.config import TrainConfig
from ict.train.evaluation import (
    compare_before_after,
    headline,
    step_eval_path,
    training_evaluation,
)
from ict.train.outputs import EntropyHealth, ExternalLogger, SignalHealth, check_report_to
from ict.train.plan import RunPlan
from ict.train.problems import PromptSampler, as_problem, load_problems, task_spec
from ict.train.refill import Refill
from ict.train.rollout import collect_rollout
from ict.train.schedule import LRSchedule, make_optimizer
from ict.train.step import PolicyContext, TrainingStep
from ict.training_metrics import sorted_score_curve

logger = logging.getLogger("ict.train")


# ---------------------------------------------------------------------------------------------
# Set-up helpers
# ---------------------------------------------------------------------------------------------
def default_run_dir(config: TrainConfig) -> Path:
    task = file_stem(Path(str(config.task).split("?")[0]).stem)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{stamp}-{config.method}-{task}-seed{config.seed}"


def _close_default_verifier() -> None:
    """Stop the shared verifier's child process now (left to interpreter shutdown it can abort)."""
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
        sampler_factory: how the evaluations sample (ict.eval.backends; default HF generation).
        data_dir: local task and benchmark files (ict.data; else only $ICT_DATA_DIR is searched).
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
        sampler_factory=None,
        data_dir=None,
    ):
        check_report_to(config.report_to, config.wandb_mode)  # before any task or model
        self.plan = plan = RunPlan.from_config(config)  # the run, resolved once
        self.chosen = config  # as given: config.yaml records it apart from what the method implied
        config = self.config = plan.config  # the method's settings explicit
        if plan.warning:
            logger.warning("%s", plan.warning)
        self.run_dir = Path(run_dir or config.output_dir or default_run_dir(config))
        logger.info("%s", plan.precision.describe())
        logger.info(
            "token statistics: %s",
            "from the update's own forward (on-policy: one forward per row and step)"
            if plan.one_forward else f"a separate old-policy forward ({plan.one_forward_off})",
        )  # fmt: skip
        self.resume = resume
        random.seed(plan.seeds.init)
        np.random.seed(plan.seeds.init)
        torch.manual_seed(plan.seeds.init)

        # the task first: a bad task spec fails before a model is loaded
        self.task_loaded = problems is None  # held-out problems exist only for a task spec
        self.problems = (
            [as_problem(p) for p in problems]
            if problems is not None
            else load_problems(config, data_dir=data_dir)
        )
        if (model is None) != (tokenizer is None):
            raise UserError(
                "pass both model and tokenizer, or neither (then config.model is loaded)"
            )
        self.model_label = model_label(config.model, model)
        if model is None:
            dtype = getattr(torch, config.dtype)
            model, tokenizer = load_model_and_tokenizer(
                config.model, dtype=dtype, device=plan.device
            )
        else:
            model.to(plan.device)
        if tokenizer.pad_token_id is None:
            ensure_pad_token(tokenizer)
        if config.disable_dropout:  # the old-policy pass and the update then compute the same p
            disable_dropout(model)
        self.model, self.tokenizer = model, tokenizer
        ref_model = None
        if plan.needs_reference_model:
            ref_model = copy.deepcopy(model).eval().requires_grad_(False)
        self.policy = PolicyContext.of(plan, model, ref_model)

        self.sampler = PromptSampler(len(self.problems), plan.seeds.prompts)
        # the run's evaluations (before, every eval_every steps, after): one Evaluation of its task
        self.evaluation = (
            training_evaluation(config, sampler_factory=sampler_factory, data_dir=data_dir)
            if self.task_loaded
            else None
        )
        self.optimizer = make_optimizer(model, config)
        self.scheduler = LRSchedule(
            self.optimizer, warmup_steps=config.warmup_steps, kind=config.lr_scheduler,
            max_steps=config.max_steps,
        )  # fmt: skip
        self.step_service = TrainingStep(plan, self.policy, self.optimizer, self.scheduler)
        self.health = EntropyHealth(
            config.health_window,
            config.collapse_fraction,
            config.explosion_multiple,
            config.format_drop_fraction,
        )
        self.signal = SignalHealth(config.health_window, dynamic_sampling=config.dynamic_sampling)
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
            last = latest_checkpoint(self.run_dir)
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
            self.history = read_jsonl(metrics_path)
            self.signal.replay(self.history)
        elif metrics_path.exists() and metrics_path.stat().st_size > 0:
            raise UserError(
                f"{self.run_dir} already holds a run (metrics.jsonl); continue it with "
                f"`ict train --resume {self.run_dir}` or choose another --output-dir"
            )
        self.chosen.save_yaml(
            self.run_dir / "config.yaml",
            extra={"precision": self.plan.precision.as_dict()},
            resolved=cfg,
        )
        self.metrics_file = JsonlWriter(metrics_path)
        self.samples_file = JsonlWriter(samples_path)
        self.external = None
        if cfg.report_to != "none":
            self.external = ExternalLogger(
                cfg.report_to, self.run_dir, cfg.to_dict(grouped=False),
                project=cfg.wandb_project, name=cfg.run_name, mode=cfg.wandb_mode,
            )  # fmt: skip

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
    def train_step(self) -> dict:
        """One full step (1-8); returns the metrics line written to metrics.jsonl."""
        cfg, plan = self.config, self.plan
        step = self.step + 1
        batch, metrics = self._rollout(step)
        trained, scored = self.step_service.train_on_rollout(
            batch.rollout, batch.rewards, step=step
        )
        self.step = step
        metrics.update(trained)
        health = self.health.update(
            step, metrics["valid/entropy"], metrics.get("format_rate"), metrics.get("dense_warmup")
        )
        metrics.update(health)
        # groups whose advantages are all 0 (all-equal rewards under grpo; none under w_reinforce)
        metrics.update(self.signal.update(step, metrics["no_signal_share"]))
        metrics = {"step": step, **metrics}

        if cfg.log_samples_every and (
            step in (1, cfg.max_steps) or step % cfg.log_samples_every == 0
        ):  # the last step too: `ict inspect` shows the trained run's own last step
            score = scored.stats.kl if "kl" in plan.method.needs() else scored.stats.js
            metrics["score_curve"] = sorted_score_curve(score, scored.mask)
            self._write_samples(step, batch, scored)
        if cfg.eval_every and step % cfg.eval_every == 0:
            metrics.update(self._evaluate(step))
        return metrics

    def _rollout(self, step: int):
        """Steps 1-3: B prompts of the run's order, G responses each, scored; with
        `dynamic_sampling`, further rounds until B groups carry signal (ict.train.refill)."""
        cfg, plan = self.config, self.plan

        def draw(count: int) -> list:
            return [self.problems[i] for i in self.sampler.next(count)]

        def sample(problems: list, seed: int | None = None):
            return collect_rollout(self.model, self.tokenizer, problems, plan, step=step, seed=seed)

        if not cfg.dynamic_sampling:
            return sample(draw(cfg.prompts_per_step))
        refill = Refill(
            draw, sample, cfg.prompts_per_step, cfg.num_generations, cfg.max_generation_rounds,
            self.tokenizer.pad_token_id,
        )  # fmt: skip
        return refill.gather(plan, step)

    def _write_samples(self, step, batch, scored) -> None:
        rows = range(min(self.config.num_log_samples, batch.rollout.input_ids.shape[0]))
        for record in sample_records(
            rows, step=step, rollout=batch.rollout, prompts=batch.prompts, rewards=batch.rewards,
            stats=scored.stats, mask=scored.mask, selections=scored.selection.selections,
            decode=lambda i: self.tokenizer.decode([i]),
        ):  # fmt: skip
            self.samples_file.write(record)

    def _evaluate(self, step: int) -> dict:
        """The run's evaluation after `step` steps (ict.train.evaluation: `eval_size` problems x
        `eval_num_samples` samples, sampling seed `eval_seed`, the same for every method and
        seed) into RUN/eval_steps/step_<step:06d>.json; returns its flat eval/<task>/... numbers
        for metrics.jsonl. A failure is logged and skipped (a UserError is raised)."""
        if self.evaluation is None:
            return {}
        try:
            result = self.evaluation.write(
                step_eval_path(self.run_dir, step), self.model, self.tokenizer,
                model_label=self.model_label, step=step,
            )  # fmt: skip
        except UserError:
            raise
        except Exception as err:  # noqa: BLE001 - evaluation must not kill the run
            logger.warning(
                "evaluation on %s at step %d failed: %s", task_spec(self.config), step, err
            )
            return {}
        return result["metrics"]

    def _heldout(self, when: str) -> dict | None:
        """The run's evaluation `when` ("before" / "after") in heldout_<when>.json (reused when a
        resumed run, or the grid that copied its start-point evaluation there, already holds this
        evaluation of this model). None when off or when the run has no task spec."""
        if not (self.config.heldout_eval and self.evaluation is not None):
            return None
        path = self.run_dir / f"heldout_{when}.json"
        saved = read_json_if_present(path)
        if self.evaluation.matches(saved):  # this run's own file: its start or its end
            return saved
        if when == "before" and self.step > 0:
            logger.warning("%s is missing and the run is past step 0: no before/after result", path)
            return None
        result = self.evaluation.write(
            path, self.model, self.tokenizer, model_label=self.model_label, step=self.step
        )
        s = result["benchmarks"][only_benchmark(result)]
        lo, hi = s["pass@1_ci95"]
        logger.info(
            "held-out pass@1 %s step %d: %.3f [%.3f, %.3f] (%d problems x %d samples, %.0f s)",
            when,
            self.step,
            s["pass@1"],
            lo,
            hi,
            s["problems"],
            s["n"],
            result["seconds"],
        )
        return result

    def _write_token_map(self) -> Path | None:
        """token_map.html of the last logged step's samples (as `ict inspect RUN` writes it)."""
        samples = self.run_dir / "samples.jsonl"
        try:
            records = read_jsonl(samples)
            if not records:
                return None
            last = max(r["step"] for r in records)
            html = render_html(
                [r for r in records if r["step"] == last],
                title=f"ict token map - {self.run_dir.name} step {last}",
            )
        except Exception as err:  # noqa: BLE001 - a convenience, never lose a run over it
            logger.warning("could not write the token map: %s", err)
            return None
        path = self.run_dir / "token_map.html"
        write_atomic(path, html)
        return path

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
        self._heldout("before")
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

    def close(self, external: bool = True) -> None:
        self.metrics_file.close()
        self.samples_file.close()
        if external and self.external is not None:
            self.external.close()
        _close_default_verifier()

    def finish(self, seconds: float) -> dict:
        """Held-out after-RL evaluation, plots, summary.json; closes the outputs. Returns the
        summary."""
        cfg = self.config
        before = self._heldout("before")
        after = self._heldout("after") if before is not None else None
        self.close(external=False)  # the logger gets the plots and the token map below
        plots_dir = None
        if cfg.plots:
            try:
                from ict.report.plots import plot_run  # matplotlib: optional (ict[train])

                plot_run(self.run_dir)
                plots_dir = str(self.run_dir / "plots")
            except Exception as err:  # noqa: BLE001 - plots are a convenience, never lose a run
                logger.warning("could not write plots: %s", err)
        last = self.history[-1] if self.history else {}
        # first vs last steps: up to 5 each, never overlapping (a 6-step run compares 3 with 3)
        span = max(1, min(5, len(self.history) // 2))
        window = self.history[-span:]
        first = self.history[:span]

        def avg(rows, key):
            values = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
            return float(np.mean(values)) if values else None

        latest = latest_checkpoint(self.run_dir)
        summary = {
            "method": cfg.method,
            "method_settings": {
                k: getattr(self.plan.method, k)
                for k in ("selector", "ratio", "scope", "reference", "loss_agg", "normalize_by")
            }
            | {"dense_warmup_steps": self.plan.method.dense_warmup_steps},
            "precision": self.plan.precision.as_dict(),
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
            "health": self.health.summary(cfg.method) | self.signal.summary(),
            "paths": {
                "run_dir": str(self.run_dir),
                "config": str(self.run_dir / "config.yaml"),
                "metrics": str(self.run_dir / "metrics.jsonl"),
                "samples": str(self.run_dir / "samples.jsonl"),
                "checkpoint": str(latest) if latest else None,
                "plots": plots_dir,
            },
        }
        token_map = self._write_token_map()
        if token_map:
            summary["paths"]["token_map"] = str(token_map)
        if self.external is not None:
            images = sorted(Path(plots_dir).glob("*.png")) if plots_dir else []
            try:
                self.external.log_media(
                    self.step,
                    images={f"plots/{p.stem}": p for p in images},
                    html={"token_map": token_map} if token_map else None,
                )
            except Exception as err:  # noqa: BLE001 - media are a convenience, never lose a run
                logger.warning(
                    "could not log the plots and token map to %s: %s", cfg.report_to, err
                )
            finally:
                self.external.close()
        if before is not None and after is not None:
            summary["heldout"] = compare_before_after(before, after) | {
                "benchmark": only_benchmark(before),
                "settings": {
                    k: before["settings"][k]
                    for k in ("n", "temperature", "top_p", "max_new_tokens", "seed", "limit")
                },
            }
            summary["paths"]["heldout"] = [
                str(self.run_dir / "heldout_before.json"),
                str(self.run_dir / "heldout_after.json"),
            ]
        summary["headline"] = headline(summary.get("heldout"), summary)
        if summary["health"].get("no_signal"):
            logger.warning("%s", summary["health"]["no_signal_text"])
        write_json_atomic(self.run_dir / "summary.json", summary)
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
    sampler_factory=None,
    data_dir=None,
) -> dict:
    """Train per `config` (see Trainer); returns the summary ({} if stopped early by `stop_after`).
    `data_dir`: local task and benchmark files for the task and its evaluations."""
    trainer = Trainer(
        config, run_dir, model=model, tokenizer=tokenizer, problems=problems, resume=resume,
        sampler_factory=sampler_factory, data_dir=data_dir,
    )  # fmt: skip
    return trainer.train(stop_after=stop_after)
