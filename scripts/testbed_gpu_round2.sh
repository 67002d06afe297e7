#!/usr/bin/env bash
# Round 2 of the screen in one GPU run (docs/reports/toy-paths-screen/PROTOCOL.md, "Round 2"):
# warm start 0 of variants B4, B8 and B16 on the GPU, then their screen cells at once (3 variants x
# 2 lrs x 3 GRPO seeds, one process a cell, training on the CPU cores and evaluating on the GPU),
# then the declared rule. Results (no checkpoints) packed into $DEST every 40 s and at the end.
#
#   bash scripts/testbed_gpu_round2.sh [DEST]
set -u
DEST=${1:-runs/toy-paths-pack}
RUNS=runs/toy-paths
PY=${PYTHON:-python3}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 ICT_CACHE=$PWD/runs/cache
mkdir -p "$RUNS/logs" "$DEST"
pack() {
  tar czf "$DEST/round2.tmp.tgz" --exclude='checkpoint-*' --exclude='checkpoints' \
    --exclude='*.safetensors' --exclude='*.pt' "$RUNS" 2>/dev/null
  mv -f "$DEST/round2.tmp.tgz" "$DEST/round2.tgz"
}
(while sleep 30; do pack; done) &
packer=$!
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0)) s] $*"; }
VARIANTS="B4 B8 B16"
stamp "warm starts"
pids=()
for v in $VARIANTS; do
  $PY scripts/testbed.py warm --variant "$v" --block 0 --device cuda >"$RUNS/logs/warm-$v.log" 2>&1 &
  pids+=($!)
done
wait "${pids[@]}"
grep -h '"steps"' "$RUNS"/logs/warm-*.log
tar czf "$DEST/warm2.tgz" runs/cache
stamp "cells"
pids=()
for v in $VARIANTS; do
  for lr in 1e-4 3e-4; do
    for w in 0 1 2; do
      $PY scripts/testbed.py screen --variant "$v" --lr "$lr" --eval-device cuda \
        >"$RUNS/logs/screen-$v-$lr-$w.log" 2>&1 &
      pids+=($!)
    done
  done
done
wait "${pids[@]}"
kill "$packer" 2>/dev/null
pack
stamp "done"
