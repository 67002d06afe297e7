"""Every Python and shell block of README.md, docs/*.md and docs/engines/*.md runs (tests/docs/
snippets.py says how: tiny offline model and settings; blocks that cannot run on a CPU machine
are marked in their info string, and every unmarked block must run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .snippets import (
    COMMAND_START,
    DRIVER,
    HUB_ID,
    ICT,
    MARKS,
    PLACEHOLDERS,
    ROOT,
    SKIP_MARKS,
    blocks,
    commands,
    tiny_argv,
)

ALL = blocks()
RUN = [b for b in ALL if b.kind and not (b.marks & SKIP_MARKS)]
FIXTURES = str(ROOT / "src" / "ict" / "compare" / "fixtures" / "benchmarks")
TIMEOUT = 600  # seconds per block
SLOW_TIMEOUT = 3 * 3600  # a `slow` block (make test-slow): supervised warm starts, SmolLM2


def _env(extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env.update(
        PYTHONPATH=os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1",
        TOKENIZERS_PARALLELISM="false", WANDB_MODE="disabled", MPLBACKEND="Agg",
    )  # fmt: skip
    env.update(extra or {})
    return env


def _run(argv, cwd, env=None, timeout=TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv, cwd=cwd, env=_env(env), capture_output=True, text=True, timeout=timeout
    )


def _drive(
    commands: list[tuple[list[str], dict]], cwd: Path, tmp: Path, timeout: int = TIMEOUT
) -> subprocess.CompletedProcess:
    """Run the commands in one Python process (snippets.DRIVER: ict commands in-process, others as
    subprocesses), stopping at the first failure."""
    plan = tmp / "commands.json"
    plan.write_text(json.dumps(commands))
    return _run([sys.executable, "-c", DRIVER, str(plan)], cwd=cwd, timeout=timeout)


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """(tiny model dir, {placeholder: a tiny run dir}) for the substitutions."""
    from ict.testing import save_tiny_model

    root = tmp_path_factory.mktemp("doc-snippets")
    model = save_tiny_model(root / "tiny-model")
    runs, plan = {}, []
    for name, method, seed in (("a", "grpo", 0), ("b", "ict", 0), ("c", "grpo", 1)):
        runs[name] = str(root / f"run-{name}")
        plan.append(
            (["ict", "train", "--model", str(model), "--method", method, "--seed", str(seed),
              "--max-steps", "1", "--prompts-per-step", "2", "--num-generations", "2",
              "--max-new-tokens", "4", "--eval-size", "2", "--eval-num-samples", "1",
              "--log-samples-every", "1", "--save-every", "1", "--no-plots", "--no-progress",
              "--output-dir", runs[name]], {})
        )  # fmt: skip
    done = _drive(plan, root, root)
    assert done.returncode == 0, done.stderr[-3000:]
    mapping = {p: runs["a"] for p in PLACEHOLDERS}
    mapping.update({"runs/b": runs["b"], "runs/c": runs["c"]})
    return str(model), mapping


def _fresh_run(mapping: dict, tmp_path: Path) -> dict:
    """The placeholders mapped to copies of the tiny runs (a resumed run writes into its dir)."""
    import shutil

    copies, out = {}, {}
    for placeholder, src in mapping.items():
        if src not in copies:
            copies[src] = shutil.copytree(src, tmp_path / f"copy-{len(copies)}")
        out[placeholder] = str(copies[src])
    return out


def _params():
    for block in RUN:
        marks = [pytest.mark.slow] if "slow" in block.marks else []
        yield pytest.param(block, id=block.id, marks=marks)


@pytest.mark.parametrize("block", list(_params()))
def test_block_runs(block, tiny, tmp_path):
    model, runs = tiny
    runs = _fresh_run(runs, tmp_path)
    start = time.perf_counter()
    if block.kind == "python":  # as written: no model id swapped
        done = _run([sys.executable, "-c", block.body], cwd=tmp_path)
        assert done.returncode == 0, (
            f"{block.id} failed:\n{block.body}\n--- stderr:\n{done.stderr[-4000:]}"
        )
        return
    plan = []
    for i, command in enumerate(commands(block.body)):
        argv, env = tiny_argv(
            command, python=sys.executable, tiny_model=model, runs=runs, out_dir=tmp_path / f"cmd{i}",
            fixtures=FIXTURES,
        )  # fmt: skip
        assert argv[0] in (ICT, sys.executable), (
            f"{block.id}: `{command}` is not an ict or python command; mark the block "
            f"({', '.join(sorted(MARKS))}) or make it one"
        )
        plan.append((argv, env))
    done = _drive(plan, tmp_path, tmp_path, SLOW_TIMEOUT if "slow" in block.marks else TIMEOUT)
    assert done.returncode == 0, f"{block.id} failed:\n{done.stderr[-5000:]}"
    print(f"{block.id}: {time.perf_counter() - start:.0f} s")


def test_every_block_is_run_or_marked():
    """Each Python / shell block runs (above) or carries a mark saying why it cannot; marks are
    known words; a block without an info string is not a command in disguise."""
    problems = []
    for block in ALL:
        unknown = block.marks - MARKS
        if block.kind and unknown:
            problems.append(
                f"{block.id}: unknown mark(s) {sorted(unknown)} (known: {sorted(MARKS)})"
            )
        if block.kind and not (block.marks & SKIP_MARKS) and HUB_ID.search(block.body):
            problems.append(
                f"{block.id}: names the Hub model {HUB_ID.search(block.body)[0]}, which offline "
                "runs cannot load; mark the block `network` (and say so in the prose) or use "
                "the embedded model"
            )
        if not block.language and any(
            COMMAND_START.match(line) for line in block.body.splitlines()[:1]
        ):
            problems.append(
                f"{block.id}: a command block without a language; label it ```bash (and mark it if it cannot run)"
            )
    assert not problems, "\n".join(problems)
    assert RUN, "no runnable block found"


def test_harness_counts():
    """The harness sees the blocks: README's library snippet and its TRL quick-start (on the
    embedded SmolLM2, offline) are run, not skipped."""
    readme = [b for b in RUN if b.kind == "python" and b.path.name == "README.md"]
    assert len(readme) >= 2
    assert any(
        "ICTGRPOTrainer" in b.body and "load_model_and_tokenizer()" in b.body for b in readme
    )
