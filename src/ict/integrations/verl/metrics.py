"""The per-step metrics every engine logs, on verl, under the same keys: `grad_norm`,
`update/param_change_rel`, `clip_fraction`, `zero_variance_share` and the loss mode's
`loss_mode/changed_tokens`, `loss_mode/changed_rate`, `loss_mode/nominal_rate` (ict.training_metrics,
ict.loss.modes).

Worker side, `wrap_train_batch` (around the engine's `train_batch`, one update of one mini-batch;
only for batches that carry an ict selection): at the step's first update a snapshot of the
parameters (ict.training_metrics.ParamChange), and that update runs on-policy (loss.on_policy: its old
log-probs are the update pass's own, as on the native trainer and TRL); after its last update
(the mini-batch on which verl sets `update_lr_scheduler`) the relative change of the weights, the
clip fraction and the loss mode's counts over every loss call of the step
(loss.take_step_counts), all summed over the data-parallel ranks, in that mini-batch's metrics.

Driver side, `driver_metrics` (on the metrics `_update_actor` returns, before verl reduces them):
those keys without verl's "actor/" prefix; `grad_norm` the mean over the step's updates of verl's
`actor/grad_norm` (the total norm before clipping, as the native trainer's); `zero_variance_share`
from the batch's rewards and prompt ids (ict.loss.zero_variance_share).
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any

import numpy as np
import torch

import ict.integrations.verl.loss as ict_loss

_CHANGE_ATTR = "_ict_param_change"
STEP_KEYS = ("update/param_change_rel", "clip_fraction", "loss_mode/changed_tokens",
             "loss_mode/changed_rate", "loss_mode/nominal_rate")  # fmt: skip


def _local(param: torch.Tensor) -> torch.Tensor:
    """This rank's shard of a parameter (FSDP2 DTensor: its local tensor)."""
    return param.to_local() if hasattr(param, "to_local") else param


def _dp_sum(engine):
    """A function summing a float64 tensor over the engine's data-parallel ranks."""

    def reduce(tensor: torch.Tensor) -> torch.Tensor:
        if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
            return tensor
        from verl.workers.engine.fsdp import transformer_impl

        out = tensor.to(transformer_impl.get_device_id())
        group = engine.get_data_parallel_group()
        torch.distributed.all_reduce(out, op=torch.distributed.ReduceOp.SUM, group=group)
        return out.cpu()

    return reduce


def wrap_train_batch(original):
    """The engine's `train_batch`: the step's first update on-policy, and the step's
    `update/param_change_rel`, `clip_fraction` and `loss_mode/*` added to the metrics of its last
    mini-batch (module docstring)."""
    from ict.training_metrics import ParamChange

    @functools.wraps(original)
    def train_batch(self, data, loss_function):
        if ict_loss.SELECTED_KEY not in data.keys():
            return original(self, data, loss_function)
        from verl.utils import tensordict_utils as tu

        first = getattr(self, _CHANGE_ATTR, None) is None  # the step's first update
        if first:
            setattr(self, _CHANGE_ATTR, ParamChange(_local(p) for p in self.module.parameters()))
            ict_loss.take_step_counts()  # count this step's loss calls only
        with ict_loss.on_policy() if first else contextlib.nullcontext():
            outputs = original(self, data, loss_function)
        if tu.get_non_tensor_data(data, "update_lr_scheduler", False):  # the step's last update
            change, reduce = getattr(self, _CHANGE_ATTR), _dp_sum(self)
            setattr(self, _CHANGE_ATTR, None)
            step = {"update/param_change_rel": change.relative(reduce)}
            step.update(ict_loss.take_step_counts(reduce))
            if outputs is not None and "metrics" in outputs:
                # one-element lists, as verl's micro-batch metrics: its worker gathers them over
                # data-parallel ranks and flattens lists of lists (a bare float breaks that)
                outputs["metrics"].update({k: [v] for k, v in step.items()})
        return outputs

    return train_batch


def driver_metrics(metrics: dict[str, Any], batch: Any = None) -> dict[str, Any]:
    """The step keys of the module docstring from `_update_actor`'s metrics (lists per
    mini-batch, "actor/"-prefixed), in place and returned. batch: verl's DataProto of the step,
    for `zero_variance_share` (token_level_rewards [B, R] and the prompt ids `uid`)."""
    for key in STEP_KEYS:
        values = metrics.pop(f"actor/{key}", None)
        if values is not None:  # one value (the step's last update, on every rank)
            metrics[key] = float(np.mean(values))
    if "actor/grad_norm" in metrics:
        metrics["grad_norm"] = float(np.mean(metrics["actor/grad_norm"]))
    if batch is not None:
        share = batch_zero_variance_share(batch)
        if share is not None:
            metrics["zero_variance_share"] = share
    return metrics


def batch_zero_variance_share(batch: Any) -> float | None:
    """Groups (responses of one `uid`) whose rewards are all equal / groups; None when the batch
    has no rewards or uids."""
    from ict.loss import zero_variance_share

    tensors = getattr(batch, "batch", None)
    uids = getattr(batch, "non_tensor_batch", {}).get("uid")
    if tensors is None or uids is None or "token_level_rewards" not in tensors.keys():
        return None
    rewards = tensors["token_level_rewards"].float().sum(-1).cpu()
    _, ids = np.unique(np.asarray(uids), return_inverse=True)
    return zero_variance_share(rewards, torch.as_tensor(ids.reshape(-1), dtype=torch.long))
