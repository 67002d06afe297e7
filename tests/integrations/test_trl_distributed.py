"""Two processes (torchrun, gloo, CPU) select exactly what one process selects on the same data."""

from __future__ import annotations

import math
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("trl")
pytestmark = pytest.mark.trl

HERE = Path(__file__).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_two_ranks(out: Path, method: str) -> list[dict]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
           "--master_addr", "127.0.0.1", "--master_port", str(_free_port()),
           str(HERE / "_trl_dist_worker.py"), str(out), method]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=HERE, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)  # fmt: skip
    try:
        log, _ = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the launcher and both workers
        log, _ = proc.communicate()
        pytest.fail("torchrun with 2 ranks did not finish in 180 s:\n" + log[-3000:])
    assert proc.returncode == 0, log[-5000:]
    ranks = [torch.load(out / f"rank{r}.pt") for r in range(2)]
    assert [r["world"] for r in ranks] == [2, 2]
    return ranks


def _concat_in_generation_order(ranks: list[dict]) -> dict:
    """Rank 0's rows then rank 1's, each in generation order; completions right-padded to one length."""
    C = max(r["completion_ids"].size(1) for r in ranks)
    out = {}
    for key in ranks[0]:
        if key == "world":
            continue
        parts = []
        for r in ranks:
            x = r[key][torch.argsort(r["ict_row"])]
            if x.dim() == 2 and key not in ("prompt_ids", "prompt_mask"):
                x = torch.nn.functional.pad(x, (0, C - x.size(1)))  # pad id 0, mask 0
            parts.append(x)
        out[key] = torch.cat(parts)
    return out


def _one_process_selection(tmp_path, method, batch):
    from _trl_helpers import tiny_config, toy_dataset, toy_reward

    from ict.integrations.trl import ICTGRPOTrainer
    from ict.testing import tiny_model_and_tokenizer

    model, tokenizer = tiny_model_and_tokenizer(seed=0)  # the weights the ranks started from
    trainer = ICTGRPOTrainer(
        model=model, reward_funcs=toy_reward, args=tiny_config(tmp_path / "one", method=method),
        train_dataset=toy_dataset(), processing_class=tokenizer,
    )  # fmt: skip
    valid = batch["completion_mask"].bool()
    stats = trainer.ict_token_stats(
        batch["prompt_ids"], batch["prompt_mask"], batch["completion_ids"], batch["completion_mask"],
        valid, batch["ict_row"] // trainer.num_generations,
    )  # fmt: skip
    selected = trainer.ict_select(
        method, stats, valid, batch["advantages"], batch["completion_ids"]
    )
    return stats, selected


def _check(tmp_path, method):
    ranks = _run_two_ranks(tmp_path, method)
    batch = _concat_in_generation_order(ranks)
    assert torch.equal(batch["ict_row"], torch.arange(batch["ict_row"].numel()))  # 8 rows, no gaps
    assert not torch.equal(
        ranks[0]["completion_ids"], ranks[1]["completion_ids"]
    )  # different data per rank
    stats, selected = _one_process_selection(tmp_path, method, batch)
    torch.testing.assert_close(batch["ict_js"], stats.js, atol=1e-6, rtol=1e-4)
    torch.testing.assert_close(batch["ict_entropy"], stats.entropy, atol=1e-5, rtol=1e-5)
    assert torch.equal(batch["ict_selected"], selected)
    return batch


def test_two_ranks_select_like_one_process_ict(tmp_path):
    batch = _check(tmp_path, "ict")
    n_valid = int(batch["completion_mask"].sum())
    assert int(batch["ict_selected"].sum()) == math.ceil(
        0.1 * n_valid
    )  # one global top-k, not 2 local ones
    per_rank = [int(s.sum()) for s in batch["ict_selected"].chunk(2)]
    assert min(per_rank) >= 0 and sum(per_rank) == math.ceil(0.1 * n_valid)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["entropy", "ict+stapo"])
def test_two_ranks_select_like_one_process(tmp_path, method):
    _check(tmp_path, method)
