"""The smallest version-checked patches that get old-policy token statistics to the loss.

verl 0.9.1 computes entropy inside `FSDPEngineWithLMHead.prepare_model_outputs` and hands a
registered policy loss nothing but log-probs, advantages and the mask. Five wrappers close the gap,
and a sixth checks the config at start-up (each calls verl's original; nothing else changes):

worker  FSDPEngine.forward_backward_batch
          old-policy pass (batch meta `ict_stats`): run verl's forward; the hook below adds H and
          H2 per token and sums p over the valid positions; all-reduce the sum and the count over
          the data-parallel group -> reference r (batch_mean); for `ict`, run the forward a second
          time and add JS(p_t, r). Update pass: sum the driver's per-row normaliser counts
          (`ict_row_counts`) over the mini-batch and the DP ranks (the loss denominator, as verl
          does for `batch_num_tokens`).
          With an entropy bonus (`ict_loss_settings`), turns on verl's `calculate_entropy`.
worker  FSDPEngineWithLMHead.prepare_model_outputs
          scores the rows that predict valid response tokens from the logits verl built (chunked);
          and hands the micro-batch's `ict_selected`, loss settings and (for the entropy bonus)
          the entropy verl computed to the registered loss (loss.micro_batch).
worker  FSDPEngine.train_batch (metrics.py)
          the step's `update/param_change_rel` and the loss mode's `loss_mode/*` counts.
driver  RayPPOTrainer._compute_old_log_prob
          asks the workers for the statistics and keeps them in the batch (`ict_entropy`, ...).
driver  RayPPOTrainer._update_actor
          selects tokens over the whole rollout batch (all DP ranks' data, so the selection is
          global) by the run's step (ict.step.StepRun), now that advantages exist (STAPO needs
          them), ships each row's normaliser counts with the selection, sends the method's loss
          settings (normaliser, aggregation, loss mode, entropy bonus), logs metrics
          (and the step keys every engine logs: metrics.driver_metrics).
start   verl.utils.config.validate_config (main_ppo calls it before Ray starts)
          reads the `ict:` section with from_verl_config: bad settings, and verl's v1 trainer
          (`trainer.use_v1=true`, whose PPOTrainer is not RayPPOTrainer), stop the run in one line.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from typing import Any

import torch

import ict.integrations.verl.loss as ict_loss
from ict.errors import ConfigError

from .config import IctVerlConfig, from_verl_config
from .metrics import driver_metrics, wrap_train_batch
from .stats import chunked_token_stats, response_rows, scatter_packed

STATS_REQUEST_KEY = (
    "ict_stats"  # batch meta-data: {"reference": "batch_mean" | None, "chunk_size": int}
)
STAT_KEYS = ("ict_entropy", "ict_renyi2", "ict_js", "ict_kl")
GROUP_KEY = "ict_group"  # long [B] in the batch of the old-policy pass: prompt index (from uid)
_PATCHED_ATTR = "__ict_patched__"
logger = logging.getLogger("ict.integrations.verl")


class _OldPolicyPass:
    """State of one old-policy forward over a batch on one rank (set by forward_backward_batch).

    reference: None (batch_mean pass 1: H, H2, sum of p), a [V] tensor (batch_mean pass 2: JS to
    it) or "group_position" (one pass: H, H2 and the paper's score by ict.stats per micro-batch,
    every rollout of a prompt in the same micro-batch; group_size G, divergence "js"/"kl").
    """

    def __init__(
        self,
        chunk_size: int,
        reference: torch.Tensor | str | None = None,
        *,
        group_size: int = 1,
        divergence: str = "js",
        process_group=None,
    ):
        self.chunk_size = chunk_size
        self.reference = reference
        self.group_size = group_size
        self.divergence = divergence
        self.process_group = process_group
        self.prob_sum: torch.Tensor | None = None
        self.count = 0


PASS_ATTR = "_ict_old_policy_pass"  # on verl's engine: the pass in progress on this rank


def _non_tensor(data: Any, key: str, default: Any = None) -> Any:
    from verl.utils import tensordict_utils as tu

    return tu.get_non_tensor_data(data=data, key=key, default=default)


def _sequence_layout(micro_batch: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(seq_lens [B], response_lens [B], response_mask [B, R]) of a micro-batch, as verl's
    `no_padding_2_padding` reads them."""
    input_ids = micro_batch["input_ids"]
    seq_lens = input_ids.offsets().diff()
    responses = micro_batch["responses"]
    if responses.is_nested:
        response_lens = responses.offsets().diff()
    else:
        prompt_width = micro_batch["prompts"].shape[1]
        response_lens = micro_batch["attention_mask"][:, prompt_width:].sum(dim=1)
    response_mask = micro_batch["response_mask"]
    if response_mask.is_nested:
        response_mask = response_mask.to_padded_tensor(0)
    return seq_lens, response_lens, response_mask


