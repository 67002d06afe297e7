"""Worker for test_trl_distributed.py:
`torchrun --nproc_per_node N _trl_dist_worker.py OUT METHOD [SETTINGS_JSON]`.

Trains the tiny model for one step with ICTGRPOTrainer and saves, per rank, to OUT/rank{r}.pt:
the first micro-batch (prompt/completion ids and masks, advantages, row indices, statistics,
selection), every micro-batch's rows, selection, loss and gradient, the step's metrics, whether
the loss forward gave the statistics (`one_forward`) and the updated parameters.
"""

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from _trl_helpers import recording_trainer_class, run_tiny  # noqa: E402


def main(out: str, method: str, settings: str = "{}") -> None:
    trainer = run_tiny(
        Path(out) / "run", trainer_class=recording_trainer_class(), method=method, max_steps=1,
        **json.loads(settings),
    )  # fmt: skip
    rank = trainer.accelerator.process_index
    keys = ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "advantages", "ict_row",
            "ict_selected", "ict_js", "ict_entropy")  # fmt: skip
    rec = trainer.records[0]["inputs"]
    micro_batches = [  # every micro-batch's rows, selection, loss and gradient w.r.t. log p
        {"rows": r["inputs"]["ict_row"], "selected": r["inputs"]["ict_selected"],
         "loss": r["loss"], "grad": r["grad"]}
        for r in trainer.records
    ]  # fmt: skip
    metrics = [row for row in trainer.state.log_history if "selected_fraction" in row]
    torch.save(
        {k: rec[k] for k in keys}
        | {"world": trainer.accelerator.num_processes, "one_forward": trainer.ict_one_forward,
           "micro_batches": micro_batches, "metrics": metrics,
           "params": {n: p.detach().clone() for n, p in trainer.model.named_parameters()}},
        Path(out) / f"rank{rank}.pt",
    )  # fmt: skip
    # destroy the gloo process group before exit: left to the interpreter's shutdown, its threads
    # can abort a rank ("terminate called without an active exception")
    trainer.accelerator.end_training()


if __name__ == "__main__":
    main(*sys.argv[1:4])
