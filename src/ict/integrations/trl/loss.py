"""TRL's loss on ict's selected tokens: the selection multiplied into TRL's loss mask (`tool_mask`)
and TRL's own loss unchanged (clip `epsilon` / `epsilon_high`, `delta`, KL `beta`, vLLM
importance sampling, loss types), or `ict.loss.policy_loss` on TRL's own log-probs and entropies
for a method TRL's loss cannot compute (a loss mode: clip_cov, kl_cov; an entropy bonus); and the
per-optimizer-step normalisers both read (from ict.step.StepPlan's counts)."""

from __future__ import annotations

import torch

from ict.integrations.trl.config import ict_computes_loss
from ict.loss.modes import loss_mode_metrics
from ict.loss.options import COVARIANCE_FIELDS
from ict.loss.policy import LossConfig, policy_loss
from ict.methods import Method

# TRL loss types that divide by `num_items_in_batch` (set per optimizer step)
TOKEN_COUNT_LOSSES = ("dapo", "cispo", "vespo")
TRL_MODEL_KWARGS = (
    "pixel_values", "image_grid_thw", "num_images", "pixel_attention_mask", "spatial_shapes",
    "num_tiles", "image_sizes", "token_type_ids", "mm_token_type_ids", "image_position_ids",
)  # fmt: skip
# ict.loss.policy_loss metric -> TRL's metric name (token fractions / means over the loss tokens)
ICT_LOSS_METRICS = {
    "clip/low": "clip_ratio/low_mean",
    "clip/high": "clip_ratio/high_mean",
    "clip_fraction": "clip_ratio/region_mean",
    "dual_clip_fraction": "dual_clip_fraction",
    "entropy": "entropy",
    "kl": "kl",
}