def _temperature_per_row(micro_batch: Any, batch_index: torch.Tensor) -> torch.Tensor:
    temperature = micro_batch["temperature"]
    if isinstance(temperature, torch.Tensor) and temperature.numel() > 1:
        return temperature.float().to(batch_index.device)[batch_index]
    value = float(temperature.item() if isinstance(temperature, torch.Tensor) else temperature)
    return torch.full(batch_index.shape, value, dtype=torch.float32, device=batch_index.device)


def score_micro_batch(
    state: _OldPolicyPass, logits: torch.Tensor, micro_batch: Any
) -> dict[str, torch.Tensor]:
    """Statistics of one micro-batch as packed vectors [nnz] (verl's layout for `log_probs`).

    logits: [1, nnz(+pad), V] (remove-padding path) or [B, L, V] (padded path), unscaled.
    """
    seq_lens, response_lens, response_mask = _sequence_layout(micro_batch)
    device = logits.device
    padded_width = (
        logits.shape[1]
        if logits.shape[0] > 1 or not bool(_non_tensor(micro_batch, "use_remove_padding", True))
        else None
    )
    rows = response_rows(
        seq_lens.to(device),
        response_lens.to(device),
        response_mask.to(device),
        padded_width=padded_width,
    )
    temperature = _temperature_per_row(micro_batch, rows.batch)
    flat_logits = logits.reshape(-1, logits.shape[-1])
    total = int(seq_lens.sum())
    if isinstance(state.reference, str):  # "group_position": ict.stats on verl's layout
        return {
            f"ict_{k}": scatter_packed(v, rows, total)
            for k, v in _group_position(state, flat_logits, rows, temperature, micro_batch).items()
        }
    stats = chunked_token_stats(
        flat_logits, rows.flat, temperature, reference=state.reference, chunk_size=state.chunk_size
    )
    out = {}
    if state.reference is None:
        state.prob_sum = (
            stats["prob_sum"] if state.prob_sum is None else state.prob_sum + stats["prob_sum"]
        )
        state.count += rows.flat.numel()
        out["ict_entropy"] = scatter_packed(stats["entropy"], rows, total)
        out["ict_renyi2"] = scatter_packed(stats["renyi2"], rows, total)
    else:
        out["ict_js"] = scatter_packed(stats["js"], rows, total)
    return out


