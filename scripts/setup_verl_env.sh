#!/usr/bin/env bash
# Build the separate verl environment: bash scripts/setup_verl_env.sh PYTHON VENV_DIR TORCH_SPEC
#   e.g. bash scripts/setup_verl_env.sh python3 .venv-verl "torch==2.13.0"   (called by `make venv-verl`)
#
# verl 0.9.1 pins transformers<5.11 (the main .venv has a newer one), and its extras (fsdp, vllm,
# sglang, cpu) pin torch==2.11.0 with CUDA kernels. So verl is installed here WITHOUT extras and
# with --no-deps, after TORCH_SPEC, and we add by hand the runtime packages that the modules ict
# patches and verl's `main_ppo` driver import (step 5 checks; the end-to-end test
# tests/integrations/verl_plugin/test_verl_e2e.py runs that driver on a CPU). On a GPU
# machine use `TORCH_SPEC=torch==2.11.0` (or your own CUDA build) and add vllm/sglang yourself:
# see docs/engines/verl.md. Idempotent: re-running only installs what is missing.
set -euo pipefail

PYTHON="${1:-python3}"
VENV_DIR="${2:-.venv-verl}"
TORCH_SPEC="${3:-torch==2.13.0}"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if [[ "$TORCH_SPEC" == "torch" ]]; then
  echo "setup_verl_env.sh: refusing an unpinned torch (it pulls a multi-GB CUDA build);" \
       "pass e.g. torch==2.13.0" >&2
  exit 2
fi

test -x "$VENV_DIR/bin/python" || "$PYTHON" -m venv "$VENV_DIR"
PIP=("$VENV_DIR/bin/python" -m pip install -q --disable-pip-version-check)

# 1. torch first, so nothing below can pull another build.
"${PIP[@]}" "$TORCH_SPEC"

# 2. verl itself, without its declared dependencies (they are re-added below minus the heavy,
#    optional ones: wandb, tensorboard, pylatexenc, pybind11, ray[default] extras).
"${PIP[@]}" --no-deps "verl==0.9.1"

# 3. What verl's imports need at run time (ranges copied from verl 0.9.1's metadata).
"${PIP[@]}" \
  "$TORCH_SPEC" \
  "numpy>=2.0.0" "packaging>=20.0" \
  "transformers>=5.5.3,<5.11,!=5.6.0" \
  "tensordict>=0.8.0,<=0.10.0,!=0.9.0" \
  "ray>=2.41.0" omegaconf hydra-core codetiming \
  accelerate peft datasets torchdata \
  fastapi uvicorn pillow cachetools \
  "aiohttp>=3.14.4"
# aiohttp: verl's reward loop imports it on every `main_ppo` run; verl gets it through
# `ray[default]` (whose metadata pins aiohttp>=3.14.4), which we install without the extra.

# 4. ict itself (core deps are torch + numpy, already there) and the test tools.
"${PIP[@]}" --no-deps -e "$REPO_ROOT"
"${PIP[@]}" "$TORCH_SPEC" pytest hypothesis scipy

# 5. Fail here, not in the tests, when an import is missing.
OMP_NUM_THREADS=1 "$VENV_DIR/bin/python" - <<'PY'
import torch, verl  # noqa: F401
import verl.trainer.ppo.core_algos, verl.workers.utils.losses  # noqa: F401,E401
import verl.trainer.main_ppo, verl.trainer.main_ppo_v0, verl.experimental.reward_loop  # noqa: F401,E401
print(f"verl env ok: verl {verl.__version__}, torch {torch.__version__}")
PY
