#!/usr/bin/env bash
# ICT on several 8-GPU nodes (Ray cluster), verl 0.9.1.
#
# 1. On the head node:     ray start --head --port=6379 --num-gpus=8
# 2. On every other node:  ray start --address=HEAD_IP:6379 --num-gpus=8
#    (every node needs the same verl environment with ict installed: its `verl.plugins` entry point
#     loads the plugin in each Ray worker; no environment variable to forward)
# 3. On the head node:     NNODES=4 bash examples/verl/run_multi_node.sh 7b ict [extra overrides...]
set -euo pipefail
SIZE="${1:-7b}"; METHOD="${2:-ict}"; shift $(( $# > 2 ? 2 : $# ))
NNODES="${NNODES:-2}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${PYTHON:-python3}"   # the verl environment's interpreter

case "$SIZE" in
  0.5b) MODEL=Qwen/Qwen2.5-0.5B; TP=1; MAXTOK=24576 ;;
  1.5b) MODEL=Qwen/Qwen2.5-1.5B; TP=1; MAXTOK=16384 ;;
  7b)   MODEL=Qwen/Qwen2.5-7B;   TP=2; MAXTOK=12288 ;;
  *) echo "size must be 0.5b, 1.5b or 7b, got $SIZE" >&2; exit 2 ;;
esac

ray status >/dev/null 2>&1 || { echo "no Ray cluster here: start it first (see the top of this script)" >&2; exit 2; }

# More GPUs -> a bigger rollout batch: 64 prompts x 16 samples per node.
BATCH=$(( 64 * NNODES ))
# a method whose authors fix the clip range gets it (Clip-Cov: 1 / 1, docs/METHOD.md)
EXTRA=()
if [ "$METHOD" = ict_clip_cov ]; then
  EXTRA=(actor_rollout_ref.actor.clip_ratio_low=1 actor_rollout_ref.actor.clip_ratio_high=1)
fi

"$PYTHON" -m verl.trainer.main_ppo \
  --config-path="$HERE/config" --config-name=ict_dapo \
  actor_rollout_ref.model.path="$MODEL" \
  actor_rollout_ref.actor.policy_loss.loss_mode="$METHOD" \
  actor_rollout_ref.rollout.tensor_model_parallel_size="$TP" \
  actor_rollout_ref.actor.ppo_max_token_len_per_gpu="$MAXTOK" \
  actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu="$MAXTOK" \
  data.train_batch_size="$BATCH" actor_rollout_ref.actor.ppo_mini_batch_size="$BATCH" \
  trainer.nnodes="$NNODES" trainer.n_gpus_per_node=8 \
  trainer.experiment_name="${METHOD}_qwen2.5_${SIZE}_${NNODES}nodes" \
  ${EXTRA[@]+"${EXTRA[@]}"} "$@"