def _group_position(state, flat_logits, rows, temperature, micro_batch) -> dict:
    """ict.stats' group_position statistics [n] of one micro-batch; DataError unless it holds
    every rollout of each of its prompts (the forward_backward_batch hook arranges that)."""
    from ict.errors import DataError

    from .stats import group_position_stats

    groups = micro_batch[GROUP_KEY].long().to(flat_logits.device)
    _, counts = torch.unique(groups, return_counts=True)
    if bool((counts != state.group_size).any()):
        raise DataError(
            f"an old-policy micro-batch holds {counts.tolist()} rollouts of its prompts, not "
            f"rollout.n = {state.group_size} each: the group_position score needs whole groups"
        )
    if temperature.numel() and bool((temperature != temperature[0]).any()):
        raise ConfigError(
            "ict.reference=group_position needs one sampling temperature per batch (the rows of a "
            "micro-batch have several): use one actor_rollout_ref.rollout.temperature"
        )
    value = float(temperature[0]) if temperature.numel() else 1.0
    tokens = torch.zeros(flat_logits.shape[0], dtype=torch.long, device=flat_logits.device)
    ids = micro_batch["input_ids"]
    ids = (ids.values() if ids.is_nested else ids.reshape(-1)).to(flat_logits.device)
    # the row predicting a response token holds the next input id (packed: packed + 1)
    tokens[rows.flat] = ids[rows.packed + 1]
    return group_position_stats(
        flat_logits, rows, tokens, groups, value, chunk_size=state.chunk_size,
        process_group=state.process_group, divergence=state.divergence,
    )  # fmt: skip


def _nested_like(values: torch.Tensor, micro_batch: Any) -> torch.Tensor:
    offsets = micro_batch["input_ids"].offsets()
    return torch.nested.nested_tensor_from_jagged(values, offsets.to(values.device))


# ----------------------------------------------------------------------------- worker side
def _wrap_prepare_model_outputs(original):
    @functools.wraps(original)
    def prepare_model_outputs(self, output, output_args, micro_batch, logits_processor_func):
        selected = (
            micro_batch.get(ict_loss.SELECTED_KEY, None) if hasattr(micro_batch, "get") else None
        )
        selection = None
        if selected is not None:
            if selected.is_nested:
                selected = selected.to_padded_tensor(0)
            selection = ict_loss.MicroBatchSelection(
                selected=selected.bool(),
                normalize_by=_non_tensor(micro_batch, ict_loss.NORMALIZE_KEY, "selected"),
                num_selected=_non_tensor(micro_batch, ict_loss.NUM_SELECTED_KEY, None),
                num_rows=_non_tensor(micro_batch, ict_loss.NUM_ROWS_KEY, None),
                loss_agg=_non_tensor(micro_batch, ict_loss.LOSS_AGG_KEY, None),
                **ict_loss.settings_fields(
                    _non_tensor(micro_batch, ict_loss.LOSS_SETTINGS_KEY, None)
                ),
            )
        ict_loss.set_current(selection)
        model_output = original(self, output, output_args, micro_batch, logits_processor_func)
        if selection is not None and selection.needs_entropy:
            # the bonus's (or the shaping's) entropy: verl's own (with grad), in the loss's padded
            # response layout
            from verl.workers.utils.padding import no_padding_2_padding

            entropy = model_output.get("entropy", None)
            if entropy is None:
                raise ConfigError(
                    "ict.entropy_coef / entropy_advantage need verl's entropy in the update pass, "
                    "which verl did not "
                    "compute: set actor_rollout_ref.actor.calculate_entropy=True"
                )
            selection.entropy = no_padding_2_padding(entropy, micro_batch)
        # the engine object carries the pass from forward_backward_batch to here (same instance)
        state = getattr(self, PASS_ATTR, None)
        if state is not None:
            logits = getattr(output, "logits", None)
            if logits is None or _non_tensor(micro_batch, "use_fused_kernels", False):
                raise ConfigError(
                    "the ict losses need the logits, which fused kernels never build: "
                    "set actor_rollout_ref.model.use_fused_kernels=False"
                )
            if getattr(self, "use_ulysses_sp", False):
                raise ConfigError(
                    "the ict losses do not support Ulysses sequence parallelism yet: "
                    "set actor_rollout_ref.actor.ulysses_sequence_parallel_size=1"
                )
            if hasattr(logits, "full_tensor"):  # tensor parallel: DTensor sharded on vocab
                logits = logits.full_tensor()
            for key, values in score_micro_batch(state, logits.detach(), micro_batch).items():
                model_output[key] = _nested_like(values, micro_batch)
        return model_output

    setattr(prepare_model_outputs, _PATCHED_ATTR, True)
    return prepare_model_outputs


