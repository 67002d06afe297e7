"""How far apart the old-policy pass and the update pass are on the first mini-batch of a step.

The stored old log-probabilities come from the old-policy pass (ict.train.old_policy), the
current ones from the update's own forward (ict.train.update: other rows per pass, other column
spans, the LM head on the loss positions only); before the first optimizer step the weights are
the same, so rho = stored-ratio is 1 up to the rounding of two different passes. (The native
update now uses its own log-probs as the first update's old ones, so its rho is exactly 1; this
script measures the stored ones instead, i.e. what the first update used before and what the
rounding is.) It runs one step of the default run with one mini-batch, records every loss call
of that first update and prints max |log rho| over the loss tokens M, the share of M with
log rho != 0, and, for KL-Cov, how many of the tokens it penalised have |log rho| > 0 (there its
penalty's gradient would be +-kl_cov_coef, the sign set by rounding).

    python scripts/first_minibatch_ratio.py                         # the default run, CPU
    python scripts/first_minibatch_ratio.py --method kl_cov --kl-cov-ratio 0.01
"""

from __future__ import annotations

import argparse
import json
import tempfile


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", default="grpo")
    parser.add_argument("--kl-cov-ratio", type=float, default=None)
    parser.add_argument(
        "--model", default=None, help="a model id or path (default: the default run's)"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import torch

    import ict.train.update as update
    from ict.train import TrainConfig
    from ict.train.trainer import Trainer

    calls = []
    original = update.policy_loss

    def recording(logprob, old_logprob, advantages, mask, selected=None, config=None, **kw):
        loss, metrics = original(logprob, old_logprob, advantages, mask, selected, config, **kw)
        M = mask.bool() & (selected.bool() if selected is not None else True)
        log_rho = (logprob.detach() - old_logprob)[M].double()
        calls.append({"log_rho": log_rho, "changed": metrics.get("loss_mode/changed_tokens", 0)})
        if config is not None and config.loss_mode == "kl_cov":  # the picked tokens' |log rho|
            from ict.loss.modes import kl_cov_picked

            picked = kl_cov_picked(
                logprob,
                advantages[:, None].expand_as(mask) if advantages.dim() == 1 else advantages,
                M,
                config.covariance,
            )
            calls[-1]["picked_log_rho"] = (logprob.detach() - old_logprob)[picked].double()
        return loss, metrics

    update.policy_loss = recording
    micro_step = update._UpdateRun.micro_step

    def stored_old(self, *a, **kw):  # the old-policy pass's log-probs, not the update's own
        self.on_policy = False
        return micro_step(self, *a, **kw)

    update._UpdateRun.micro_step = stored_old
    options = dict(method=args.method, max_steps=1, heldout_eval=False, plots=False,
                   progress=False, seed=args.seed, mini_batch_size=None)  # fmt: skip
    if args.model:
        options["model"] = args.model
    if args.kl_cov_ratio is not None:
        options["kl_cov_ratio"] = args.kl_cov_ratio
    with tempfile.TemporaryDirectory() as out:
        trainer = Trainer(TrainConfig(output_dir=out, **options))
        trainer.train_step()
    log_rho = torch.cat([c["log_rho"] for c in calls])
    result = {
        "method": args.method,
        "model": trainer.config.model or "default (embedded SmolLM2-135M-Instruct)",
        "dtype": trainer.config.dtype,
        "precision": trainer.plan.precision.describe(),
        "loss_calls": len(calls),
        "loss_tokens": int(log_rho.numel()),
        "max_abs_log_rho": float(log_rho.abs().max()) if log_rho.numel() else 0.0,
        "share_nonzero": float((log_rho != 0).double().mean()) if log_rho.numel() else 0.0,
    }
    picked = [c["picked_log_rho"] for c in calls if "picked_log_rho" in c]
    if picked:
        p = torch.cat(picked)
        result["kl_cov_picked"] = int(p.numel())
        result["kl_cov_picked_nonzero"] = int((p != 0).sum())
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
