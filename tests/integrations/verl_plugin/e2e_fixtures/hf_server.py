"""The sampler behind the `hf` test rollout (hf_rollout): a Ray actor that imports torch and
transformers only, not verl (each verl import costs seconds of CPU per process).

Sampling is plain ancestral sampling at `temperature` (no top-k/top-p: refused), one token at a
time with the full forward (tiny models only). The returned log-probs are log softmax(logits / T),
what verl's actor recomputes. Each request draws from its own generator, seeded by the request
id and the weight version: with `rollout.full_determinism=true` verl's agent loop sends stable
request ids (`det-<row>`), so two runs with the same config sample the same responses. A result
reaches verl's agent loop as verl's own `TokenOutput` (TokenOutputPayload is rebuilt into one
when the agent loop process unpickles it).
"""

from __future__ import annotations

import zlib

import torch


def server_name(replica_rank: int) -> str:
    return f"ict_test_hf_rollout_server_{replica_rank}"


def token_output(fields: dict):
    """verl's TokenOutput (called where the result is unpickled, a process that has verl)."""
    from verl.workers.rollout.replica import TokenOutput

    return TokenOutput(**fields)


class TokenOutputPayload:
    """The fields of a verl TokenOutput; unpickles as `token_output(fields)`."""

    def __init__(self, **fields):
        self.fields = fields

    def __reduce__(self):
        return token_output, (self.fields,)


class HFServer:
    """One tiny causal LM that samples on CPU; verl's replica control calls are no-ops."""

    def __init__(self, model_path: str, response_length: int, eos_token_id, pad_token_id):
        from transformers import AutoModelForCausalLM

        torch.set_num_threads(1)
        self.model = AutoModelForCausalLM.from_pretrained(
            model_path, dtype=torch.float32, attn_implementation="sdpa"
        ).eval()
        self.response_length = int(response_length)
        eos = eos_token_id if isinstance(eos_token_id, (list, tuple)) else [eos_token_id]
        self.eos = {int(e) for e in eos if e is not None}
        self.version = 0  # weight updates received

    def load_weights(self, named_tensors: dict[str, torch.Tensor]) -> int:
        missing, unexpected = self.model.load_state_dict(named_tensors, strict=False)
        if unexpected or (missing and set(missing) - {"lm_head.weight"}):
            raise RuntimeError(f"weights do not fit the rollout model: {missing=} {unexpected=}")
        self.version += 1
        return self.version

    @torch.no_grad()
    def generate(self, request_id, prompt_ids, sampling_params, **_kwargs) -> TokenOutputPayload:
        temperature = float(sampling_params.get("temperature", 1.0))
        top_p, top_k = sampling_params.get("top_p", 1.0), sampling_params.get("top_k", -1)
        if float(top_p) != 1.0 or int(top_k) not in (-1, 0):
            raise ValueError("the hf test rollout samples the full distribution: top_p=1, top_k=-1")
        seed = zlib.crc32(f"{self.version}:{request_id}".encode())
        generator = torch.Generator().manual_seed(seed)
        ids = torch.tensor([list(prompt_ids)], dtype=torch.long)
        tokens, log_probs = [], []
        for _ in range(self.response_length):
            logits = self.model(input_ids=ids).logits[0, -1].float()
            if temperature > 0:
                logp = torch.log_softmax(logits / temperature, dim=-1)
                token = int(torch.multinomial(logp.exp(), 1, generator=generator))
            else:
                logp = torch.log_softmax(logits, dim=-1)
                token = int(logits.argmax())
            tokens.append(token)
            log_probs.append(float(logp[token]))
            ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
            if token in self.eos:
                break
        return TokenOutputPayload(
            token_ids=tokens, log_probs=log_probs, stop_reason="completed",
            extra_fields={"global_steps": self.version},
        )  # fmt: skip

    # verl's replica / checkpoint-engine control surface: nothing to free on a CPU
    def sleep(self): ...
    def wake_up(self): ...
    def clear_kv_cache(self): ...
    def release_kv_cache(self): ...
    def resume_kv_cache(self): ...
    def resume_generation(self): ...
    def abort_all_requests(self, reject_request: bool = False): ...
    def start_profile(self, **kwargs): ...
    def stop_profile(self): ...
