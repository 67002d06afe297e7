"""The prepared GPU check's CPU-side parts: the driver in --cpu --tiny mode, its table parser,
and the shell wrapper's argument handling."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
SCRIPT = ROOT / "scripts" / "gpu_check.py"
sys.path.insert(0, str(SCRIPT.parent))
import gpu_check  # noqa: E402


def test_parse_token_stats_table():
    text = (
        "| case | time (s) | time / (d) | peak extra memory (MiB) | / full logits |\n"
        "|---|---:|---:|---:|---:|\n"
        "| (c) token_stats_from_hidden | 0.50 | 1.25x | 40 | 1.7% |\n"
        "| (d) floor: matmul + log_softmax | 0.40 | 1.00x | 2400 | 100.0% |\n"
    )
    rows = gpu_check.parse_token_stats(text)
    assert rows["c"] == {"seconds": 0.5, "vs_floor": 1.25, "mib": 40, "pct_full": 1.7}
    assert rows["d"]["mib"] == 2400 and set(rows) == {"c", "d"}
    # the table as token_stats.py prints it now, with a CPU-time column
    text = (
        "| case | time (s) | time / (d) | CPU time / (d) | peak extra memory (MiB) | / full logits |\n"
        "|---|---:|---:|---:|---:|---:|\n"
        "| (c) token_stats_from_hidden | 1.66 | 2.18x | 2.27x | 40 | 27.0% |\n"
    )
    assert gpu_check.parse_token_stats(text)["c"] == {
        "seconds": 1.66, "vs_floor": 2.18, "mib": 40, "pct_full": 27.0
    }  # fmt: skip


def test_train_step_ratios_read_the_benchmark_summary():
    summary = {
        "variants": {"ict_123": {"vs_grpo_today": 0.4, "vs_grpo_1": 0.7}, "grpo_today": {}},
        "stats_vs_floor": {"ratio": 1.3},
    }
    assert gpu_check.train_step_ratios(summary) == {
        "update_ict_over_grpo": 0.4,
        "update_ict_over_grpo_skip_rows": 0.7,
        "stats_over_floor": 1.3,
    }


def test_big_tokenizer_has_the_paper_vocabulary_size():
    tokenizer = gpu_check.big_tokenizer(1000)
    assert len(tokenizer) == 1000
    ids = tokenizer("3+4=")["input_ids"]
    assert tokenizer.decode(ids) == "3+4=" and tokenizer.decode([999]) == "<t999>"


def test_driver_runs_native_and_trl_on_cpu(tmp_path):
    pytest.importorskip("trl")
    cmd = [sys.executable, str(SCRIPT), "--cpu", "--tiny", "--parts", "env,native,trl"]
    res = subprocess.run(
        cmd + ["--out", str(tmp_path)], capture_output=True, text=True, timeout=600
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "| native s/step ICT/GRPO |" in res.stdout and "| trl s/step ICT/GRPO |" in res.stdout
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert report["mode"] == {"device": "cpu", "tiny": True}
    for part in ("native", "trl"):
        result = report["parts"][part]["result"]
        assert result["grpo"]["device"] == "cpu" and result["ict"]["s_per_step"] > 0
    assert (tmp_path / "native.log").is_file()


@pytest.mark.slow
def test_driver_all_parts_on_cpu(tmp_path):
    res = subprocess.run(
        [sys.executable, str(SCRIPT), "--cpu", "--tiny", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert "token_stats (c)/(d) time" in report["ratios"]
    assert "train_step update_ict_over_grpo" in report["ratios"]


def test_driver_runs_the_roofline_on_cpu(tmp_path):
    res = subprocess.run(
        [sys.executable, str(SCRIPT), "--cpu", "--tiny", "--parts", "env,roofline", "--out",
         str(tmp_path)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    assert "| rollout | float32 |" in res.stdout and "% matmul peak" in res.stdout
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    phases = report["parts"]["roofline"]["result"]["results"][0]["phases"]
    names = [p["phase"] for p in phases]
    assert names[:4] == ["rollout", "statistics", "update", "evaluation"]
    assert all(n.startswith("evaluation (") for n in names[4:])  # the other evaluation paths
    assert report["ratios"]["roofline toy-cot update % matmul peak"] == pytest.approx(
        100 * phases[2]["peak_fraction"]
    )


def test_driver_refuses_cuda_without_a_gpu():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    res = subprocess.run(
        [sys.executable, str(SCRIPT), "--parts", "env"], capture_output=True, text=True
    )
    assert res.returncode == 2 and "--cpu --tiny" in res.stdout


def test_shell_wrapper_is_executable_and_bounded():
    text = (ROOT / "scripts" / "gpu_check.sh").read_text()
    assert (ROOT / "scripts" / "gpu_check.sh").stat().st_mode & 0o111
    assert "timeout 570" in text and "--no-index" in text and "--download-wheels" in text
    res = subprocess.run(
        ["bash", "-n", str(ROOT / "scripts" / "gpu_check.sh")], capture_output=True
    )
    assert res.returncode == 0
