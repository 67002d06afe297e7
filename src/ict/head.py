"""The policy's output head: the logits the model samples from.

Most causal LMs sample from `hidden @ W.T (+ b)`, but several Hugging Face families transform
those logits in their forward (a soft cap, a scale, a scaled hidden state). `logit_head(model)`
reads that transform from the model's (text) config, `LogitHead.logits` applies it:

    z = softcap(scale * (h @ W.T + b)) / temperature,   softcap(x) = cap * tanh(x / cap)

in float32 accumulation (float64 for a float64 weight). `TRANSFORMS` below is the one table of the
transforms ict knows; a model outside it whose config sets a logit-transform attribute is refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ict.errors import ConfigError

# How a config attribute applies (None leaves the logits unchanged, as in the forward):
MUL = "mul"  # z * a
DIV = "div"  # z / a
SOFTCAP = "softcap"  # a * tanh(z / a)
HIDDEN_DIV = "hidden_div"  # lm_head(h / a) = z / a (no head bias)
WIDTH = "width"  # lm_head(h / (hidden_size / a)) = z * a / hidden_size (no head bias)
VOCAB = "vocab"  # logits[..., :a]: the head's rows past a are dropped

# Model class (or a base class of it) -> the steps its forward applies after the last hidden
# state, in order; every scale step must come before the soft cap. Checked against
# transformers 5.24's modeling_*.py.
TRANSFORMS: dict[tuple[str, ...], tuple[tuple[str, str], ...]] = {
    # Gemma-2/3(text)/3n/4 (+ Gemma-4 unified), VaultGemma, NanoChat, Beam, PaliGemma(-2),
    # Inkling-2, Mistral-Large-4: cap * tanh(z / cap) (final_logit_softcapping, when set)
    (
        "Gemma2ForCausalLM",
        "Gemma3ForCausalLM",
        "Gemma3nForCausalLM",
        "Gemma3nForConditionalGeneration",
        "Gemma4ForCausalLM",
        "Gemma4ForConditionalGeneration",
        "Gemma4UnifiedForCausalLM",
        "Gemma4UnifiedForConditionalGeneration",
        "VaultGemmaForCausalLM",
        "NanoChatForCausalLM",
        "BeamForCausalLM",
        "PaliGemmaForConditionalGeneration",
        "Inkling2ForCausalLM",
        "Inkling2ForConditionalGeneration",
        "Inkling2LoopForCausalLM",
        "Inkling2LoopForConditionalGeneration",
        "MistralLarge4ForConditionalGeneration",
    ): (("final_logit_softcapping", SOFTCAP),),
    # RecurrentGemma: cap * tanh(z / cap) (logits_soft_cap)
    ("RecurrentGemmaForCausalLM",): (("logits_soft_cap", SOFTCAP),),
    # xLSTM: cap * tanh(z / cap) (output_logit_soft_cap)
    ("xLSTMForCausalLM",): (("output_logit_soft_cap", SOFTCAP),),
    # Muse Spark / Glimmer: cap * tanh(z * output_multiplier / cap)
    ("MuseSparkForConditionalGeneration", "MuseGlimmerForConditionalGeneration"): (
        ("output_multiplier", MUL),
        ("final_logit_softcapping", SOFTCAP),
    ),
    # Cohere (Command-R), Cohere2 (Command-R7B / A), Cohere2-MoE, Cohere Compass: z * logit_scale
    (
        "CohereForCausalLM",
        "Cohere2ForCausalLM",
        "Cohere2MoeForCausalLM",
        "CohereCompassForCausalLM",
        "CohereCompassForConditionalGeneration",
    ): (("logit_scale", MUL),),
    # Granite (3.x), Granite-MoE(-shared/-hybrid, Granite 4), Granite-SWA, Granite-4 vision,
    # Granite-Docling: z / logits_scaling
    (
        "GraniteForCausalLM",
        "GraniteSWAForCausalLM",
        "GraniteMoeForCausalLM",
        "GraniteMoeSWAForCausalLM",
        "GraniteMoeSharedForCausalLM",
        "GraniteMoeHybridForCausalLM",
        "Granite4VisionForConditionalGeneration",
        "GraniteDoclingForConditionalGeneration",
    ): (("logits_scaling", DIV),),
    # HyperCLOVA X (and its vision v2): z * logits_scaling (MuP; Granite divides by it)
    ("HyperCLOVAXForCausalLM", "HyperCLOVAXVisionV2ForConditionalGeneration"): (
        ("logits_scaling", MUL),
    ),
    # Falcon-H1: z * lm_head_multiplier
    ("FalconH1ForCausalLM",): (("lm_head_multiplier", MUL),),
    # MiniCPM (remote code) and MiniCPM3: lm_head(h / (hidden_size / dim_model_base))
    ("MiniCPMForCausalLM", "MiniCPM3ForCausalLM"): (("dim_model_base", WIDTH),),
    # Inkling: lm_head(h / logits_mup_width_multiplier)[..., :unpadded_vocab_size]
    ("InklingForCausalLM", "InklingForConditionalGeneration"): (
        ("logits_mup_width_multiplier", HIDDEN_DIV),
        ("unpadded_vocab_size", VOCAB),
    ),
    # Vision-language wrappers whose forward is lm_head alone, whatever their text config says
    # (Gemma-3 VLM: no soft cap; Command-A vision / Aya vision: no logit_scale; Granite vision,
    # a LLaVA(-NeXT/-OneVision) with a Granite text model: no logits_scaling)
    (
        "Gemma3ForConditionalGeneration",
        "Cohere2VisionForConditionalGeneration",
        "AyaVisionForConditionalGeneration",
        "LlavaForConditionalGeneration",
        "LlavaNextForConditionalGeneration",
        "LlavaOnevisionForConditionalGeneration",
    ): (),
}

# Model classes whose logits are not softcap(scale * (h @ W.T + b)) of the output embedding.
UNSUPPORTED: dict[tuple[str, ...], str] = {
    # Dory: a learned per-token logit scale
    ("DoryForCausalLM",): "its LM head multiplies each vocabulary entry by a learned scale",
    # Gemma-4 assistants (drafters): ordered masked embeddings
    ("Gemma4AssistantForCausalLM", "Gemma4UnifiedAssistantForCausalLM"): (
        "its logits come from a masked ordered embedding, not the output embedding alone"
    ),
    # BERT/RoBERTa-style decoders, Electra, ModernBERT decoder, CLVP: a prediction head
    # (dense + norm) or a final norm runs between the hidden state and the output embedding
    (
        "BertLMHeadModel",
        "BigBirdForCausalLM",
        "ErnieForCausalLM",
        "MegatronBertForCausalLM",
        "RemBertForCausalLM",
        "RoCBertForCausalLM",
        "RoFormerForCausalLM",
        "RobertaForCausalLM",
        "RobertaPreLayerNormForCausalLM",
        "CamembertForCausalLM",
        "Data2VecTextForCausalLM",
        "XLMRobertaForCausalLM",
        "XLMRobertaXLForCausalLM",
        "XmodForCausalLM",
        "ElectraForCausalLM",
        "ModernBertDecoderForCausalLM",
        "ClvpForCausalLM",
    ): "a prediction head runs between its final hidden state and the output embedding",
    # ProphetNet, MusicGen, CSM depth decoder: several streams or codebook heads
    (
        "ProphetNetForCausalLM",
        "MusicgenForCausalLM",
        "MusicgenMelodyForCausalLM",
        "CsmDepthDecoderForCausalLM",
    ): "its logits come from several prediction streams or heads",
}

# Config attributes that transform the logits in some family: a model outside TRANSFORMS that
# sets one to a non-neutral value (not None, not 1) is refused rather than silently ignored.
SUSPECT = sorted(
    {attr for steps in TRANSFORMS.values() for attr, op in steps if op != VOCAB}
    | {"logit_softcapping", "logits_softcap", "mup_output_alpha", "output_multiplier_scale"}
)

_BY_CLASS = {name: steps for names, steps in TRANSFORMS.items() for name in names}
_REFUSED = {name: why for names, why in UNSUPPORTED.items() for name in names}


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


@dataclass(frozen=True, eq=False)
class LogitHead:
    """weight [V, D] and bias [V] or None (any float dtype), scale > 0, softcap > 0 or None.

    logits(h) = softcap(scale * (h @ W.T + b)) / temperature, the order of every HF forward in
    TRANSFORMS (scale before the cap, the sampling temperature last).
    """

    weight: Tensor
    bias: Tensor | None = None
    scale: float = 1.0
    softcap: float | None = None

    def __post_init__(self):
        scale, cap = self.scale, self.softcap
        if isinstance(scale, bool) or not isinstance(scale, (int, float)):
            raise ConfigError(f"logit scale must be a number > 0, got {scale!r}")
        if not (math.isfinite(scale) and scale > 0):
            raise ConfigError(f"logit scale must be a finite number > 0, got {scale!r}")
        if cap is not None and (
            isinstance(cap, bool) or not isinstance(cap, (int, float)) or not cap > 0
        ):
            raise ConfigError(f"logit softcap must be a number > 0 or None, got {cap!r}")
        object.__setattr__(self, "scale", float(scale))
        object.__setattr__(self, "softcap", None if cap is None or cap == math.inf else float(cap))

    @property
    def dtype(self) -> torch.dtype:
        """The compute dtype: float32, or float64 for a float64 weight."""
        return _compute_dtype(self.weight.dtype)

    def cast(self) -> LogitHead:
        """This head with weight and bias in the compute dtype (cast once, reuse per chunk)."""
        dt = self.dtype
        bias = None if self.bias is None else self.bias.to(dt)
        return LogitHead(self.weight.to(dt), bias, self.scale, self.softcap)

    def logits(self, h: Tensor, temperature: float = 1.0, out: Tensor | None = None) -> Tensor:
        """h [n, D] (any float dtype) -> [n, V] logits in the compute dtype.

        With `out` ([>= n, V], compute dtype) the result is written into out[:n] in place (no
        [n, V] temporary, no gradient); without it the ops are out of place (differentiable).
        Both give the same bits.
        """
        dt = self.dtype
        w = self.weight.to(dt)
        b = None if self.bias is None else self.bias.to(dt)
        h = h.to(dt)
        if out is None:
            z = F.linear(h, w, b)
            if self.scale != 1.0:
                z = z * self.scale
            if self.softcap is not None:
                z = torch.tanh(z / self.softcap) * self.softcap
            return z / temperature
        z = out[: h.shape[0]]
        if b is None:
            torch.mm(h, w.t(), out=z)
        else:
            torch.addmm(b, h, w.t(), out=z)
        if self.scale != 1.0:
            z.mul_(self.scale)
        if self.softcap is not None:
            z.div_(self.softcap).tanh_().mul_(self.softcap)
        if temperature != 1.0:
            z.div_(temperature)
        return z


def _unwrap(model):
    model = getattr(model, "_orig_mod", model)  # torch.compile
    if hasattr(model, "get_base_model"):  # PEFT
        model = model.get_base_model()
    return model


def _output_linear(model) -> nn.Linear:
    head = model.get_output_embeddings()
    if hasattr(head, "modules_to_save") and hasattr(head, "active_adapter"):  # PEFT copy
        active = head.active_adapter
        active = active[0] if isinstance(active, (list, tuple)) else active
        head = head.modules_to_save[active] if active in head.modules_to_save else head
    name = type(model).__name__
    if head is None or hasattr(head, "base_layer"):
        what = "no output embedding" if head is None else "an adapter on its output embedding"
        raise ConfigError(
            f"{name} has {what}; ict needs a plain LM head (merge the adapter or leave lm_head out of target_modules)"
        )
    if not isinstance(head, nn.Linear) or type(head).forward is not nn.Linear.forward:
        raise ConfigError(
            f"{name}'s output embedding is a {type(head).__name__} with its own forward, not a plain nn.Linear; ict cannot reproduce its logits from the weight"
        )
    return head


def _neutral(config, attr) -> bool:
    value = getattr(config, attr, None)
    if attr == "dim_model_base":  # MiniCPM's h / (hidden_size / dim_model_base)
        return value is None or value == getattr(config, "hidden_size", None)
    return value is None or value == 1


def logit_head(model) -> LogitHead:
    """The LogitHead of a Hugging Face causal LM (or a PEFT / compiled wrapper of one).

    Weight and bias are the model's own parameters (not copies, any dtype); scale and softcap are
    read from `model.config.get_text_config()` as TRANSFORMS says the model's forward applies them.
    Raises ConfigError for a model in UNSUPPORTED, or outside TRANSFORMS with a SUSPECT attribute set.
    """
    model = _unwrap(model)
    config = model.config
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    names = [cls.__name__ for cls in type(model).__mro__]
    name = names[0]
    refused = next((n for n in names if n in _REFUSED), None)
    if refused is not None:
        raise ConfigError(f"{name} is not supported: {_REFUSED[refused]}")
    head = _output_linear(model)
    weight, bias = head.weight, head.bias
    known = next((n for n in names if n in _BY_CLASS), None)
    if known is None:
        odd = {a: getattr(text, a) for a in SUSPECT if not _neutral(text, a)}
        if odd:
            shown = ", ".join(f"{a}={v!r}" for a, v in sorted(odd.items()))
            raise ConfigError(
                f"{name}'s config sets {shown}, a logit transform ict does not know for this model class; add it to ict.head.TRANSFORMS"
            )
        return LogitHead(weight, bias)
    scale, cap = 1.0, None
    for attr, op in _BY_CLASS[known]:
        value = getattr(text, attr, None)
        if value is None:
            continue
        if op in (HIDDEN_DIV, WIDTH) and bias is not None:
            raise ConfigError(f"{name} scales the hidden state before a biased LM head")
        if op == SOFTCAP:
            cap = float(value)
        elif op == VOCAB:
            if value < weight.shape[0]:
                weight, bias = weight[:value], None if bias is None else bias[:value]
        else:
            if cap is not None:
                raise ConfigError(f"{name}: a logit scale after the soft cap is not supported")
            if op == MUL:
                scale *= float(value)
            elif op == WIDTH:
                scale *= float(value) / float(text.hidden_size)
            else:  # DIV, HIDDEN_DIV
                scale /= float(value)
    return LogitHead(weight, bias, scale, cap)
