"""The policy's own logits: `logit_head(model)` reproduces each family's forward (soft cap, logit
scale, scaled hidden state), the statistics and log-probs use them, and the head matmul
accumulates in float32 for bf16 weights. Tiny random models built from configs, offline."""

import math

import pytest
import torch
import transformers
from torch import nn

from ict.errors import ConfigError
from ict.head import LogitHead, logit_head
from ict.stats import token_stats, token_stats_from_hidden
from ict.stats.logit_sources import HiddenSource
from ict.train.logprobs import final_hidden, policy_logprobs, position_ids_from_mask

SMALL = dict(
    vocab_size=97,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    max_position_embeddings=64,
)
SOFTCAP = dict(final_logit_softcapping=2.0)
# family: (config class, model class, config changes, expected (scale, softcap))
FAMILIES = {
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", SOFTCAP, (1.0, 2.0)),
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", SOFTCAP, (1.0, 2.0)),
    "vaultgemma": ("VaultGemmaConfig", "VaultGemmaForCausalLM", SOFTCAP, (1.0, 2.0)),
    "nanochat": ("NanoChatConfig", "NanoChatForCausalLM", SOFTCAP, (1.0, 2.0)),
    "recurrent_gemma": (
        "RecurrentGemmaConfig",
        "RecurrentGemmaForCausalLM",
        dict(logits_soft_cap=2.0, lru_width=32, block_types=["recurrent", "attention"]),
        (1.0, 2.0),
    ),
    "beam": ("BeamConfig", "BeamForCausalLM", SOFTCAP, (1.0, 2.0)),
    "inkling2": (
        "Inkling2TextConfig",
        "Inkling2ForCausalLM",
        dict(SOFTCAP, unpadded_vocab_size=97),
        (1.0, 2.0),
    ),
    "cohere": ("CohereConfig", "CohereForCausalLM", dict(logit_scale=0.3), (0.3, None)),
    "cohere2": ("Cohere2Config", "Cohere2ForCausalLM", dict(logit_scale=0.3), (0.3, None)),
    "cohere2_moe": (
        "Cohere2MoeConfig",
        "Cohere2MoeForCausalLM",
        dict(logit_scale=0.3),
        (0.3, None),
    ),
    "falcon_h1": (
        "FalconH1Config",
        "FalconH1ForCausalLM",
        dict(
            lm_head_multiplier=3.0,
            mamba_d_ssm=32,
            mamba_n_heads=4,
            mamba_d_head=8,
            mamba_n_groups=1,
            mamba_d_state=8,
            mamba_chunk_size=8,
        ),
        (3.0, None),
    ),
    "granite": ("GraniteConfig", "GraniteForCausalLM", dict(logits_scaling=0.25), (4.0, None)),
    "granitemoe": (
        "GraniteMoeConfig",
        "GraniteMoeForCausalLM",
        dict(logits_scaling=0.25, num_local_experts=2, num_experts_per_tok=1),
        (4.0, None),
    ),
    "hyperclovax": (
        "HyperCLOVAXConfig",
        "HyperCLOVAXForCausalLM",
        dict(logits_scaling=3.0),
        (3.0, None),
    ),
    "minicpm3": (
        "MiniCPM3Config",
        "MiniCPM3ForCausalLM",
        dict(
            num_key_value_heads=4,
            dim_model_base=8,
            q_lora_rank=16,
            kv_lora_rank=16,
            qk_nope_head_dim=8,
            qk_rope_head_dim=8,
            v_head_dim=8,
        ),
        (0.25, None),
    ),
}


def build(family, seed=0):
    config_name, model_name, changes, _ = FAMILIES[family]
    config_cls = getattr(transformers, config_name, None)
    model_cls = getattr(transformers, model_name, None)
    if config_cls is None or model_cls is None:
        pytest.skip(f"transformers {transformers.__version__} has no {model_name}")
    torch.manual_seed(seed)
    model = model_cls(config_cls(**{**SMALL, **changes})).eval()
    with torch.no_grad():  # logits of a few units, so that a cap of 2 or a scale matters
        model.get_output_embeddings().weight.mul_(40)
    return model


def batch(seed=1, V=97):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, V, (3, 7), generator=g)
    attn = torch.ones_like(ids)
    attn[0, :2] = 0  # left padding
    mask = torch.rand(3, 7, generator=g) < 0.7
    mask &= attn.bool()
    return ids, attn, mask


