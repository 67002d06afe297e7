"""Decoding small Hugging Face Llama models with a static cache: the same weights and logits,
a fraction of the dispatch.

On a CPU a 3-layer 128-wide Llama (the toy presets' model) spends most of a decoding step at batch
32 in Python and per-op dispatch, not arithmetic (docs/benchmarks.md, "Study throughput").
`LeanLlama` computes the model's decoding step with fewer ops: RMSNorm as one `F.rms_norm`, the
q/k/v and gate/up projections each as one matmul over concatenated weights, rotary embeddings
from one cos/sin table, grouped-query heads packed for `scaled_dot_product_attention` (as the
model's own sdpa path does for one query), and a static key/value cache written in place (no
`torch.cat` per token). It reads the model's own parameters, so optimizer steps and loaded
checkpoints are seen.

`unsupported(model)` names what it cannot compute (callers then keep `model.generate`);
`LeanLlama(model).start(...)` runs each prompt's first P - 1 tokens once into the cache and
`.step(state, tokens)` feeds one token per row. On the CPU build tested the logits equal those
of `model.generate` bit for bit, so sampling gives the same tokens (tests/fast); on other
kernels they agree to float rounding.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

# the config values this forward assumes (anything else: `unsupported` says so)
_CLASSES = ("LlamaForCausalLM",)


def unsupported(model) -> str | None:
    """None when `LeanLlama` computes `model`'s forward; else one line saying why not."""
    name = type(model).__name__
    if name not in _CLASSES:
        return f"{name} is not a LlamaForCausalLM"
    weight = next(model.parameters())
    if weight.device.type != "cpu" or weight.dtype != torch.float32:
        # where its logits are checked against the model's bit for bit (tests/fast)
        return f"{name} in {weight.dtype} on {weight.device.type} (the fast path is float32 on CPU)"
    cfg = model.config
    rope = getattr(cfg, "rope_parameters", None) or {}
    checks = {
        # the sdpa kernel is what makes the logits equal bit for bit (eager attention sums
        # in another order)
        "attention other than sdpa": getattr(cfg, "_attn_implementation", "sdpa") != "sdpa",
        "rope scaling": rope.get("rope_type", "default") != "default",
        "attention bias": bool(getattr(cfg, "attention_bias", False)),
        "MLP bias": bool(getattr(cfg, "mlp_bias", False)),
        "activation other than silu": getattr(cfg, "hidden_act", "silu") != "silu",
        "pretraining_tp > 1": int(getattr(cfg, "pretraining_tp", 1) or 1) > 1,
        "a logit transform": any(
            getattr(cfg, a, None) not in (None, 1, 1.0)
            for a in ("logit_scale", "final_logit_softcapping", "logits_scaling")
        ),
    }
    bad = [what for what, hit in checks.items() if hit]
    if bad:
        return f"{name} with {', '.join(bad)}"
    return None


