#!/usr/bin/env bash
# The testbed's screen rounds, each in one run on a GPU machine
# (docs/reports/toy-paths-screen/PROTOCOL.md): warm starts on the GPU, then every cell at once, one
# process a cell, training on the CPU cores and evaluating on the GPU, then the declared rule.
# Results (no checkpoints) are packed into DEST every 30 s and at the end, so a run stopped by its
# time limit still leaves what it finished.
#
#   bash scripts/testbed_gpu.sh round1 [DEST]  # variant A: warm starts 0-4; 6 screen + 16 control cells
#   bash scripts/testbed_gpu.sh round2 [DEST]  # variants B4, B8, B16: warm start 0; 18 screen cells
set -u
ROUND=${1:?round1 or round2}
DEST=${2:-runs/toy-paths-pack}
RUNS=runs/toy-paths
PY=${PYTHON:-python3}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 ICT_CACHE=$PWD/runs/cache
mkdir -p "$RUNS/logs" "$DEST"
pack() {
  tar czf "$DEST/$ROUND.tmp.tgz" --exclude='checkpoint-*' --exclude='checkpoints' \
    --exclude='*.safetensors' --exclude='*.pt' "$RUNS" 2>/dev/null
  mv -f "$DEST/$ROUND.tmp.tgz" "$DEST/$ROUND.tgz"
}
(while sleep 30; do pack; done) &
packer=$!
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0)) s] $*"; }
pids=()
launch() {  # LOG ARGS...: one testbed.py process in the background
  local log=$1
  shift
  $PY scripts/testbed.py "$@" >"$RUNS/logs/$log.log" 2>&1 &
  pids+=($!)
}

if [ "$ROUND" = round1 ]; then VARIANTS="A" BLOCKS="0 1 2 3 4"; else VARIANTS="B4 B8 B16" BLOCKS="0"; fi
stamp "warm starts"
for v in $VARIANTS; do
  for b in $BLOCKS; do launch "warm-$v-$b" warm --variant "$v" --block "$b" --device cuda; done
done
wait "${pids[@]}"
pids=()
grep -h '"steps"' "$RUNS"/logs/warm-*.log
tar czf "$DEST/warm-$ROUND.tgz" runs/cache  # the start models (about 2 MB each)

stamp "cells"
for v in $VARIANTS; do
  for lr in 1e-4 3e-4; do
    for w in 0 1 2; do launch "screen-$v-$lr-$w" screen --variant "$v" --lr "$lr" --eval-device cuda; done
    if [ "$ROUND" = round1 ]; then  # the positive control's cells, beside the screen
      for b in 1 2 3 4; do
        for w in 0 1; do
          launch "control-$v-$lr-$b-$w" control --variant "$v" --lr "$lr" --block "$b" --eval-device cuda
        done
      done
    fi
  done
done
wait "${pids[@]}"
stamp "decide"
$PY scripts/testbed.py decide 2>&1 | tee "$RUNS/logs/decide-$ROUND.log"
if [ "$ROUND" = round1 ]; then
  stamp "paths"
  $PY scripts/testbed.py paths --eval-device cuda >"$RUNS/logs/paths.log" 2>&1
fi
kill "$packer" 2>/dev/null
pack
stamp "done"
