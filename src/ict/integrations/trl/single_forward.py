"""One forward per micro-batch for `ICTGRPOTrainer` when the update is on-policy (issue 31).

The two-pass path runs a no-grad forward of the policy at generation time for ict's token
statistics, then TRL's loss runs another forward. When a generation batch feeds exactly one
optimizer step (train mode, `num_iterations == 1`, `steps_per_generation ==
gradient_accumulation_steps`), the policy of the loss forward is the policy that generated the
batch, so the statistics can come from the loss forward itself: a forward hook on the backbone
keeps the final hidden states (the fused LM head's input), and `ict_stats_from_hidden` computes
H, H2, log p(y) and the score from them, detached. Whether a run can, and if not why, is
decided once by ict.step.StepPlan (ict.step.one_forward_off) from TRL's layout
(`trl_layout`: TRL's own reasons); the plan also says when the selection is made: up front on the
whole generation batch (no statistic read, or the warm-up), or per micro-batch of whole groups
(`regroup`) for a per-row top-k, its normaliser set up front from the per-row counts
(`StepPlan.before_statistics`).

Several processes change nothing of this: each holds whole groups (a group reference is checked
at set-up, ict.integrations.trl.stats.check_whole_groups), a per-row selection reads its own
rows only, an up-front one is the two-pass path's call, and the normaliser counts and the
metrics are reduced over the processes at the same points as on the two-pass path, so the step
is the two-pass step (tests/integrations/test_trl_distributed.py).
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from torch import Tensor

from ict.integrations.trl.loss import TRL_MODEL_KWARGS
from ict.stats import STAT_FIELDS
from ict.step import StepInputs, StepLayout, StepRun

# TRL loss types whose sum over an optimizer step's equal-sized micro-batches does not depend on
# how its rows are split (per-row means averaged over rows, or a step-wide normaliser); "bnpo"
# divides by each micro-batch's own token count
PARTITION_FREE_LOSSES = ("grpo", "sapo", "dr_grpo", "dapo", "cispo", "vespo", "luspo")


def trl_layout(
    args,
    method,
    *,
    total_batches,
    num_iterations: int,
    group_size: int,
    processes: int,
    multimodal: bool,
) -> StepLayout:
    """TRL's layout of the step (ict.step.StepLayout) for an ICTGRPOConfig `args` running the
    resolved `method`: `total_batches` generation batches of steps_per_generation micro-batches on
    `processes` processes, the statistics of each micro-batch from its own forward, and TRL's own
    reasons against the single forward (off, off-policy, a multimodal model; with several
    micro-batches, whatever makes the rows' split into micro-batches matter)."""
    spg, ga = args.steps_per_generation, args.gradient_accumulation_steps
    engine_off = None
    if not args.one_forward:
        engine_off = "one_forward=False: the statistics forward runs (two-pass path)"
    elif num_iterations != 1 or spg != ga:
        engine_off = (
            f"off-policy: num_iterations={num_iterations}, steps_per_generation={spg}, "
            f"gradient_accumulation_steps={ga} (one optimizer step per generation batch needs "
            "num_iterations=1 and steps_per_generation == gradient_accumulation_steps)"
        )
    elif multimodal:
        engine_off = "a multimodal model (its batches carry images that are not regrouped)"
    return StepLayout(
        total_batches=total_batches, micro_batches=spg, processes=processes,
        engine_off=engine_off, stats_per_micro_batch=True,
        split_off=_split_off(args, method, group_size) if spg > 1 else None,
    )  # fmt: skip


def _split_off(args, method, group_size: int) -> str | None:
    """Why TRL's micro-batches, regrouped into whole groups in generation order (`regroup`),
    would not give the step that the two-pass path gives (None: they would)."""
    if method.scope == "micro_batch":
        return "scope='micro_batch' selects inside TRL's own (shuffled) micro-batches"
    if args.per_device_train_batch_size % group_size:
        return (
            f"per_device_train_batch_size={args.per_device_train_batch_size} is not a "
            f"multiple of num_generations={group_size}: a micro-batch cannot hold whole groups"
        )
    dependent = [
        (method.loss_mode != "vanilla", f"loss_mode={method.loss_mode!r} (per micro-batch)"),
        (args.loss_type not in PARTITION_FREE_LOSSES, f"loss_type={args.loss_type!r}"),
        (args.use_adaptive_entropy, "TRL's adaptive entropy bonus (per micro-batch)"),
        (args.top_entropy_quantile < 1.0, "TRL's top_entropy_quantile (per micro-batch)"),
    ]
    for bad, what in dependent:
        if bad:
            return f"{what} depends on how the rows are split into micro-batches"
    return None


def _take(value, index: Tensor):
    """`value` ([N, ...] tensor or list of N) at rows `index`; a 0-d tensor or None as is."""
    if value is None or (isinstance(value, Tensor) and value.ndim == 0):
        return value
    if isinstance(value, Tensor):
        return value[index.to(value.device)]
    return [value[i] for i in index.tolist()]


def _cat(values: list):
    first = values[0]
    if first is None or (isinstance(first, Tensor) and first.ndim == 0):
        return first
    if isinstance(first, Tensor):
        return torch.cat(values, dim=0)
    return [v for part in values for v in part]


def regroup(chunks: list[dict], rows_key: str = "ict_row") -> list[dict]:
    """TRL's shuffled micro-batches of one generation batch, re-split into as many micro-batches
    of the same size in generation order (`rows_key`: each row's index in it), so that each holds
    whole groups when its size is a multiple of the group size (a group's rows are consecutive in
    generation order). 0-d tensors (TRL's `num_items_in_batch`) are shared; None stays None."""
    merged = {key: _cat([c[key] for c in chunks]) for key in chunks[0]}
    order = torch.argsort(merged[rows_key].cpu())
    size = chunks[0][rows_key].size(0)
    return [
        {key: _take(v, order[i : i + size]) for key, v in merged.items()}
        for i in range(0, order.numel(), size)
    ]


@contextmanager
def captured_hidden(backbone: torch.nn.Module):
    """Inside the block, every forward of `backbone` appends its final hidden states
    ([B, L, D], still attached to the graph) to the yielded list."""
    store: list[Tensor] = []

    def hook(module, args, output):
        hidden = getattr(output, "last_hidden_state", None)
        store.append(output[0] if hidden is None else hidden)

    handle = backbone.register_forward_hook(hook)
    try:
        yield store
    finally:
        handle.remove()


class OneForwardSteps:
    """The trainer side (mixed into ICTGRPOTrainer, which provides `ict_plan`, `ict_token_stats`,
    `_ict_set_normalisers`, `_ict_log`, ...), driving the step's run (ict.step.StepRun) as the
    native trainer does. Per generation batch: `_ict_prepare_one_forward` (in `_prepare_inputs`)
    begins it (what can be selected up front is) and sets the normalisers from its counts; per
    micro-batch: `_ict_one_forward_inputs` (first thing in `_compute_loss`) runs the loss forward
    with the hook, keeps its result for the loss (`_get_per_token_logps_and_entropies` hands it
    back once: TRL's loss and ict's loss call it right after), computes the statistics and hands
    them to the run (`observe`: if deferred, the selection); after the generation batch's last
    micro-batch the run finishes and its metrics are logged.

    Why a forward ahead of TRL's `_compute_loss` rather than inside it: TRL builds its loss mask
    from `tool_mask` before its forward, so the selection, which multiplies into that mask, must
    exist first; running the forward here and handing TRL the same tensors keeps TRL's loss code
    unchanged and still one forward."""

    _ict_forward_cache = None
    _ict_run: StepRun | None = None  # the generation batch's step run
    _ict_pending = 0  # its micro-batches not yet observed

    def _ict_backbone(self):
        """The module whose output is the LM head's input (TRL's fused head calls it)."""
        from accelerate.utils import is_peft_model

        base = self.model.get_base_model() if is_peft_model(self.model) else self.model
        return base.base_model

    def _ict_prepare_one_forward(self, chunks: list[dict]) -> None:
        """A new generation batch's micro-batches `chunks` (whole groups each): the step's run
        begins before the statistics (ict.step.StepPlan.begin on the whole batch in generation
        order: the warm-up's every valid token, or a selection that reads no statistic, as the
        two-pass path makes it; or, for a per-row top-k made per micro-batch, each row's count),
        and the normalisers from its per-row counts; marks each micro-batch for
        `_ict_one_forward_inputs`."""
        valid = [self._valid_mask(c) for c in chunks]
        order = torch.argsort(torch.cat([c["ict_row"] for c in chunks]))
        inputs = StepInputs(
            torch.cat(valid)[order], None, torch.cat([c["advantages"] for c in chunks])[order],
            torch.cat([c["completion_ids"] for c in chunks])[order],
        )  # fmt: skip
        run = self.ict_plan.begin(inputs, step=self.ict_rollout_batch())
        back = torch.argsort(order)  # generation order -> the micro-batches' rows
        sizes = [v.size(0) for v in valid]
        for c, rows in zip(chunks, back.split(sizes), strict=True):
            if not run.deferred:  # else selected per micro-batch in _ict_one_forward_inputs
                c["ict_selected"] = run.selected[rows]
            c["ict_one_forward"] = True
            c["ict_index"] = rows  # the rows' places in the run's batch
        self._ict_set_normalisers(chunks, run.counts.take(back).split(sizes), "train")
        self._ict_run, self._ict_pending = run, len(chunks)

    def _ict_one_forward_inputs(self, model, inputs: dict) -> dict:
        """One micro-batch: the loss forward (kept for the loss), ict's statistics from its
        final hidden states (detached) handed to the step's run (`StepRun.observe`), which gives
        the per-row selection if deferred. Adds `ict_<stat>` and `ict_selected` to `inputs` (in
        place) and returns it; after the generation batch's last micro-batch the run finishes
        (its selection checked against what the micro-batches used) and its metrics are logged."""
        prompt_ids, completion_ids = inputs["prompt_ids"], inputs["completion_ids"]
        input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
        attention_mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
        self._ict_forward_cache = None
        with captured_hidden(self._ict_backbone()) as hidden:
            out = self._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, completion_ids.size(1), compute_entropy=True,
                compute_aux_loss=self.aux_loss_enabled,
                **{k: inputs.get(k) for k in TRL_MODEL_KWARGS},
            )  # fmt: skip
        if len(hidden) == 0:
            raise RuntimeError(
                "ICTGRPOTrainer: the loss forward did not run the backbone's forward hook; set "
                "one_forward=False in ICTGRPOConfig (the separate statistics forward)"
            )
        self._ict_forward_cache = (input_ids, out)
        valid = self._valid_mask(inputs)
        stats = self.ict_token_stats(
            prompt_ids, inputs["prompt_mask"], completion_ids, inputs["completion_mask"], valid,
            inputs["ict_row"] // self.num_generations, hidden=torch.cat(hidden).detach(),
        )  # fmt: skip
        del hidden
        # in place: the micro-batch TRL buffered holds its statistics and selection from here on
        inputs.update({f"ict_{f}": getattr(stats, f) for f in STAT_FIELDS})
        run = self._ict_run
        picked = run.observe(inputs["ict_index"], slice(None), stats)
        if picked is not None:
            inputs["ict_selected"] = picked
        self._ict_pending -= 1
        if self._ict_pending == 0:
            self._ict_run = None
            self._ict_log("train", run.finish(gather=self._ict_gather).metrics)
        return inputs

    def _get_per_token_logps_and_entropies(self, model, input_ids, *args, **kwargs):
        """TRL's, or the result of the forward `_ict_one_forward_inputs` just ran on the same
        `input_ids` (handed back once)."""
        cache, self._ict_forward_cache = self._ict_forward_cache, None
        if cache is not None:
            if cache[0].shape == input_ids.shape and torch.equal(cache[0], input_ids):
                return cache[1]
            raise RuntimeError("ICTGRPOTrainer: the loss forward ran on other inputs than kept")
        return super()._get_per_token_logps_and_entropies(model, input_ids, *args, **kwargs)


__all__ = [
    "OneForwardSteps",
    "PARTITION_FREE_LOSSES",
    "captured_hidden",
    "regroup",
    "trl_layout",
]
