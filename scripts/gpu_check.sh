#!/usr/bin/env bash
# The prepared GPU check (issue 12 item 5): one command, under 10 minutes on one H200-class GPU,
# no internet. It needs python3 with torch, transformers and accelerate; anything else (TRL and
# its dependencies) comes as wheels in ./wheels (or $ICT_WHEELS) shipped beside the source tree,
# installed with --no-index --no-deps into .gpu_check_site/ (nothing system-wide changes).
#
#   scripts/gpu_check.sh                         # CUDA, full sizes; logs in gpu_check_out/
#   scripts/gpu_check.sh --cpu --tiny            # CPU dry run, small sizes
#   scripts/gpu_check.sh --download-wheels DIR   # on a machine WITH internet: fetch the wheels
#
# Without the wheels, the TRL part is reported as SKIPPED and the others still run.
# Record what it prints in docs/benchmarks.md (section "GPU check").
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

if [[ "${1:-}" == "--download-wheels" ]]; then
  dest=${2:?usage: scripts/gpu_check.sh --download-wheels DIR}
  pyver=${ICT_TARGET_PYTHON:-$($PY -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')}
  # TRL and what it needs beyond torch / transformers / accelerate. --no-deps: this list is the
  # whole set, so nothing else is pulled in; pyarrow (~40 MiB) dominates the 64 MiB budget.
  $PY -m pip download --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
    --platform manylinux_2_28_x86_64 --python-version "$pyver" -d "$dest" \
    trl datasets pyarrow dill multiprocess xxhash fsspec
  du -sh "$dest"
  exit 0
fi

WHEELS=${ICT_WHEELS:-wheels}
SITE=$PWD/.gpu_check_site
if compgen -G "$WHEELS/*.whl" >/dev/null; then
  echo "installing $(ls "$WHEELS"/*.whl | wc -l) wheels from $WHEELS into $SITE (no index, no deps)"
  $PY -m pip install --quiet --no-index --no-deps --target "$SITE" "$WHEELS"/*.whl
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
OUT=${ICT_GPU_CHECK_OUT:-gpu_check_out}
# 570 s: the whole check stays under the 10-minute budget even when a part hangs
exec timeout 570 "$PY" scripts/gpu_check.py --out "$OUT" "$@"