def _keep_groups_in_micro_batches(data: Any, group_size: int) -> None:
    """Make every old-policy micro-batch hold whole groups of `group_size` consecutive rows (the
    driver checked that each rank's rows are whole groups in consecutive blocks): with dynamic batch
    sizes through verl's own `force_group_size`; with a fixed micro-batch size, by requiring it to
    be a multiple of G (the same ConfigError on every rank, before any collective)."""
    from verl.utils import tensordict_utils as tu

    if _non_tensor(data, "use_dynamic_bsz", True):
        tu.assign_non_tensor(data, force_group_size=group_size)
        return
    micro = int(_non_tensor(data, "micro_batch_size_per_gpu", group_size))
    if micro % group_size:
        raise ConfigError(
            f"ict.reference=group_position (the paper's score) needs every rollout of a prompt in "
            f"one old-policy micro-batch, but actor_rollout_ref.rollout.log_prob_micro_batch_size_"
            f"per_gpu = {micro} is not a multiple of actor_rollout_ref.rollout.n = {group_size}: "
            "make it a multiple, or set actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True"
        )


def _all_reduce(tensor: torch.Tensor, group) -> torch.Tensor:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.all_reduce(tensor, op=torch.distributed.ReduceOp.SUM, group=group)
    return tensor


def _wrap_forward_backward_batch(original):
    @functools.wraps(original)
    def forward_backward_batch(self, data, loss_function, forward_only=False):
        request = _non_tensor(data, STATS_REQUEST_KEY, None)
        if forward_only and request and request.get("reference") == "group_position":
            state = _OldPolicyPass(
                int(request.get("chunk_size", 1024)), "group_position",
                group_size=int(request["group_size"]), divergence=request.get("divergence", "js"),
                process_group=self.get_data_parallel_group(),
            )  # fmt: skip
            _keep_groups_in_micro_batches(data, state.group_size)
            setattr(self, PASS_ATTR, state)
            try:
                return original(self, data, loss_function, forward_only)
            finally:
                setattr(self, PASS_ATTR, None)
        if forward_only and request:
            chunk_size = int(request.get("chunk_size", 1024))
            first = _OldPolicyPass(chunk_size)
            setattr(self, PASS_ATTR, first)
            try:
                output = original(self, data, loss_function, forward_only)
            finally:
                setattr(self, PASS_ATTR, None)
            if request.get("reference") is None:
                return output
            group = self.get_data_parallel_group()
            device = first.prob_sum.device if first.prob_sum is not None else torch.device("cpu")
            prob_sum = (
                first.prob_sum if first.prob_sum is not None else torch.zeros(1, device=device)
            )
            count = torch.tensor([float(first.count)], device=device)
            _all_reduce(prob_sum, group)
            _all_reduce(count, group)
            reference = prob_sum / count.clamp_min(1.0)
            setattr(self, PASS_ATTR, _OldPolicyPass(chunk_size, reference=reference))
            try:
                second = original(self, data, None, forward_only)
            finally:
                setattr(self, PASS_ATTR, None)
            output["model_output"]["ict_js"] = second["model_output"]["ict_js"]
            return output
        if not forward_only and ict_loss.SELECTED_KEY in data.keys():
            from verl.utils import tensordict_utils as tu
            from verl.workers.engine.fsdp import transformer_impl

            if ict_loss.ROW_COUNTS_KEY not in data.keys():
                raise ConfigError(
                    f"the update batch has '{ict_loss.SELECTED_KEY}' but no "
                    f"'{ict_loss.ROW_COUNTS_KEY}' (the driver's per-row normaliser counts): load "
                    "the plugin in the driver too (VERL_USE_EXTERNAL_MODULES=ict.integrations.verl)"
                )
            rows = data[ict_loss.ROW_COUNTS_KEY]
            rows = rows.to_padded_tensor(0) if rows.is_nested else rows
            # the mini-batch's normalisers: its rows' counts (the driver's run), all DP ranks
            counts = _all_reduce(
                rows.float().sum(0).to(transformer_impl.get_device_id()),
                self.get_data_parallel_group(),
            )
            tu.assign_non_tensor(
                data,
                **{
                    ict_loss.NUM_SELECTED_KEY: int(counts[0]),
                    ict_loss.NUM_ROWS_KEY: int(counts[1]),
                },
            )
            settings = _non_tensor(data, ict_loss.LOSS_SETTINGS_KEY, None) or {}
            if settings.get("entropy_coef", 0.0) != 0.0 or settings.get("entropy_advantage", 0.0):
                # the bonus and the shaping read verl's entropy
                tu.assign_non_tensor(data, calculate_entropy=True)
        return original(self, data, loss_function, forward_only)

    setattr(forward_backward_batch, _PATCHED_ATTR, True)
    return forward_backward_batch


