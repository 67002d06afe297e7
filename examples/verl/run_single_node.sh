#!/usr/bin/env bash
# ICT (or a baseline) on one 8-GPU node with verl 0.9.1.
#   bash examples/verl/run_single_node.sh [0.5b|1.5b|7b] [ict|ict_entropy|ict_stapo|ict_random|ict_grpo|ict_clip_cov|ict_kl_cov|ict_entropy_bonus] [extra overrides...]
# Needs a GPU verl environment with ict installed (docs/engines/verl.md) and the data from
#   python examples/verl/prepare_data.py --dataset math --out ~/data/ict/math
set -euo pipefail
SIZE="${1:-1.5b}"; METHOD="${2:-ict}"; shift $(( $# > 2 ? 2 : $# ))
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${PYTHON:-python3}"   # the verl environment's interpreter

case "$SIZE" in
  0.5b) MODEL=Qwen/Qwen2.5-0.5B; TP=1; MAXTOK=24576; OFFLOAD=false ;;
  1.5b) MODEL=Qwen/Qwen2.5-1.5B; TP=1; MAXTOK=16384; OFFLOAD=false ;;
  7b)   MODEL=Qwen/Qwen2.5-7B;   TP=2; MAXTOK=8192;  OFFLOAD=true ;;
  *) echo "size must be 0.5b, 1.5b or 7b, got $SIZE" >&2; exit 2 ;;
esac

# (find_spec: a quick check that loads no verl; the plugin itself loads in every verl process)
"$PYTHON" -c "import importlib.util as u, sys; sys.exit(u.find_spec('ict.integrations.verl') is None)" || {
  echo "ict is not importable in this environment: pip install -e . --no-deps (see docs/engines/verl.md)" >&2; exit 2; }

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
  actor_rollout_ref.actor.fsdp_config.param_offload="$OFFLOAD" \
  actor_rollout_ref.actor.fsdp_config.optimizer_offload="$OFFLOAD" \
  trainer.nnodes=1 trainer.n_gpus_per_node=8 \
  trainer.experiment_name="${METHOD}_qwen2.5_${SIZE}" \
  ${EXTRA[@]+"${EXTRA[@]}"} "$@"
