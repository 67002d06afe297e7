"""`ict train` end to end on a saved tiny model and a local JSONL task; errors; SIGKILL + resume."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ict.cli import main

FAST = [
    "--max-steps",
    "2",
    "--prompts-per-step",
    "2",
    "--num-generations",
    "4",
    "--max-new-tokens",
    "4",
    "--no-progress",
    "--no-plots",
    "--stop",
    "[]",
    "--seed",
    "3",
]


@pytest.fixture(scope="module")
def task_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "sums.jsonl"
    path.write_text(
        "".join(json.dumps({"q": f"{i} + {i} = ?", "a": str(2 * i)}) + "\n" for i in range(10))
    )
    return f"{path}?question=q&answer=a"


def test_cli_trains_and_prints_where_outputs_went(tiny_model_dir, task_file, tmp_path, capsys):
    out_dir = tmp_path / "run"
    rc = main(
        [
            "train",
            "--model",
            str(tiny_model_dir),
            "--task",
            task_file,
            "--output-dir",
            str(out_dir),
            "--method",
            "ict+stapo",
            "--eval-size",
            "5",
            "--eval-num-samples",
            "2",
            *FAST,
        ]
    )
    assert rc == 0
    printed = capsys.readouterr().out
    assert f"run directory: {out_dir}" in printed and "summary.json" in printed
    # the last line says what happened: held-out pass@1 before -> after (paired interval), reward
    last = printed.strip().splitlines()[-1]
    assert last.startswith("held-out pass@1 ") and "; reward " in last, last
    assert "token_map" in printed and (out_dir / "token_map.html").exists()
    for name in (
        "config.yaml",
        "metrics.jsonl",
        "samples.jsonl",
        "summary.json",
        "checkpoints/latest",
    ):
        assert (out_dir / name).exists(), name
    summary = json.loads((out_dir / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["method"] == "ict+stapo"
    heldout = summary["heldout"]
    before = json.loads((out_dir / "heldout_before.json").read_text())
    after = json.loads((out_dir / "heldout_after.json").read_text())
    label = heldout["benchmark"]
    assert before["per_problem"][label]["ids"] == after["per_problem"][label]["ids"]  # 5 problems
    assert heldout["problems"] == 5 and heldout["samples_per_problem"] == 2
    assert heldout["before"]["mean"] == pytest.approx(before["benchmarks"][label]["pass@1"])
    d = heldout["difference"]
    assert d["mean"] == pytest.approx(heldout["after"]["mean"] - heldout["before"]["mean"])
    assert -1 <= d["low"] <= d["mean"] <= d["high"] <= 1
    assert summary["precision"]["autocast"] in ("bf16", "off", "fp16")
    import yaml

    saved = yaml.safe_load((out_dir / "config.yaml").read_text())
    assert saved["method"]["method"] == "ict+stapo" and saved["run"]["max_steps"] == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--model", "/no/such/model"], "does not exist"),
        (["--method", "ictt"], "method='ictt' is unknown"),
        (["--task", "no_such_task"], "unknown task"),
        (["--learning-rate", "fast"], "learning_rate='fast'"),
        (["--resume", "/no/such/run"], "no config.yaml"),
    ],
)
def test_cli_bad_input_is_one_clear_line(argv, message, tiny_model_dir, tmp_path, capsys):
    base = ["train", "--output-dir", str(tmp_path / "r"), *FAST]
    if "--model" not in argv:
        base += ["--model", str(tiny_model_dir)]
    assert main([*base, *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]  # after any loading progress bars
    assert err.startswith("error: ") and message in err and "Traceback" not in err


def test_cli_unknown_yaml_key(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text("rollout:\n  num_generation: 4\n")
    assert main(["train", "--config", str(path)]) == 2
    assert "did you mean num_generations" in capsys.readouterr().err


def _cli(*args):
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    launcher = "import sys; from ict.cli import main; sys.exit(main())"
    return [sys.executable, "-c", launcher, "train", *map(str, args)], env


@pytest.mark.slow
def test_sigkill_then_resume_matches_uninterrupted(tiny_model_dir, task_file, tmp_path):
    common = [
        "--model",
        tiny_model_dir,
        "--task",
        task_file,
        *FAST,
        "--max-steps",
        "30",
        "--save-every",
        "3",
    ]
    cmd, env = _cli(*common, "--output-dir", tmp_path / "full")
    subprocess.run(cmd, env=env, check=True, capture_output=True)

    run = tmp_path / "killed"
    cmd, env = _cli(*common, "--output-dir", run)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not (run / "checkpoints" / "latest").exists() and time.time() < deadline:
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    rows_before = (run / "metrics.jsonl").read_text().splitlines()
    assert len(rows_before) < 30, "the run finished before it could be killed; make it longer"

    cmd, env = _cli("--resume", run)
    subprocess.run(cmd, env=env, check=True, capture_output=True)

    def load(path):
        rows = [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]
        return [
            {k: v for k, v in r.items() if not k.startswith(("time/", "throughput/"))} for r in rows
        ]

    assert load(run) == load(tmp_path / "full")
    assert json.loads((run / "summary.json").read_text())["steps"] == 30


def test_a_disk_filling_during_training_ends_in_one_line_and_keeps_the_last_checkpoint(
    tiny_model_dir, task_file, tmp_path, monkeypatch, capsys
):
    """The second checkpoint's save finds the disk full (torch.save reports it as a
    RuntimeError): one line naming the last checkpoint, which stays complete, and no partial
    checkpoint left taking space; `--resume` then continues from it."""
    import shutil

    import ict.train.checkpoint as ckpt
    from ict.files import is_complete_checkpoint, latest_checkpoint

    out_dir = tmp_path / "run"
    real_save, real_usage = ckpt.torch.save, shutil.disk_usage
    disk = {"full": False}

    def save(obj, path, *args, **kwargs):
        if obj.get("step") == 2:
            disk["full"] = True
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos")
        return real_save(obj, path, *args, **kwargs)

    def usage(path):
        u = real_usage(path)
        return u._replace(free=0) if disk["full"] else u

    monkeypatch.setattr(ckpt.torch, "save", save)
    monkeypatch.setattr(shutil, "disk_usage", usage)
    argv = ["train", "--model", str(tiny_model_dir), "--task", task_file, "--output-dir",
            str(out_dir), "--save-every", "1", "--eval-size", "2", "--eval-num-samples", "1",
            *FAST]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()  # the run's log lines, then the error
    assert not any("Traceback" in line for line in err), err
    last = out_dir / "checkpoints" / "step_000001"
    assert err[-1] == (
        f"error: could not write {out_dir / 'checkpoints' / 'step_000002'} (No space left on "
        f"device); free space or make it writable; the last checkpoint {last} is intact: "
        f"`ict train --resume {out_dir}` continues from it"
    )
    assert latest_checkpoint(out_dir) == last and is_complete_checkpoint(last)
    assert sorted(p.name for p in (out_dir / "checkpoints").iterdir()) == ["latest", "step_000001"]
    monkeypatch.undo()
    assert main(["train", "--resume", str(out_dir)]) == 0  # the space is back: it continues
    assert latest_checkpoint(out_dir).name == "step_000002"