class LeanLlama:
    """Static-cache decoding of an HF Llama `model` with fused ops (see the module docstring).

    It holds the model's parameters, not copies: each `start` fuses the current weights, so
    optimizer steps and loaded checkpoints (both in place) are seen by the next batch."""

    def __init__(self, model, dtype: torch.dtype | None = None):
        """dtype: of the decoding's matmuls and cache (None: the model's float32; bfloat16: the
        weights are cast at each `start`, the logits stay float32)."""
        reason = unsupported(model)
        if reason is not None:
            raise ValueError(f"LeanLlama cannot run {reason}")
        cfg = model.config
        base = model.model
        self.heads = cfg.num_attention_heads
        self.kv_heads = cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.heads
        self.eps = cfg.rms_norm_eps
        self.embed = base.embed_tokens.weight
        self.norm = base.norm.weight
        self.lm_head = model.lm_head.weight
        self.layers = base.layers
        rotary = base.rotary_emb
        self.inv_freq = rotary.inv_freq
        self.rope_scale = float(getattr(rotary, "attention_scaling", 1.0))
        self.scaling = self.head_dim**-0.5
        self.dtype = dtype or self.embed.dtype

    # ---- pieces --------------------------------------------------------------------------------
    def _rope(self, positions: torch.Tensor, dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin [*positions.shape, head_dim] for integer positions (as LlamaRotaryEmbedding)."""
        freqs = positions[..., None].float() * self.inv_freq.to(positions.device, torch.float32)
        emb = torch.cat((freqs, freqs), dim=-1)
        return (emb.cos() * self.rope_scale).to(dtype), (emb.sin() * self.rope_scale).to(dtype)

    @staticmethod
    def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin

    def _weights(self, layer):
        """(fused qkv weight, o weight, fused gate/up weight, down weight, norm weights)."""
        a, m = layer.self_attn, layer.mlp
        qkv = torch.cat((a.q_proj.weight, a.k_proj.weight, a.v_proj.weight))
        gate_up = torch.cat((m.gate_proj.weight, m.up_proj.weight))
        weights = (
            qkv,
            a.o_proj.weight,
            gate_up,
            m.down_proj.weight,
            layer.input_layernorm.weight,
            layer.post_attention_layernorm.weight,
        )
        return tuple(w.to(self.dtype) for w in weights)

    def _split_qkv(self, x, qkv):
        """x [B, T, D] -> q [B, H, T, hd], k, v [B, KV, T, hd]."""
        b, t, _ = x.shape
        hd, h, kv = self.head_dim, self.heads, self.kv_heads
        out = F.linear(x, qkv)
        q, k, v = out.split((h * hd, kv * hd, kv * hd), dim=-1)
        return (
            q.view(b, t, h, hd).transpose(1, 2),
            k.view(b, t, kv, hd).transpose(1, 2),
            v.view(b, t, kv, hd).transpose(1, 2),
        )

    def _mlp(self, x, gate_up, down):
        g, u = F.linear(x, gate_up).chunk(2, dim=-1)
        return F.linear(F.silu(g) * u, down)

    def _repeat_kv(self, x: torch.Tensor) -> torch.Tensor:
        rep = self.heads // self.kv_heads
        if rep == 1:
            return x
        b, kv, t, hd = x.shape
        return x[:, :, None].expand(b, kv, rep, t, hd).reshape(b, kv * rep, t, hd)

    def _mask(self, attn_keys: torch.Tensor, q_cols: torch.Tensor, k_cols: torch.Tensor):
        """bool [B, 1, Tq, Tk]: key valid and at or before the query, or the query itself."""
        causal = k_cols[None, :] <= q_cols[:, None]
        own = k_cols[None, :] == q_cols[:, None]
        return ((attn_keys.bool()[:, None, :] & causal) | own)[:, None]

    # ---- decoding with a static cache (ict.fast.generate) --------------------------------------
    @torch.no_grad()
    def start(self, prompt_ids, prompt_attn, *, samples: int, max_new_tokens: int):
        """Run each prompt's first P - 1 tokens once, repeat their keys/values `samples` times into
        a static cache of P + max_new_tokens columns; returns a `DecodeState` whose next `step`
        feeds column P - 1 (the prompt's last token)."""
        u, p = prompt_ids.shape
        n = u * samples
        dtype, device = self.dtype, prompt_ids.device
        width = p + max_new_tokens
        weights = [self._weights(layer) for layer in self.layers]
        heads = (self.embed.to(dtype), self.norm.to(dtype), self.lm_head.to(dtype))
        valid = torch.zeros(n, width, dtype=torch.bool, device=device)
        valid[:, :p] = prompt_attn.bool().repeat_interleave(samples, 0)
        real = prompt_attn.long().sum(-1).repeat_interleave(samples, 0)  # [N] real prompt tokens
        # every column is written before a step reads it (the prefix fills the first P - 1,
        # each step its own), so the cache needs no zeroing
        shape = (n, self.kv_heads, width, self.head_dim)
        caches = [
            (
                torch.empty(shape, dtype=dtype, device=device),
                torch.empty(shape, dtype=dtype, device=device),
            )
            for _ in self.layers
        ]
        if p > 1:  # the prefix, once per prompt (positions skip left padding)
            ids, attn = prompt_ids[:, :-1], prompt_attn[:, :-1]
            x = F.embedding(ids, heads[0])
            positions = (attn.long().cumsum(-1) - 1).clamp(min=0)
            cos, sin = self._rope(positions, dtype)
            cos, sin = cos[:, None], sin[:, None]
            cols = torch.arange(p - 1, device=device)
            mask = self._mask(attn, cols, cols)
            for (qkv, o, gate_up, down, n1, n2), (kcache, vcache) in zip(
                weights, caches, strict=True
            ):
                h = F.rms_norm(x, (x.shape[-1],), n1, self.eps)
                q, k, v = self._split_qkv(h, qkv)
                q, k = self._rotate(q, cos, sin), self._rotate(k, cos, sin)
                kcache[:, :, : p - 1] = k.repeat_interleave(samples, 0)
                vcache[:, :, : p - 1] = v.repeat_interleave(samples, 0)
                a = F.scaled_dot_product_attention(
                    q, self._repeat_kv(k), self._repeat_kv(v), attn_mask=mask, scale=self.scaling
                )
                x = x + F.linear(a.transpose(1, 2).reshape(x.shape[0], x.shape[1], -1), o)
                x = x + self._mlp(F.rms_norm(x, (x.shape[-1],), n2, self.eps), gate_up, down)
        max_pos = int(real.max()) + max_new_tokens + 1
        cos, sin = self._rope(torch.arange(max_pos, device=device), dtype)
        return DecodeState(weights, caches, valid, real - 1, p - 1, cos, sin, heads)

    @torch.no_grad()
    def step(self, state: DecodeState, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Feed `tokens` [N] at the state's next column; returns (logits [N, V] float32,
        final hidden [N, D]) and advances the state."""
        col = state.column
        n = tokens.shape[0]
        embed, norm, lm_head = state.heads
        x = F.embedding(tokens, embed)[:, None]  # [N, 1, D]
        cos, sin = state.cos[state.position][:, None], state.sin[state.position][:, None]
        state.valid[:, col] = True
        mask = state.valid[:, None, None, : col + 1]  # [N, 1, 1, col + 1]
        heads, rep, kv, hd = self.heads, self.heads // self.kv_heads, self.kv_heads, self.head_dim
        for (qkv, o, gate_up, down, n1, n2), (kcache, vcache) in zip(
            state.weights, state.caches, strict=True
        ):
            h = F.rms_norm(x, (x.shape[-1],), n1, self.eps)
            out = F.linear(h[:, 0], qkv)  # [N, (H + 2 KV) hd]
            # queries and keys rotated in one go: [N, H + KV, hd]
            qk = self._rotate(out[:, : (heads + kv) * hd].view(n, heads + kv, hd), cos, sin)
            q = qk[:, :heads]
            kcache[:, :, col] = qk[:, heads:]
            vcache[:, :, col] = out[:, (heads + kv) * hd :].view(n, kv, hd)
            # grouped-query heads packed: [N, KV, rep, hd] queries against [N, KV, col+1, hd]
            a = F.scaled_dot_product_attention(
                q.reshape(n, kv, rep, hd), kcache[:, :, : col + 1], vcache[:, :, : col + 1],
                attn_mask=mask, scale=self.scaling,
            )  # fmt: skip
            x = x + F.linear(a.reshape(n, 1, -1), o)
            x = x + self._mlp(F.rms_norm(x, (x.shape[-1],), n2, self.eps), gate_up, down)
        hidden = F.rms_norm(x[:, 0], (x.shape[-1],), norm, self.eps)
        state.column += 1
        state.position = state.position + 1
        return F.linear(hidden, lm_head).float(), hidden


class DecodeState:
    """A decoding batch's static cache and where it is: per layer (keys, values) [N, KV, S, hd];
    valid: bool [N, S] keys that exist; position: [N] rotary position of the next token; column:
    the next cache column; cos, sin: the rotary table [max position, hd]; weights: fused per
    layer; heads: (embedding, final norm, LM head) in the decoding's dtype."""

    def __init__(self, weights, caches, valid, position, column, cos, sin, heads):
        self.weights, self.caches, self.valid = weights, caches, valid
        self.position, self.column, self.cos, self.sin = position, column, cos, sin
        self.heads = heads

    def select(self, rows: torch.Tensor) -> None:
        """Keep only `rows` [M] (long indices) of the batch, in that order: finished rows leave
        the cache and cost nothing in later steps."""
        self.caches = [(k[rows], v[rows]) for k, v in self.caches]
        self.valid, self.position = self.valid[rows], self.position[rows]