def own_logits(model, ids, attn):
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=attn, position_ids=position_ids_from_mask(attn))
    return out.logits.float()


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_logit_head_reproduces_the_models_own_logits(family):
    model = build(family)
    ids, attn, mask = batch()
    logits = own_logits(model, ids, attn)
    with torch.no_grad():
        hidden = final_hidden(model, ids, attn)
    head = logit_head(model)
    assert (head.scale, head.softcap) == pytest.approx(FAMILIES[family][3])
    assert head.weight is model.get_output_embeddings().weight  # the parameter, not a copy
    z = head.logits(hidden.reshape(-1, hidden.shape[-1])).reshape(logits.shape)
    torch.testing.assert_close(z, logits, atol=1e-4, rtol=1e-5)
    # the plain head (the old path) is another distribution
    plain = torch.log_softmax(hidden @ head.weight.T, -1)
    assert (plain - torch.log_softmax(logits, -1)).abs().max() > 0.1


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_stats_and_logprobs_from_hidden_equal_those_of_the_models_logits(family):
    model = build(family)
    ids, attn, mask = batch()
    logits = own_logits(model, ids, attn)
    with torch.no_grad():
        hidden = final_hidden(model, ids, attn)
    head = logit_head(model)
    tokens = torch.randint(0, 97, ids.shape, generator=torch.Generator().manual_seed(2))
    for reference in ("batch_mean", "group_position"):
        kw = {"group_ids": torch.tensor([0, 0, 1])} if reference == "group_position" else {}
        a = token_stats_from_hidden(
            hidden,
            head,
            tokens,
            mask,
            temperature=0.7,
            reference=reference,
            chunk_size=4,
            **kw,
        )
        b = token_stats(logits, tokens, mask, temperature=0.7, reference=reference, **kw)
        for f in ("entropy", "renyi2", "logprob", "js"):
            torch.testing.assert_close(getattr(a, f), getattr(b, f), atol=2e-5, rtol=1e-5)
    # the update's log-probs: policy_logprobs applies the model's transform by itself
    lp, _ = policy_logprobs(model, ids, attn, mask, temperature=0.7)
    ref = torch.log_softmax(logits[:, :-1] / 0.7, -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    m = mask[:, 1:]
    torch.testing.assert_close(lp[:, 1:][m], ref[m], atol=2e-5, rtol=1e-5)


def test_inkling_scaled_hidden_and_unpadded_vocabulary():
    if getattr(transformers, "InklingForCausalLM", None) is None:
        pytest.skip("no Inkling in this transformers")
    torch.manual_seed(0)
    config = transformers.InklingTextConfig(
        **SMALL,
        logits_mup_width_multiplier=4.0,
        unpadded_vocab_size=90,
        swa_num_attention_heads=4,
        swa_num_key_value_heads=2,
        swa_head_dim=8,
        moe_intermediate_size=16,
        n_routed_experts=4,
        num_experts_per_tok=2,
        n_shared_experts=1,
    )
    model = transformers.InklingForCausalLM(config).eval()
    ids, attn, _ = batch(V=90)
    logits = own_logits(model, ids, attn)
    with torch.no_grad():
        hidden = final_hidden(model, ids, attn)
    head = logit_head(model)
    assert head.weight.shape[0] == logits.shape[-1] == 90 and head.scale == 0.25
    z = head.logits(hidden.reshape(-1, 32)).reshape(logits.shape)
    torch.testing.assert_close(z, logits, atol=1e-5, rtol=1e-5)


def test_reference_policy_uses_the_reference_heads_transform():
    g = torch.Generator().manual_seed(0)
    B, T, D, V = 3, 5, 8, 20
    hidden, ref_hidden = torch.randn(B, T, D, generator=g), torch.randn(B, T, D, generator=g)
    W, W_ref = 2 * torch.randn(V, D, generator=g), 2 * torch.randn(V, D, generator=g)
    tokens = torch.randint(0, V, (B, T), generator=g)
    mask = torch.rand(B, T, generator=g) < 0.8

    def capped(z, cap):
        return cap * torch.tanh(z / cap)

    head = LogitHead(W, None, scale=0.5, softcap=3.0)
    kw = dict(reference="reference_policy")
    # the reference shares the policy's head: its transform too
    a = token_stats_from_hidden(hidden, head, tokens, mask, reference_hidden=ref_hidden, **kw)
    b = token_stats(
        capped(0.5 * hidden @ W.T, 3.0),
        tokens,
        mask,
        reference="reference_policy",
        reference_logits=capped(0.5 * ref_hidden @ W.T, 3.0),
    )
    torch.testing.assert_close(a.js, b.js, atol=1e-6, rtol=0)
    # its own head, its own transform (here: a scale, no cap)
    a = token_stats_from_hidden(
        hidden,
        head,
        tokens,
        mask,
        reference_hidden=ref_hidden,
        reference_head=LogitHead(W_ref, scale=2.0),
        **kw,
    )
    b = token_stats(
        capped(0.5 * hidden @ W.T, 3.0),
        tokens,
        mask,
        reference="reference_policy",
        reference_logits=2.0 * ref_hidden @ W_ref.T,
    )
    torch.testing.assert_close(a.js, b.js, atol=1e-6, rtol=0)
    assert a.js.abs().max() > 0.05


def test_bf16_weight_gives_float32_accurate_logits():
    """A bf16 head's logits are float32 products of the bf16 values: error ~1e-6, not ~1e-2."""
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(4, 6, 64, generator=g).bfloat16()
    W = torch.randn(300, 64, generator=g).bfloat16()
    exact = hidden.double() @ W.double().T  # the bf16 values' products, no rounding
    bf16_err = ((hidden @ W.T).double() - exact).abs().max()
    assert bf16_err > 1e-2  # what a bf16 matmul loses at these magnitudes
    src = HiddenSource(hidden, LogitHead(W, None, 0.5, 20.0), 1.0)
    assert src.head.weight.dtype == torch.float32  # cast once, here, not per chunk
    rows, pos = torch.arange(4).repeat_interleave(6), torch.arange(6).repeat(4)
    out = torch.empty(24, 300)
    z = src.fill(rows, pos, out)
    assert z.dtype == torch.float32 and z.data_ptr() == out.data_ptr()
    want = (20.0 * torch.tanh(0.5 * exact / 20.0)).reshape(24, 300)
    assert (z.double() - want).abs().max() < 1e-4 * bf16_err.item()
    # the statistics follow: equal to those of the float32 logits of the same bf16 values
    tokens = torch.randint(0, 300, (4, 6), generator=g)
    mask = torch.ones(4, 6, dtype=torch.bool)
    a = token_stats_from_hidden(hidden, LogitHead(W), tokens, mask, chunk_size=5)
    b = token_stats(hidden.float() @ W.float().T, tokens, mask)
    for f in ("entropy", "renyi2", "logprob", "js"):
        torch.testing.assert_close(getattr(a, f), getattr(b, f), atol=1e-5, rtol=0)


def test_logit_head_math_dtypes_and_validation():
    g = torch.Generator().manual_seed(0)
    h, W, b = torch.randn(5, 4, generator=g), torch.randn(7, 4, generator=g), torch.randn(7)
    head = LogitHead(W, b, scale=1.5, softcap=2.0)
    want = 2.0 * torch.tanh(1.5 * (h @ W.T + b) / 2.0) / 0.7
    torch.testing.assert_close(head.logits(h, 0.7), want)
    out = torch.full((9, 7), float("nan"))
    assert torch.equal(head.logits(h, 0.7, out=out), head.logits(h, 0.7))  # same bits
    assert LogitHead(W.double()).logits(h.double()).dtype == torch.float64
    assert LogitHead(W, softcap=math.inf).softcap is None  # an infinite cap is no cap
    for bad in (dict(scale=0.0), dict(scale=-1.0), dict(scale=math.nan), dict(softcap=-2.0)):
        with pytest.raises(ConfigError):
            LogitHead(W, **bad)


def tiny_llama(**config_changes):
    from ict.testing import tiny_model_and_tokenizer

    model, _ = tiny_model_and_tokenizer(seed=0)
    for k, v in config_changes.items():
        setattr(model.config, k, v)
    return model


def test_plain_models_get_the_plain_head():
    model = tiny_llama()
    head = logit_head(model)
    assert (head.scale, head.softcap) == (1.0, None)
    assert head.weight is model.lm_head.weight and head.bias is None


@pytest.mark.parametrize(
    "attr, value",
    [("final_logit_softcapping", 30.0), ("logit_scale", 0.0625), ("logits_scaling", 8.0)],
)
def test_unknown_logit_transform_is_refused(attr, value):
    """A model class ict does not know, whose config sets a logit transform: ConfigError."""
    model = tiny_llama(**{attr: value})
    with pytest.raises(ConfigError, match=f"LlamaForCausalLM's config sets {attr}={value!r}"):
        logit_head(model)
    with pytest.raises(ConfigError):
        policy_logprobs(model, *batch(V=90))


def test_heads_with_their_own_forward_are_refused():
    class ScaledLinear(nn.Linear):
        def forward(self, x):
            return super().forward(x) * 2

    class Adapter(nn.Module):  # what a PEFT LoRA layer on lm_head looks like
        def __init__(self, base):
            super().__init__()
            self.base_layer = base
            self.weight = base.weight

    for make in (lambda h: ScaledLinear(h.in_features, h.out_features, bias=False), Adapter):
        model = tiny_llama()
        model.lm_head = make(model.lm_head)
        with pytest.raises(ConfigError, match="lm_head|output embedding"):
            logit_head(model)


def test_wrappers_are_unwrapped():
    """A PEFT-style wrapper (get_base_model) gets its base model's transform."""
    model = build("gemma2")

    class Wrapper:
        def get_base_model(self):
            return model

    head = logit_head(Wrapper())
    assert head.softcap == 2.0 and head.weight is model.lm_head.weight
