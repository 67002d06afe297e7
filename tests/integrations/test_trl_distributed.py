"""Two processes (torchrun, gloo, CPU) select exactly what one process selects on the same data."""

from __future__ import annotations

import json
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


# the batch-mean ICT over the whole batch (one global top-k across ranks), no warm-up
BATCH_MEAN = {"reference": "batch_mean", "scope": "global", "loss_agg": "token_mean",
              "dense_warmup_steps": 0}  # fmt: skip


def _launch(out: Path, method: str, settings: dict):
    """torchrun 2 ranks of the worker; returns (returncode, log)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
           "--master_addr", "127.0.0.1", "--master_port", str(_free_port()),
           str(HERE / "_trl_dist_worker.py"), str(out), method, json.dumps(settings)]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=HERE, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)  # fmt: skip
    try:
        log, _ = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the launcher and both workers
        log, _ = proc.communicate()
        pytest.fail("torchrun with 2 ranks did not finish in 180 s:\n" + log[-3000:])
    return proc.returncode, log


def _run_two_ranks(out: Path, method: str, settings: dict) -> list[dict]:
    returncode, log = _launch(out, method, settings)
    assert returncode == 0, log[-5000:]
    ranks = [torch.load(out / f"rank{r}.pt") for r in range(2)]
    assert [r["world"] for r in ranks] == [2, 2]
    return ranks


def _concat_in_generation_order(ranks: list[dict]) -> dict:
    """Rank 0's rows then rank 1's, each in generation order; completions right-padded to one length."""
    C = max(r["completion_ids"].size(1) for r in ranks)
    out = {}
    for key in ranks[0]:
        if not isinstance(ranks[0][key], torch.Tensor):
            continue
        parts = []
        for r in ranks:
            x = r[key][torch.argsort(r["ict_row"])]
            if x.dim() == 2 and key not in ("prompt_ids", "prompt_mask"):
                x = torch.nn.functional.pad(x, (0, C - x.size(1)))  # pad id 0, mask 0
            parts.append(x)
        out[key] = torch.cat(parts)
    return out


def _one_process_selection(tmp_path, method, batch, settings):
    from _trl_helpers import tiny_config, toy_dataset, toy_reward

    from ict.integrations.trl import ICTGRPOTrainer
    from ict.testing import tiny_model_and_tokenizer

    model, tokenizer = tiny_model_and_tokenizer(seed=0)  # the weights the ranks started from
    trainer = ICTGRPOTrainer(
        model=model, reward_funcs=toy_reward,
        args=tiny_config(tmp_path / "one", method=method, **settings),
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


def _check(tmp_path, method, settings=BATCH_MEAN):
    ranks = _run_two_ranks(tmp_path, method, settings)
    batch = _concat_in_generation_order(ranks)
    assert torch.equal(batch["ict_row"], torch.arange(batch["ict_row"].numel()))  # 8 rows, no gaps
    assert not torch.equal(
        ranks[0]["completion_ids"], ranks[1]["completion_ids"]
    )  # different data per rank
    stats, selected = _one_process_selection(tmp_path, method, batch, settings)
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
    # the total alone cannot tell (here 7 = 3 + 4, the two ranks' own top 10%): the split can
    per_rank = [int(s.sum()) for s in batch["ict_selected"].chunk(2)]
    local = [math.ceil(0.1 * int(m.sum())) for m in batch["completion_mask"].chunk(2)]
    assert per_rank != local, (per_rank, local)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["entropy", "ict+stapo"])
def test_two_ranks_select_like_one_process(tmp_path, method):
    _check(tmp_path, method)


def test_two_ranks_compute_the_papers_group_position_score_like_one_process(tmp_path):
    """method='ict' (the paper's): 4 completions per prompt, 4 rows per process, so each process
    holds whole groups and the position-aligned group mean is the one-process one."""
    batch = _check(tmp_path, "ict", {"dense_warmup_steps": 0})
    valid = batch["completion_mask"].bool()
    assert (batch["ict_js"][valid] > 0).any()  # not vacuous
    # the top 10% of each response: ceil(0.1 * its valid tokens)
    want = torch.ceil(0.1 * valid.sum(-1)).long()
    assert torch.equal(batch["ict_selected"].sum(-1), want)


def _by_row(micro_batches: list[dict], key: str) -> torch.Tensor:
    """A per-row field of every micro-batch, rows in generation order, padded to one length."""
    rows = torch.cat([m["rows"] for m in micro_batches])
    width = max(m[key].size(1) for m in micro_batches)
    parts = [torch.nn.functional.pad(m[key], (0, width - m[key].size(1))) for m in micro_batches]
    return torch.cat(parts)[torch.argsort(rows)]


# ict: selected per micro-batch (2 micro-batches per rank, regrouped); random_sequence: up front
@pytest.mark.parametrize(
    "method, settings",
    [("ict", {"dense_warmup_steps": 0, "gradient_accumulation_steps": 2}),
     ("random_sequence", {"dense_warmup_steps": 0})],
)  # fmt: skip
def test_two_ranks_take_the_statistics_from_the_loss_forward_as_the_two_pass_path(
    tmp_path, method, settings
):
    """With 2 processes the on-policy step runs one forward per micro-batch (no statistics
    forward) and computes the two-pass step: per rank the same selection, gradient w.r.t. the
    per-token log-probs and summed loss, the same metrics (reduced over ranks) and weights."""
    one = _run_two_ranks(tmp_path / "one", method, settings)
    two = _run_two_ranks(tmp_path / "two", method, {**settings, "one_forward": False})
    assert [r["one_forward"] for r in one] == [True, True]
    assert [r["one_forward"] for r in two] == [False, False]
    for a, b in zip(one, two, strict=True):
        assert (
            len(a["micro_batches"])
            == len(b["micro_batches"])
            == settings.get("gradient_accumulation_steps", 1)
        )
        selected = _by_row(a["micro_batches"], "selected")
        assert selected.any() and torch.equal(selected, _by_row(b["micro_batches"], "selected"))
        torch.testing.assert_close(
            _by_row(a["micro_batches"], "grad"), _by_row(b["micro_batches"], "grad"),
            atol=1e-7, rtol=1e-5,
        )  # fmt: skip
        loss = [sum(float(m["loss"]) for m in r["micro_batches"]) for r in (a, b)]
        assert loss[0] == pytest.approx(loss[1], rel=1e-5, abs=1e-7)
        for name, weight in a["params"].items():  # Adam's first step is about lr * g / |g|: a
            # near-zero gradient summed in another micro-batch order moves by more than rounding
            torch.testing.assert_close(weight, b["params"][name], atol=1e-5, rtol=1e-5)
        keys = [k for k in b["metrics"][0] if k.startswith(("valid/", "selected/", "selected_"))]
        assert keys and a["metrics"][0].keys() >= set(keys)
        for key in keys:
            assert float(a["metrics"][0][key]) == pytest.approx(
                float(b["metrics"][0][key]), rel=1e-4, abs=1e-6
            ), key


def test_a_group_split_across_processes_is_refused_naming_the_setting(tmp_path):
    """2 rows per process with 4 completions per prompt: TRL splits every group over 2 ranks."""
    returncode, log = _launch(tmp_path, "ict", {"per_device_train_batch_size": 2})
    assert returncode != 0
    assert "per_device_train_batch_size * steps_per_generation = 2" in log
    assert "num_generations = 4" in log
