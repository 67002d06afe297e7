"""Worker for test_trl_distributed.py:
`torchrun --nproc_per_node N _trl_dist_worker.py OUT METHOD [SETTINGS_JSON]`.

Trains the tiny model for one step with ICTGRPOTrainer and saves, per rank, the first generation
batch (prompt/completion ids and masks, advantages, row indices) with its selection to OUT/rank{r}.pt.
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
    torch.save(
        {k: rec[k] for k in keys} | {"world": trainer.accelerator.num_processes},
        Path(out) / f"rank{rank}.pt",
    )
    # destroy the gloo process group before exit: left to the interpreter's shutdown, its threads
    # can abort a rank ("terminate called without an active exception")
    trainer.accelerator.end_training()


if __name__ == "__main__":
    main(*sys.argv[1:4])
