#!/usr/bin/env bash
# The testbed's stages in one run on a GPU machine (docs/reports/toy-paths-screen/PROTOCOL.md):
# warm starts 0-4 on the GPU, then every cell at once, one process a cell, training on the CPU
# cores and evaluating on the GPU (the screen: 2 lrs x 3 GRPO seeds on
# warm start 0; the positive control: 2 lrs x warm starts 1-4 x grpo and w_reinforce), then the
# screen's declared rule. Results (no checkpoints) are packed into $DEST/results.tgz every 40 s and
# at the end, so a run stopped by its time limit still leaves what it finished.
#
#   bash scripts/testbed_gpu.sh [DEST]        # DEST default runs/toy-paths-pack
set -u
DEST=${1:-runs/toy-paths-pack}
RUNS=runs/toy-paths
PY=${PYTHON:-python3}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 ICT_CACHE=$PWD/runs/cache
mkdir -p "$RUNS/logs" "$DEST"
pack() {
  tar czf "$DEST/results.tmp.tgz" --exclude='checkpoint-*' --exclude='checkpoints' \
    --exclude='*.safetensors' --exclude='*.pt' "$RUNS" 2>/dev/null
  mv -f "$DEST/results.tmp.tgz" "$DEST/results.tgz"
}
(while sleep 40; do pack; done) &
packer=$!
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0)) s] $*"; }

stamp "warm starts"
pids=()
for b in 0 1 2 3 4; do
  $PY scripts/testbed.py warm --block "$b" --device cuda >"$RUNS/logs/warm$b.log" 2>&1 &
  pids+=($!)
done
wait "${pids[@]}"
grep -h '"steps"' "$RUNS"/logs/warm*.log
tar czf "$DEST/warm.tgz" runs/cache  # the five start models (about 2 MB each)

stamp "cells"
pids=()
for lr in 1e-4 3e-4; do
  for w in 0 1 2; do
    $PY scripts/testbed.py screen --lr "$lr" --eval-device cuda >"$RUNS/logs/screen-$lr-$w.log" 2>&1 &
    pids+=($!)
  done
  for b in 1 2 3 4; do
    for w in 0 1; do
      $PY scripts/testbed.py control --lr "$lr" --block "$b" --eval-device cuda \
        >"$RUNS/logs/control-$lr-$b-$w.log" 2>&1 &
      pids+=($!)
    done
  done
done
wait "${pids[@]}"
stamp "decide"
$PY scripts/testbed.py decide 2>&1 | tee "$RUNS/logs/decide.log"
stamp "paths"
$PY scripts/testbed.py paths --eval-device cuda >"$RUNS/logs/paths.log" 2>&1
kill "$packer" 2>/dev/null
pack
stamp "done"
tail -n 3 "$RUNS"/logs/*.log