# ----------------------------------------------------------------------------- driver side
def _padded(values, batch_td):
    from verl.workers.utils.padding import no_padding_2_padding

    return no_padding_2_padding(values, batch_td).float()


def _wrap_compute_old_log_prob(original):
    @functools.wraps(original)
    def _compute_old_log_prob(self, batch):
        spec = from_verl_config(self.config)
        if spec is None:
            return original(self, batch)
        worker_group = self.actor_rollout_wg
        call = worker_group.compute_log_prob
        captured = {}

        def compute_log_prob(batch_td, *args, **kwargs):
            captured["input"] = batch_td
            captured["output"] = call(batch_td, *args, **kwargs)
            return captured["output"]

        request = spec.stats_request()
        if request["reference"] == "group_position":
            group_size = int(_get_cfg(self.config, "actor_rollout_ref.rollout.n", 1))
            batch.batch[GROUP_KEY] = whole_group_ids(
                batch.non_tensor_batch.get("uid"), group_size, _dp_size(self, worker_group)
            )
            request["group_size"] = group_size
        batch.meta_info[STATS_REQUEST_KEY] = request
        worker_group.compute_log_prob = compute_log_prob
        try:
            old_log_prob, mfu = original(self, batch)
        finally:
            worker_group.compute_log_prob = call
            batch.meta_info.pop(STATS_REQUEST_KEY, None)
            if GROUP_KEY in batch.batch.keys():
                batch.batch.pop(GROUP_KEY)
        output = captured["output"]
        wanted = ["ict_entropy", "ict_renyi2"] + (["ict_js"] if spec.needs_js else [])
        wanted += ["ict_kl"] if request.get("divergence") == "kl" else []
        missing = [key for key in wanted if key not in output.keys()]
        if missing:
            raise ConfigError(
                f"the actor workers returned no {missing}: the ict plugin is not loaded in the Ray "
                "workers or the actor engine is not FSDP. Install ict in the verl environment "
                "(its `verl.plugins` entry point loads it everywhere) and use strategy fsdp/fsdp2"
            )
        for key in wanted:
            old_log_prob.batch[key] = _padded(output[key], captured["input"])
        return old_log_prob, mfu

    setattr(_compute_old_log_prob, _PATCHED_ATTR, True)
    return _compute_old_log_prob


def _get_cfg(cfg: Any, dotted: str, default: Any = None) -> Any:
    from .config import _get

    return _get(cfg, dotted, default)


def _dp_size(trainer: Any, worker_group: Any) -> int:
    """verl's data-parallel size of the actor (its own helper when present)."""
    getter = getattr(trainer, "_get_dp_size", None)
    if getter is not None:
        return int(getter(worker_group, "actor"))
    return int(getattr(worker_group, "world_size", 1))