class LossSteps:
    """The trainer side (mixed into ICTGRPOTrainer, which provides `ict_plan`, `_valid_mask`,
    `accelerator`, `_metrics`, TRL's `_compute_loss`): the loss of one micro-batch."""

    def _ict_set_normalisers(self, chunks, counts, mode):
        """Per optimizer step (the `gradient_accumulation_steps` consecutive micro-batches of the
        generation batch that one update sums), all processes: the number of loss-normaliser
        tokens (selected, or valid for normalize_by="valid"), of responses with one, and ict's
        loss count, summed from the plan's per-row counts (`counts`: one ict.loss.RowCounts
        per micro-batch of `chunks`). TRL's token-count losses divide by num_items_in_batch / P *
        GA / spg, so it is set to count * spg / GA; the "grpo" loss rescales advantages
        (`_ict_seq_mean_scale`). Either way each update is normalised over exactly its own rows,
        as the native trainer's mini-batch is."""
        ga = self.args.gradient_accumulation_steps if mode == "train" else len(chunks)
        spg = self.args.steps_per_generation if mode == "train" else len(chunks)
        window = [j // ga for j in range(len(chunks))]
        loss_config = self.ict_plan.loss
        totals = torch.zeros(max(window) + 1, 3, device=chunks[0]["completion_ids"].device)
        for j, k in enumerate(counts):
            totals[window[j], 0] += k.tokens.sum().to(totals.device)
            totals[window[j], 1] += k.rows.sum().to(totals.device)
            if k.loss is not None:  # ict's loss: its own normaliser, LossConfig.count
                totals[window[j], 2] += k.loss.sum().to(totals.device)
        totals = self.accelerator.reduce(totals, reduction="sum")
        method = self.ict_plan.method
        keep_trl = method.selector == "every" and (spg % ga or self.loss_type not in (
            *TOKEN_COUNT_LOSSES, "grpo"))  # fmt: skip
        for j, c in enumerate(chunks):
            tokens, rows, ict_count = totals[window[j]]
            if self.loss_type in TOKEN_COUNT_LOSSES and not keep_trl:
                c["num_items_in_batch"] = tokens * spg / ga
            c["ict_rows_selected"] = None if keep_trl else rows
            # DDP averages the ranks' gradients: each rank divides by global count / processes
            c["ict_loss_denominator"] = (
                None
                if loss_config is None
                else ict_count.clamp(min=1.0) / self.accelerator.num_processes
            )

    def ict_loss_config(self, method: Method) -> LossConfig | None:
        """The ict.loss.LossConfig of ict's own loss for `method` (a resolved Method), or None when
        TRL's loss computes the method (`ict_computes_loss`). TRL's clip settings (`epsilon`,
        `epsilon_high`, `delta`, which equals ict's dual clip), the method's aggregation, loss mode
        and entropy bonus, the config's loss-mode settings; Dr. GRPO's constant is TRL's
        `max_completion_length`."""
        if not ict_computes_loss(method):
            return None
        return LossConfig(
            eps_low=self.epsilon_low, eps_high=self.epsilon_high, dual_clip=self.args.delta,
            loss_agg=method.loss_agg, normalize_by=method.normalize_by,
            max_response_length=self.max_completion_length, entropy_coef=method.entropy_coef,
            loss_mode=method.loss_mode, **{k: getattr(self.args, k) for k in COVARIANCE_FIELDS},
            entropy_advantage=method.entropy_advantage,
            kl_coef=self.beta, kl_estimator="k3", kl_on="selected",  # TRL's KL term, as TRL's loss
        )  # fmt: skip

    def _compute_loss(self, model, inputs):
        if inputs.get("ict_one_forward") and self.model.training:
            inputs = self._ict_one_forward_inputs(model, inputs)
        if "ict_selected" not in inputs:
            raise RuntimeError(
                "ICTGRPOTrainer: batch has no token selection (was _prepare_inputs bypassed?)"
            )
        inputs = self._ict_on_policy(inputs)
        loss_config = self.ict_plan.loss
        if loss_config is not None:
            return self._ict_compute_loss(model, inputs, loss_config)
        keep = inputs["ict_selected"].to(inputs["completion_mask"].dtype)
        tool_mask = inputs.get("tool_mask")
        inputs = {**inputs, "tool_mask": keep if tool_mask is None else tool_mask * keep}
        if self.loss_type == "grpo" and inputs.get("ict_rows_selected") is not None:
            inputs["advantages"] = inputs["advantages"] * self._ict_seq_mean_scale(inputs)
        logged = self._metrics["train" if self.model.training else "eval"]
        before = len(logged.get("clip_ratio/region_mean", ()))  # .get: no empty key for TRL's log
        loss = super()._compute_loss(model, inputs)
        region = logged.get("clip_ratio/region_mean", ())
        if len(region) > before:  # ict's key for TRL's own clip fraction (the same tokens)
            logged["clip_fraction"].append(region[-1])
        return loss

    def _ict_on_policy(self, inputs):
        """The first optimizer step of a generation batch runs on the weights that generated it:
        TRL's stored old log-probs then equal the current ones up to the rounding of two passes.
        Without them (None) TRL's loss and ict's use the current log-probs, detached, so the
        importance ratio is exactly 1 there, as on the native trainer and verl (METHOD.md,
        "Clip-Cov and KL-Cov"). TRL's `_step` counts micro-batches; a generation batch feeds
        steps_per_generation x num_iterations of them, the first gradient_accumulation_steps
        being its first optimizer step."""
        if not self.model.training or inputs.get("old_per_token_logps") is None:
            return inputs
        generate_every = self.args.steps_per_generation * self.num_iterations
        if self._step % generate_every < self.args.gradient_accumulation_steps:
            return {**inputs, "old_per_token_logps": None}
        return inputs

    def _ict_compute_loss(self, model, inputs, loss_config: LossConfig) -> torch.Tensor:
        """ict's loss on one micro-batch: `ict.loss.policy_loss` (the native trainer's) on TRL's own
        log-probs and entropies (`_get_per_token_logps_and_entropies`, as TRL's `_compute_loss`
        gets them), the old log-probs TRL kept (or the detached current ones when TRL has none:
        one update per generation batch), the selected tokens, and the per-optimizer-step
        normaliser of `_ict_set_normalisers`: the losses of an optimizer step's micro-batches sum
        to the native mini-batch loss. The loss mode's covariance and token counts are those of
        this micro-batch (one loss call, as natively and in verl); Clip-Cov draws from torch's
        global generator. The MoE auxiliary loss is added as TRL adds it."""
        prompt_ids, prompt_mask = inputs["prompt_ids"], inputs["prompt_mask"]
        completion_ids, completion_mask = inputs["completion_ids"], inputs["completion_mask"]
        input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
        attention_mask = torch.cat([prompt_mask, completion_mask], dim=1)
        per_token_logps, entropies, aux_loss = self._get_per_token_logps_and_entropies(
            model, input_ids, attention_mask, completion_ids.size(1), compute_entropy=True,
            compute_aux_loss=self.aux_loss_enabled,
            **{k: inputs.get(k) for k in TRL_MODEL_KWARGS},
        )  # fmt: skip
        old = inputs.get("old_per_token_logps")
        old = per_token_logps.detach() if old is None else old
        valid = self._valid_mask(inputs)
        loss, metrics = policy_loss(
            per_token_logps, old, inputs["advantages"], valid, inputs["ict_selected"],
            loss_config, entropy=entropies, denominator=inputs["ict_loss_denominator"],
            ref_logprob=inputs.get("ref_per_token_logps") if loss_config.kl_coef else None,
        )  # fmt: skip
        mode = "train" if self.model.training else "eval"
        if self.aux_loss_enabled:
            normalizer = self.current_gradient_accumulation_steps if mode == "train" else 1.0
            loss = loss + self.router_aux_loss_coef * aux_loss / normalizer
            self._metrics[mode]["aux_loss"].append(
                self.accelerator.gather_for_metrics(aux_loss).mean().item()
            )
        tokens = int((valid & inputs["ict_selected"].bool()).sum())
        self._ict_log_loss(mode, metrics, tokens)
        if loss_config.loss_mode != "vanilla":
            self._ict_count_loss_mode(mode, metrics, tokens, loss_config)
        return loss

    def _ict_log_loss(self, mode, metrics: dict, tokens: int) -> None:
        """ict's loss metrics (fractions and means over this micro-batch's loss tokens) under
        TRL's names (`ICT_LOSS_METRICS`; the clip fraction also as ict's `clip_fraction`),
        averaged over every process's loss tokens, and TRL's `policy_loss` (the loss without the
        entropy bonus), averaged over processes."""
        keys = [k for k in ICT_LOSS_METRICS if k in metrics]
        device = self.accelerator.device
        # the policy term (TRL's `policy_loss`): this micro-batch's share of the optimizer step's,
        # times the accumulation steps, so that TRL's running mean over them is the step's value
        steps = self.current_gradient_accumulation_steps if mode == "train" else 1
        values = [metrics[k] * tokens for k in keys] + [tokens, metrics["pg_loss"] * steps]
        totals = self.accelerator.reduce(
            torch.tensor(values, device=device, dtype=torch.float32), reduction="sum"
        )
        self._metrics[mode]["policy_loss"].append(
            float(totals[-1]) / self.accelerator.num_processes
        )
        if mode == "train" and self.accelerator.sync_gradients and self.args.entropy_coef:
            # ict's bonus coefficient, logged once per optimizer step as TRL logs its own
            self._metrics[mode]["entropy_coef"].append(float(self.args.entropy_coef))
        if float(totals[-2]) > 0:
            for key, total in zip(keys, totals[:-2].tolist(), strict=True):
                self._metrics[mode][ICT_LOSS_METRICS[key]].append(total / float(totals[-2]))
                if key == "clip_fraction":
                    self._metrics[mode]["clip_fraction"].append(total / float(totals[-2]))

    def _ict_count_loss_mode(self, mode, metrics: dict, tokens: int, loss_config) -> None:
        """The loss mode's counts (tokens it changed, loss tokens |M|), summed over the optimizer
        step's micro-batches (train: the accumulation steps; eval: one call) and every process,
        then logged once per optimizer step as ict.loss.modes.loss_mode_metrics
        (`loss_mode/changed_tokens`, `loss_mode/changed_rate`, `loss_mode/nominal_rate`)."""
        counts = self._ict_mode_counts.setdefault(mode, [0, 0, 0])  # changed, tokens, calls
        counts[0] += int(metrics["loss_mode/changed_tokens"])
        counts[1] += tokens
        counts[2] += 1
        if counts[2] < (self.current_gradient_accumulation_steps if mode == "train" else 1):
            return
        del self._ict_mode_counts[mode]
        totals = self.accelerator.reduce(
            torch.tensor(counts[:2], device=self.accelerator.device, dtype=torch.float64),
            reduction="sum",
        )
        changed, loss_tokens = (int(x) for x in totals.tolist())
        step = loss_mode_metrics(
            loss_config.loss_mode, loss_config.covariance, changed, loss_tokens
        )
        for key, value in step.items():
            self._metrics[mode][key].append(value)

    def _ict_seq_mean_scale(self, inputs) -> torch.Tensor:
        """seq_mean_token_mean: TRL's "grpo" loss averages over every response (B per micro-batch,
        / gradient accumulation, averaged over ranks); METHOD.md (and verl) over the responses with
        at least one selected token. The clipped loss is positively homogeneous in A, so scaling A
        by (responses TRL divides by) / (responses with a selected token, all ranks) gives the
        METHOD.md value and leaves the KL term, entropy bonus and clip metrics as TRL has them."""
        accumulation = self.current_gradient_accumulation_steps if self.model.training else 1
        rows = inputs["completion_ids"].size(0) * accumulation * self.accelerator.num_processes
        return rows / inputs["ict_rows_selected"].clamp(min=1.0)
