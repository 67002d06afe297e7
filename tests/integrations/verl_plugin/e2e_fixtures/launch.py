"""Run the CPU twin of examples/verl/run_single_node.sh: verl's own `main_ppo` driver, through the
launch script as written, with the overrides below that put it on a CPU (test fixture).

`start(workdir, loss_mode, *extra)` writes a tiny offline Llama and a 32-row parquet data set once
and starts `bash examples/verl/run_single_node.sh 0.5b LOSS_MODE <CPU overrides> <extra>` with
the verl environment's python; `finish` returns the metrics verl's file logger wrote, one dict per
step; `run_all` runs several, a few at a time.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[3]
SCRIPT = REPO / "examples" / "verl" / "run_single_node.sh"
# verl imports these, in order, in every process (the platform before anything asks for it)
EXTERNAL_MODULES = "e2e_fixtures.cpu_platform,e2e_fixtures.hf_rollout,ict.integrations.verl"
PROMPTS = 32
PROMPTS_PER_STEP, ROLLOUT_N, RESPONSE_LENGTH = 2, 4, 8


def write_inputs(workdir: Path) -> tuple[Path, Path]:
    """(model directory, train parquet): a tiny random Llama + char tokenizer, 32 chat prompts."""
    import pandas as pd

    from ict.testing import save_tiny_model

    model = workdir / "tiny-llama"
    data = workdir / "data" / "train.parquet"
    if not (model / "config.json").exists():
        save_tiny_model(model, seed=0)
    if not data.exists():
        data.parent.mkdir(parents=True, exist_ok=True)
        rows = [
            {
                "data_source": "ict_e2e",
                "prompt": [{"role": "user", "content": f"{i} + {i % 7} ="}],
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": str(i + i % 7)},
                "extra_info": {"index": i, "split": "train"},
            }
            for i in range(PROMPTS)
        ]
        pd.DataFrame(rows).to_parquet(data)
    return model, data


def cpu_overrides(model: Path, data: Path, metrics_file: Path) -> list[str]:
    """What a CPU needs on top of the launch script (everything else is the shipped config)."""
    return [
        # the tiny model, its data, two GRPO steps of 2 prompts x 4 samples x 8 tokens
        f"actor_rollout_ref.model.path={model}",
        f"data.train_files={data}", f"data.val_files={data}",
        f"data.train_batch_size={PROMPTS_PER_STEP}", "data.max_prompt_length=64",
        f"data.max_response_length={RESPONSE_LENGTH}", "data.dataloader_num_workers=0",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={PROMPTS_PER_STEP}",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=4096",
        "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=4096",
        f"actor_rollout_ref.rollout.n={ROLLOUT_N}",
        "trainer.total_training_steps=2", "trainer.val_before_train=false",
        "trainer.test_freq=-1", "trainer.save_freq=-1",
        f"reward.custom_reward_function.path={HERE / 'reward.py'}",
        # CPU: the fixture platform, sdpa attention, the hf rollout, one process per role
        "trainer.device=cpu", "trainer.n_gpus_per_node=1", "trainer.nnodes=1",
        "+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
        "actor_rollout_ref.model.enable_gradient_checkpointing=false",
        # float32 end to end (the rollout samples in float32), no inductor compile on a CPU
        "+actor_rollout_ref.actor.fsdp_config.mixed_precision={param_dtype: fp32, "
        "reduce_dtype: fp32, buffer_dtype: fp32}",
        "actor_rollout_ref.actor.fsdp_config.use_torch_compile=false",
        "actor_rollout_ref.actor.use_torch_compile=false",
        "actor_rollout_ref.rollout.name=hf", "actor_rollout_ref.rollout.calculate_log_probs=true",
        "actor_rollout_ref.rollout.full_determinism=true",
        "actor_rollout_ref.rollout.agent.num_workers=1", "reward.num_workers=1",
        f"actor_rollout_ref.rollout.router_config_path={HERE / 'router.yaml'}",
        # Ray: logical CPUs for verl's 3 per worker slot, one logical "GPU" slot (no device)
        "+ray_kwargs.ray_init.address=local", "ray_kwargs.ray_init.num_cpus=8",
        "+ray_kwargs.ray_init.num_gpus=1", "+ray_kwargs.ray_init.object_store_memory=200000000",
        "+ray_kwargs.ray_init.include_dashboard=false",
        "trainer.logger=[console,file]", f"trainer.experiment_name=e2e-{metrics_file.stem}",
    ]  # fmt: skip


def environment(metrics_file: Path) -> dict[str, str]:
    env = dict(os.environ)
    paths = [str(REPO / "src"), str(HERE.parent), env.get("PYTHONPATH", "")]
    env.update(
        PYTHONPATH=os.pathsep.join(p for p in paths if p),
        VERL_USE_EXTERNAL_MODULES=EXTERNAL_MODULES,
        VERL_PLATFORM="cpu",
        VERL_FILE_LOGGER_PATH=str(metrics_file),
        PYTHON=sys.executable,
        OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false",
        HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", RAY_DEDUP_LOGS="0",
        # no idle Python workers started ahead (one per logical CPU): each costs an import of ray
        RAY_enable_worker_prestart="0", RAY_prestart_worker_first_driver="0",
        RAY_USAGE_STATS_ENABLED="0",
    )  # fmt: skip
    return env


def start(workdir: Path, loss_mode: str, *extra: str, name: str | None = None) -> dict:
    """Start the launch script for `loss_mode` (+ extra overrides) in the background; `finish` it.

    Each run starts its own local Ray instance (`address=local`: never joins another cluster on
    the machine), so runs may overlap."""
    workdir = Path(workdir)
    model, data = write_inputs(workdir)
    name = name or loss_mode
    metrics_file = workdir / f"metrics-{name}.jsonl"
    metrics_file.unlink(missing_ok=True)
    log = open(workdir / f"log-{name}.txt", "w")
    cmd = [
        "bash",
        str(SCRIPT),
        "0.5b",
        loss_mode,
        *cpu_overrides(model, data, metrics_file),
        *extra,
    ]
    proc = subprocess.Popen(
        cmd, env=environment(metrics_file), cwd=workdir, stdout=log, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )  # fmt: skip
    return {"proc": proc, "log": log, "metrics": metrics_file, "name": name}


def finish(run: dict, timeout: float = 900) -> dict:
    """Wait for a started run; {"steps": [metrics of step 1, step 2, ...], "log": text}.
    RuntimeError with the log's tail when the driver failed."""
    proc = run["proc"]
    try:
        proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:  # our own launch only: its process group, by id
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=60)
        run["log"].close()
    log = Path(run["log"].name).read_text()
    if proc.returncode != 0:
        raise RuntimeError(f"main_ppo ({run['name']}) exited {proc.returncode}:\n{log[-6000:]}")
    lines = run["metrics"].read_text().splitlines()
    steps = sorted((json.loads(line) for line in lines if line.strip()), key=lambda s: s["step"])
    return {"steps": [s["data"] for s in steps], "log": log}


def run_all(workdir: Path, runs: dict[str, tuple[str, ...]], jobs: int = 2) -> dict[str, dict]:
    """{name: (loss_mode, *extra overrides)} -> {name: finish(...)}, at most `jobs` at a time
    (each run holds ~6 verl processes, several GB of memory)."""
    write_inputs(Path(workdir))
    pending, active, done = list(runs.items()), [], {}
    while pending or active:
        while pending and len(active) < jobs:
            name, (loss_mode, *extra) = pending.pop(0)
            active.append(start(workdir, loss_mode, *extra, name=name))
        run = active.pop(0)
        done[run["name"]] = finish(run)
    return done
