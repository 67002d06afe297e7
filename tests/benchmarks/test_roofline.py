"""benchmarks/roofline.py: its FLOP counts against torch's own FLOP counter, and its --quick run's
table (no timing thresholds: fractions are checked against the same run's numbers)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

BENCH = Path(__file__).parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
import roofline  # noqa: E402


def test_matmul_counts_match_torchs_flop_counter():
    from ict.testing import tiny_model_and_tokenizer

    model, _ = tiny_model_and_tokenizer(seed=0)
    shape = roofline.Shape.of(model)
    b, t = 3, 17
    ids = torch.randint(10, 90, (b, t))
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(input_ids=ids)
    # the counter sees the matmuls (aten.mm), not the CPU attention kernel: add that by hand
    attention = 4 * shape.layers * shape.heads * shape.head_dim * (b * t * t)
    flops, _ = shape.forward(b * t, b * t * t, b * t)
    assert flops - attention == counter.get_total_flops()
    # forward + backward: 3 x the forward's matmuls (inputs' and weights' gradients)
    with FlopCounterMode(display=False) as counter:
        model(input_ids=ids).logits.sum().backward()
    assert 3 * (flops - attention) == counter.get_total_flops()
    # by hand: q, k, v, o and the MLP of every layer
    d, i, kv = shape.hidden, shape.intermediate, shape.kv_heads * shape.head_dim
    assert shape.linear_macs == shape.layers * (2 * d * d + 2 * d * kv + 3 * d * i)


def test_generation_cost_counts_every_row_of_every_step():
    shape = roofline.Shape(8, 1, 2, 1, 4, 16, 10, 4)
    g = roofline.Generation(rows=4, prompts=2, prompt_width=3, widths=[2], batch_rows=[4])
    flops, data = roofline.generation_cost(shape, g)
    prefix = shape.forward(2 * 2, 2 * 2 * 3 // 2, 0)[0]
    steps = shape.decode_step(4, 3)[0] + shape.decode_step(4, 4)[0]
    assert flops == prefix + steps and data > 0


def test_roofline_quick(tmp_path):
    out = tmp_path / "roofline.json"
    res = subprocess.run(
        [sys.executable, str(BENCH / "roofline.py"), "--quick", "--json", str(out)],
        env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    result = json.loads(out.read_text())
    rates = result["rates"]
    assert set(rates["peak"]) == {"float32", "bfloat16"} and rates["bandwidth"] > 0
    assert [r["model"] for r in result["results"]] == ["toy-cot", "smollm2"]
    for r in result["results"]:
        assert [p["phase"] for p in r["phases"]] == [
            "rollout",
            "statistics",
            "update",
            "evaluation",
            "evaluation (chunked)",
        ]
        for p in r["phases"]:
            assert p["seconds"] > 0 and p["gflop"] > 0 and p["mib"] > 0, p
            rate = p["gflop"] * 1e9 / p["seconds"]
            assert p["peak_fraction"] == pytest.approx(rate / rates["peak"][p["dtype"]])
            assert p["bandwidth_fraction"] == pytest.approx(
                p["mib"] * 2**20 / p["seconds"] / rates["bandwidth"]
            )
            assert p["bound"] in ("compute", "memory")
    assert res.stdout.count("| rollout | float32 |") == 2 and "% matmul peak" in res.stdout
    # the evaluation's fraction of the GEMM rate at the model's width, printed per setting
    for r in result["results"]:
        fraction = r["phases"][3]["model_gemm_fraction"]
        assert f"evaluation: {100 * fraction:.1f}% of the float32 GEMM rate" in res.stdout


def test_trace_cost_counts_the_rows_each_step_ran():
    from ict.fast.batched import DecodeTrace

    shape = roofline.Shape(8, 1, 2, 1, 4, 16, 10, 4)
    trace = DecodeTrace(prompts=2, prompt_width=3, rows=[6, 4], columns=[3, 4])
    flops, _ = roofline.trace_cost(shape, trace)
    prefix = shape.forward(2 * 2, 2 * 2 * 3 // 2, 0)[0]
    assert flops == prefix + shape.decode_step(6, 3)[0] + shape.decode_step(4, 4)[0]
