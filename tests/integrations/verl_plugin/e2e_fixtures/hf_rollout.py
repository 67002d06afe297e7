"""A Hugging Face sampler as a verl 0.9.1 rollout backend, `rollout.name=hf` (test fixture).

verl 0.9.1 generates only through vLLM / SGLang / TensorRT-LLM server replicas; none runs on a
CPU. This backend plugs into the same two extension points those use:

- `RolloutReplicaRegistry.register("hf", ...)`: the replica (`HFReplica`) that verl's
  LLMServerManager creates; it starts one `HFServer` Ray actor, which the agent loop calls with
  `generate(request_id, prompt_ids, sampling_params)` and which returns verl's `TokenOutput`;
- `verl.workers.rollout.base._ROLLOUT_REGISTRY[("hf", "async")]`: the adapter (`HFServerAdapter`)
  that verl's hybrid ActorRolloutRefWorker builds and hands the actor's weights to at every
  `update_weights` (checkpoint engine `naive`, as for vLLM): they are loaded into the server.

The sampler itself is hf_server.HFServer.
"""

from __future__ import annotations

import os

import ray
import torch
from verl.workers.rollout import base as rollout_base
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, RolloutReplicaRegistry

from .hf_server import HFServer, server_name

NAME = "hf"


class HFReplica(RolloutReplica):
    """verl's rollout replica: one HFServer actor (the test runs one node)."""

    def rollout_worker_use_gpu(self) -> bool:
        return False

    async def launch_servers(self):
        from transformers import AutoConfig

        path = self.model_config.local_path if hasattr(self.model_config, "local_path") else None
        path = path or self.model_config.path
        hf_config = AutoConfig.from_pretrained(path)
        server = (
            ray.remote(HFServer)
            .options(name=server_name(self.replica_rank), num_cpus=0, max_concurrency=1)
            .remote(
                path, self.config.response_length, hf_config.eos_token_id, hf_config.pad_token_id
            )
        )
        self.servers = [server]
        self._server_handle = server
        self._server_address = f"hf-rollout-{self.replica_rank}"


class HFServerAdapter(BaseRollout):
    """verl's in-worker rollout handle: pushes the actor's weights to this rank's HFServer."""

    def __init__(self, config, model_config, device_mesh, *args, **kwargs):
        super().__init__(config, model_config, device_mesh)
        world = (
            self.config.tensor_model_parallel_size
            * self.config.data_parallel_size
            * self.config.pipeline_model_parallel_size
        )
        self.rank = int(os.environ.get("RANK", 0))
        self.replica_rank = self.rank // world
        self.is_leader = self.rank % world == 0

    async def resume(self, tags: list[str]):
        pass

    async def release(self):
        pass

    async def update_weights(self, weights, wire_format: str = "named_tensors", **kwargs):
        state = {}
        for name, tensor in weights:
            if hasattr(tensor, "full_tensor"):
                tensor = tensor.full_tensor()
            state[name] = tensor.detach().to("cpu", torch.float32).clone()
        if self.is_leader:
            server = ray.get_actor(server_name(self.replica_rank))
            await server.load_weights.remote(state)


def register() -> None:
    RolloutReplicaRegistry.register(NAME, lambda: HFReplica)
    rollout_base._ROLLOUT_REGISTRY[(NAME, "async")] = f"{__name__}.HFServerAdapter"


register()