def whole_group_ids(uids: Any, group_size: int, dp_size: int) -> torch.Tensor:
    """Prompt index [B] (long) of each row, from verl's `uid`, after checking that every prompt's
    G = rollout.n rollouts sit in one aligned block of G consecutive rows and that every
    data-parallel rank (B / dp_size consecutive rows) holds whole blocks: then each rank, and each
    old-policy micro-batch (see `_keep_groups_in_micro_batches`), scores whole groups, and the
    paper's score equals the single-process one. ConfigError naming the setting otherwise."""
    import numpy as np

    if uids is None:
        raise ConfigError(
            "ict.reference=group_position needs the batch's `uid` (the prompt of each rollout), "
            "which verl's GRPO adds: use algorithm.adv_estimator=grpo (or another grouped one)"
        )
    _, ids = np.unique(np.asarray(uids, dtype=object).astype(str), return_inverse=True)
    ids = torch.as_tensor(ids, dtype=torch.long)
    B = ids.numel()
    blocks_ok = B % group_size == 0 and bool(
        (ids.view(-1, group_size) == ids.view(-1, group_size)[:, :1]).all()
    )
    if not blocks_ok or torch.unique(ids).numel() != B // group_size:
        raise ConfigError(
            "ict.reference=group_position (the paper's score) needs each prompt's rollout.n "
            f"= {group_size} rollouts on consecutive rows of the batch, but this batch is "
            "reordered (verl's balance_batch moves single rollouts between data-parallel ranks): "
            "set trainer.balance_batch=False, or ict.reference=batch_mean"
        )
    if (B // dp_size) % group_size or B % dp_size:
        raise ConfigError(
            f"ict.reference=group_position: the batch of {B} rollouts splits into {dp_size} "
            f"data-parallel shards of {B / dp_size:g} rows, not whole groups of rollout.n = "
            f"{group_size}: make data.train_batch_size a multiple of the number of actor GPUs"
        )
    return ids


def select_batch(
    batch_tensors: dict[str, torch.Tensor],
    spec: IctVerlConfig,
    step: int,
    plan=None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Select tokens over the whole rollout batch; returns (selected [B, R] bool, metrics).

    batch_tensors: response_mask, advantages, old_log_probs, responses, ict_entropy, ict_renyi2
    (and ict_js for ICT), all [B, R] in verl's padded response layout. step: verl's global step
    (1-based, one per rollout batch, as the native trainer's step and TRL's generation batch);
    plan: the run's ict.step.StepPlan (`run_plan`; default: the section's over a run of
    unknown length).
    The selection, warm-up, seed, diagnostics and metrics are the plan's run's
    (ict.step.StepPlan.begin, StepRun.finish), metrics under "ict/"."""
    from ict.stats import TokenStats
    from ict.step import StepInputs, StepRun

    plan = plan or spec.plan(None)
    mask = batch_tensors["response_mask"].bool()
    # a run that computed no JS has none: select_step then leaves out the diagnostics reading it
    stats = TokenStats(
        entropy=batch_tensors["ict_entropy"] * mask,
        renyi2=batch_tensors["ict_renyi2"] * mask,
        logprob=batch_tensors["old_log_probs"].float() * mask,
        js=batch_tensors["ict_js"] * mask if "ict_js" in batch_tensors else None,
        kl=batch_tensors["ict_kl"] * mask if "ict_kl" in batch_tensors else None,
    )
    inputs = StepInputs(mask, stats, batch_tensors["advantages"], batch_tensors.get("responses"))
    run: StepRun = plan.begin(inputs, step=step)
    if stats.js is None:  # the metrics' js columns read 0, as before
        stats = dataclasses.replace(stats, js=torch.zeros_like(stats.entropy))
    result = run.finish(stats)
    selection = result.selection
    metrics = {f"ict/{k}": v for k, v in result.metrics.items()}
    metrics["ict/selected_fraction_batch"] = metrics["ict/selected_fraction"]
    return selection.selected, metrics


def run_plan(trainer, spec: IctVerlConfig):
    """The step the driver `trainer` runs (ict.step.StepPlan), resolved once per run from the
    `ict:` section and verl's total_training_steps, with the warning logged once when an explicit
    warm-up covers the whole run."""
    total = getattr(trainer, "total_training_steps", None)
    cached = getattr(trainer, "_ict_run_plan", None)
    if cached is not None and cached[0] == (spec, total):
        return cached[1]
    plan = spec.plan(total)
    if plan.warning:
        logger.warning("%s", plan.warning)
    trainer._ict_run_plan = ((spec, total), plan)
    return plan


def _wrap_update_actor(original):
    @functools.wraps(original)
    def _update_actor(self, batch):
        spec = from_verl_config(self.config)
        if spec is None:
            return original(self, batch)
        if "ict_entropy" not in batch.batch.keys():
            raise ConfigError(
                "no old-policy token statistics in the batch: the ict losses need the old log-probs "
                "recomputed by the actor (algorithm.rollout_correction.bypass_mode=false)"
            )
        tensors = {k: batch.batch[k] for k in batch.batch.keys()}
        plan = run_plan(self, spec)
        method = plan.method
        selected, metrics = select_batch(tensors, spec, int(getattr(self, "global_steps", 0)), plan)
        for key in STAT_KEYS:
            if key in batch.batch.keys():
                batch.batch.pop(key)
        batch.batch[ict_loss.SELECTED_KEY] = selected
        # the normaliser's per-row counts (the run's, as TRL's), summed by the workers per update
        mask = batch.batch["response_mask"].bool()
        batch.batch[ict_loss.ROW_COUNTS_KEY] = ict_loss.counts_column(plan.counts(mask, selected))
        batch.meta_info[ict_loss.NORMALIZE_KEY] = method.normalize_by
        batch.meta_info[ict_loss.LOSS_AGG_KEY] = method.loss_agg
        batch.meta_info[ict_loss.LOSS_SETTINGS_KEY] = spec.loss_settings(method)
        try:
            actor_output = original(self, batch)
        finally:
            for key in (ict_loss.NORMALIZE_KEY, ict_loss.LOSS_AGG_KEY, ict_loss.LOSS_SETTINGS_KEY):
                batch.meta_info.pop(key, None)
        actor_output.meta_info.setdefault("metrics", {}).update(metrics)
        driver_metrics(actor_output.meta_info["metrics"], batch)  # the step keys (metrics.py)
        return actor_output

    setattr(_update_actor, _PATCHED_ATTR, True)
    return _update_actor


def _wrap_validate_config(original):
    """verl's start-up check (main_ppo calls it before Ray starts): the `ict:` section and the
    trainer are checked here too, so a bad setting or `trainer.use_v1=true` stops the run in one
    line before any worker starts."""

    @functools.wraps(original)
    def validate_config(config, *args, **kwargs):
        from_verl_config(config)
        return original(config, *args, **kwargs)

    setattr(validate_config, _PATCHED_ATTR, True)
    return validate_config


def _patch(owner, name: str, wrapper) -> None:
    original = getattr(owner, name)
    if getattr(original, _PATCHED_ATTR, False):
        return
    setattr(owner, name, wrapper(original))


def apply_patches() -> None:
    """Install the five wrappers and the start-up check (idempotent)."""
    import verl.utils.config as verl_config
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngine, FSDPEngineWithLMHead

    _patch(FSDPEngineWithLMHead, "prepare_model_outputs", _wrap_prepare_model_outputs)
    _patch(FSDPEngine, "forward_backward_batch", _wrap_forward_backward_batch)
    _patch(FSDPEngine, "train_batch", wrap_train_batch)  # the step metrics (metrics.py)
    _patch(RayPPOTrainer, "_compute_old_log_prob", _wrap_compute_old_log_prob)
    _patch(RayPPOTrainer, "_update_actor", _wrap_update_actor)
    _patch(verl_config, "validate_config", _wrap_validate_config)
