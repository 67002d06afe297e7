"""Offline stand-ins for the Hub models and datasets that TRL's GRPO tests load.

Nothing here touches the network. Models are tiny, randomly initialised, with the architecture
(transformers class and the config sizes of TRL's own `scripts/generate_tiny_models/*` scripts) of
the `trl-internal-testing/*` model they stand in for, saved in bfloat16 like the originals. They are
written as a Hugging Face hub cache (`<cache>/hf/hub/models--org--name/snapshots/<rev>/`), so with
`HF_HOME=<cache>/hf` and `HF_HUB_OFFLINE=1` every `from_pretrained` (AutoConfig, AutoTokenizer,
AutoModel*, GenerationConfig, trust_remote_code) resolves the ids without any patching.

Tokenizers are byte-level BPE `tokenizers` models whose merges are learnt (BpeTrainer) from the
stand-in datasets' strings and the chat templates' fixed text, so prompts have about their real
length in tokens (the LM-head work of TRL's loss grows with the whole sequence), padded with
filler tokens up to the original vocabulary size, with the original special tokens at their ids (e.g. Qwen2.5: <|endoftext|> = 151643 = pad, <|im_end|> = 151645 =
eos), and a chat template of the same shape (ChatML, Qwen3 with `enable_thinking`, Llama 3).
A tiny random model with a ~150k vocabulary almost never samples eos within 8 tokens, as the real
tiny models, which some tests rely on.

Datasets: TRL's own `scripts/generate_zen_dataset.py` (exported from the TRL source at run time)
is executed with `DatasetDict.push_to_hub` redirected to parquet files under
`<cache>/datasets/<repo id>/<config>/<split>.parquet`; the pytest plugin maps `load_dataset` onto them.

Ids without a stand-in (vision-language models and processors, Qwen/Qwen2.5-0.5B-Instruct,
SmolVLM, hub kernels) are listed in `MISSING`; the tests that need them are skipped by the plugin.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from pathlib import Path

BUILD_VERSION = "3"  # bump to rebuild existing caches
REVISION = "0" * 39 + "1"  # the fake commit every stand-in lives at
ORG = "trl-internal-testing"

# Vision-language models, processors and the large models of the vLLM / GPU tests: no stand-in.
MISSING = {
    f"{ORG}/tiny-Gemma3ForConditionalGeneration",
    f"{ORG}/tiny-Gemma4ForConditionalGeneration",
    f"{ORG}/tiny-LlavaForConditionalGeneration",
    f"{ORG}/tiny-LlavaNextForConditionalGeneration",
    f"{ORG}/tiny-Qwen2VLForConditionalGeneration",
    f"{ORG}/tiny-Qwen2_5_VLForConditionalGeneration",
    f"{ORG}/tiny-Qwen3_5ForConditionalGeneration-NoThink",
    f"{ORG}/tiny-Qwen3_5MoeForConditionalGeneration-3.6",
    f"{ORG}/tiny-SmolVLMForConditionalGeneration",
    f"{ORG}/zen-image",
    f"{ORG}/zen-multi-image",
    "Qwen/Qwen2.5-0.5B-Instruct",
    "HuggingFaceTB/SmolVLM-Instruct",
    "kernels-community/flash-attn2",
}

# ---------------------------------------------------------------------------------------------
# tokenizers

CHATML = (
    "{%- for message in messages %}"
    "{%- if loop.first and message['role'] != 'system' and add_default_system %}"
    "{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}"
)
QWEN25_TEMPLATE = "{%- set add_default_system = true %}" + CHATML
QWEN3_TEMPLATE = "{%- set add_default_system = false %}" + CHATML
LLAMA3_TEMPLATE = (
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] + '<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)

_QWEN25_SPECIALS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
    "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
    "<|repo_name|>", "<|file_sep|>",
]  # fmt: skip
_QWEN3_EXTRA = ["<tool_response>", "</tool_response>", "<think>", "</think>"]
_LLAMA3_NAMED = {
    128000: "<|begin_of_text|>", 128001: "<|end_of_text|>", 128004: "<|finetune_right_pad_id|>",
    128006: "<|start_header_id|>", 128007: "<|end_header_id|>", 128008: "<|eom_id|>",
    128009: "<|eot_id|>", 128010: "<|python_tag|>",
}  # fmt: skip

# family -> (vocab size, {id: special token}, roles, chat template)
FAMILIES = {
    # Qwen2.5 (len(tokenizer.vocab) = 151665): eos <|im_end|>, pad <|endoftext|>, no bos
    "qwen2.5": (
        151665,
        {151643 + i: t for i, t in enumerate(_QWEN25_SPECIALS)},
        {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
        QWEN25_TEMPLATE,
    ),
    # Qwen3 (151669): Qwen2.5's specials + tool_response / think
    "qwen3": (
        151669,
        {151643 + i: t for i, t in enumerate(_QWEN25_SPECIALS + _QWEN3_EXTRA)},
        {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
        QWEN3_TEMPLATE,
    ),
    # Llama 3.2 Instruct (128256): bos <|begin_of_text|>, eos <|eot_id|>, no pad
    "llama3": (
        128256,
        {
            i: _LLAMA3_NAMED.get(i, f"<|reserved_special_token_{i - 128000}|>")
            for i in range(128000, 128256)
        },
        {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
        LLAMA3_TEMPLATE,
    ),
    # the other architectures (Cohere2, GLM-4.5 MoE, GPT-OSS, Nemotron-H, Gemma 2): a smaller
    # ChatML vocabulary (the architecture is what those tests exercise)
    "small": (
        8192,
        {8192 - 3: "<|endoftext|>", 8192 - 2: "<|im_start|>", 8192 - 1: "<|im_end|>"},
        {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
        QWEN3_TEMPLATE,
    ),
}


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table (the byte-level BPE alphabet, in id order)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs), strict=True))


# tokenizer_config.json "tokenizer_class" of the originals
TOKENIZER_CLASS = {"qwen2.5": "Qwen2Tokenizer", "qwen3": "Qwen2Tokenizer"}


# Text the stand-in tokenizers learn their merges from (with the zen datasets' strings): the chat
# templates' fixed parts, so that prompts have about the length the real tokenizers give them.
TEMPLATE_TEXT = [
    "system\nYou are a helpful assistant.", "user\n", "assistant\n", "\n\n",
    "<think>\n\n</think>\n\n",
]  # fmt: skip
N_MERGES = 2000


def train_merges(corpus: list[str]) -> list[tuple[str, str]]:
    """Byte-level BPE merges learnt by `tokenizers`' BpeTrainer on `corpus` (deterministic)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(
        vocab_size=256 + N_MERGES, min_frequency=1, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )  # fmt: skip
    tok.train_from_iterator(sorted(set(corpus)), trainer)
    merges = json.loads(tok.to_str())["model"]["merges"]
    return [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in merges]


def build_tokenizer(family: str, merges: list[tuple[str, str]] = ()):
    """A byte-level BPE PreTrainedTokenizerFast: ids 0-255 the bytes in GPT-2 byte order (as
    Qwen's), then the tokens of `merges` (see `train_merges`), filler tokens `<tN>` up to
    `family`'s vocabulary size, the special tokens at their ids, the special-token roles and
    chat template. Left padding."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    size, specials, roles, template = FAMILIES[family]
    first_special = min(specials)
    vocab = {}
    for ch in _bytes_to_unicode().values():
        vocab[ch] = len(vocab)
    kept = []
    for a, b in merges:
        if len(vocab) >= first_special:
            break
        if a in vocab and b in vocab and a + b not in vocab:
            vocab[a + b] = len(vocab)
            kept.append((a, b))
    for i in range(len(vocab), size):
        vocab[specials.get(i, f"<t{i}>")] = i
    assert sorted(vocab.values()) == list(range(size)), family
    backend = Tokenizer(models.BPE(vocab=vocab, merges=kept))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t in specials.values()]
    )
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, padding_side="left", **roles)
    tokenizer.chat_template = template
    tokenizer.model_max_length = 32768
    return tokenizer


def dataset_strings(datasets: dict) -> list[str]:
    """Every string in the stand-in dataset files (prompts, completions, message contents)."""
    import pyarrow.parquet as pq

    out: list[str] = []

    def walk(x):
        if isinstance(x, str):
            out.append(x)
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    for configs in datasets.values():
        for splits in configs.values():
            for path in splits.values():
                walk(pq.read_table(path).to_pylist())
    return out


def save_tokenizer(tokenizer, family: str, directory: Path) -> None:
    tokenizer.save_pretrained(directory)
    if family in TOKENIZER_CLASS:
        path = Path(directory) / "tokenizer_config.json"
        config = json.loads(path.read_text())
        config["tokenizer_class"] = TOKENIZER_CLASS[family]
        path.write_text(json.dumps(config, indent=2))


# ---------------------------------------------------------------------------------------------
# models: (model id suffix) -> (class name, tokenizer family, config kwargs). Sizes follow TRL's
# scripts/generate_tiny_models/*; vocabulary and special ids follow the stand-in tokenizer.


def _ids(family: str) -> dict:
    tok_specials = {v: k for k, v in FAMILIES[family][1].items()}
    roles = FAMILIES[family][2]
    out = {f"{r[:-6]}_token_id": tok_specials[t] for r, t in roles.items()}
    return out


_SMALL = dict(hidden_size=8, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2,
              intermediate_size=32)  # fmt: skip

MODELS = {
    "tiny-Qwen2ForCausalLM-2.5": ("Qwen2ForCausalLM", "qwen2.5", dict(_SMALL)),
    "tiny-Qwen2ForSequenceClassification-2.5": (
        "Qwen2ForSequenceClassification", "qwen2.5", dict(_SMALL, hidden_size=16, num_labels=1),
    ),
    "tiny-Qwen3ForCausalLM": ("Qwen3ForCausalLM", "qwen3", dict(_SMALL)),
    "tiny-Qwen3ForSequenceClassification": (
        "Qwen3ForSequenceClassification", "qwen3", dict(_SMALL, hidden_size=16, num_labels=1),
    ),
    "tiny-Qwen3MoeForCausalLM": (
        "Qwen3MoeForCausalLM", "qwen3",
        dict(_SMALL, num_experts=4, num_experts_per_tok=2, norm_topk_prob=True, head_dim=128,
             moe_intermediate_size=32),
    ),
    "tiny-LlamaForSequenceClassification-3.2": (
        "LlamaForSequenceClassification", "llama3", dict(_SMALL, hidden_size=16, num_labels=1),
    ),
    "tiny-LlamaForCausalLM-3.2": ("LlamaForCausalLM", "llama3", dict(_SMALL)),
    "tiny-MistralForCausalLM-0.2": ("MistralForCausalLM", "small", dict(_SMALL)),
    "tiny-Cohere2ForCausalLM": (
        "Cohere2ForCausalLM", "small", dict(_SMALL, logit_scale=1.0, tie_word_embeddings=True),
    ),
    "tiny-Glm4MoeForCausalLM": (
        "Glm4MoeForCausalLM", "small",
        dict(_SMALL, moe_intermediate_size=32, head_dim=2, n_routed_experts=4,
             num_experts_per_tok=2, attention_bias=True, routed_scaling_factor=2.5,
             use_qk_norm=True, first_k_dense_replace=1),
    ),
    "tiny-GptOssForCausalLM": (
        "GptOssForCausalLM", "small", dict(_SMALL, num_local_experts=4, num_experts_per_tok=2),
    ),
    "tiny-NemotronHForCausalLM-nano": (
        "NemotronHForCausalLM", "small",
        dict(hidden_size=16, num_attention_heads=4, num_key_value_heads=2, intermediate_size=32,
             layers_block_type=["mamba", "attention", "moe"], mamba_num_heads=8, mamba_head_dim=4,
             mamba_n_groups=1, ssm_state_size=16, mamba_d_conv=4, mamba_expand=2,
             n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
             moe_shared_expert_intermediate_size=32, use_mamba_kernels=False),
    ),
    "tiny-Gemma2ForCausalLM": ("Gemma2ForCausalLM", "small", dict(_SMALL)),
}  # fmt: skip

# generation_config.json of the originals (Qwen2.5 / Qwen3 Instruct); others: ids only
_GEN = {
    "qwen2.5": dict(do_sample=True, temperature=0.7, top_p=0.8, top_k=20, repetition_penalty=1.05,
                    bos_token_id=151643, eos_token_id=[151645, 151643], pad_token_id=151643),
    "qwen3": dict(do_sample=True, temperature=0.6, top_p=0.95, top_k=20,
                  bos_token_id=151643, eos_token_id=[151645, 151643], pad_token_id=151643),
}  # fmt: skip


def _load_file_module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _init_weights(model, trl_src: Path | None):
    """TRL's `init_weights_tiny_model` (scripts/generate_tiny_models/_common.py of the exported
    source) when it imports offline, else the same scheme (Xavier linear, N(0, 0.02) embeddings)."""
    common = None if trl_src is None else trl_src / "scripts/generate_tiny_models/_common.py"
    if common is not None and common.exists():
        try:
            _load_file_module("_trl_tiny_common", common).init_weights_tiny_model(model)
            return "trl"
        except Exception:  # noqa: BLE001 - fall back to the same scheme
            pass
    from torch import nn

    for module in model.modules():
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
    return "local"


def _snapshot(hub: Path, repo_id: str, kind: str = "models") -> Path:
    repo_dir = hub / f"{kind}--{repo_id.replace('/', '--')}"
    snap = repo_dir / "snapshots" / REVISION
    snap.mkdir(parents=True, exist_ok=True)
    (repo_dir / "refs").mkdir(exist_ok=True)
    (repo_dir / "refs" / "main").write_text(REVISION)
    return snap


def _build_model(name: str, spec, hub: Path, trl_src: Path | None, seed: int, merges=()):
    import torch
    import transformers
    from transformers import GenerationConfig

    cls_name, family, kwargs = spec
    tokenizer = build_tokenizer(family, merges)
    model_cls = getattr(transformers, cls_name)
    config_cls = model_cls.config_class
    ids = _ids(family)
    config = config_cls(vocab_size=FAMILIES[family][0], **ids, **kwargs)
    if "pad_token_id" not in ids and "pad_token_id" in config_cls().to_dict():
        config.pad_token_id = None
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = model_cls(config)
        _init_weights(model, trl_src)
    model = model.to(torch.bfloat16)
    if cls_name == "NemotronHForCausalLM":  # the upstream keeps the Mamba A_log / D in fp32
        for i, block in enumerate(config.layers_block_type):
            if block == "mamba":
                mixer = (
                    model.model.layers[i].mixer
                    if hasattr(model, "model")
                    else model.backbone.layers[i].mixer
                )
                mixer.A_log.data = mixer.A_log.data.float()
                mixer.D.data = mixer.D.data.float()
    snap = _snapshot(hub, f"{ORG}/{name}")
    model.save_pretrained(snap)
    save_tokenizer(tokenizer, family, snap)
    gen = _GEN.get(family, {k: v for k, v in ids.items()})
    GenerationConfig(**gen).save_pretrained(snap)


def _build_remote(hub: Path, trl_src: Path, seed: int, merges=()):
    """tiny-RemoteForCausalLM: TRL's own `_remote_code` classes (exported source), saved with
    register_for_auto_class so that the snapshot carries the code (loadable only with
    trust_remote_code=True), Llama 3 tokenizer."""
    import torch
    from transformers import GenerationConfig

    code_parent = trl_src / "scripts/generate_tiny_models/for_causal_lm"
    sys.path.insert(0, str(code_parent))
    try:
        conf_mod = importlib.import_module("_remote_code.configuration_remote")
        model_mod = importlib.import_module("_remote_code.modeling_remote")
    finally:
        sys.path.remove(str(code_parent))
    conf_mod.RemoteConfig.register_for_auto_class()
    model_mod.RemoteModel.register_for_auto_class("AutoModel")
    model_mod.RemoteForCausalLM.register_for_auto_class("AutoModelForCausalLM")
    model_mod.RemoteForSequenceClassification.register_for_auto_class(
        "AutoModelForSequenceClassification"
    )
    ids = _ids("llama3")
    config = conf_mod.RemoteConfig(vocab_size=FAMILIES["llama3"][0], **ids, **_SMALL)
    config.auto_map = {
        "AutoModel": "modeling_remote.RemoteModel",
        "AutoModelForSequenceClassification": "modeling_remote.RemoteForSequenceClassification",
    }
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = model_mod.RemoteForCausalLM(config)
        _init_weights(model, trl_src)
    model = model.to(torch.bfloat16)
    snap = _snapshot(hub, f"{ORG}/tiny-RemoteForCausalLM")
    model.save_pretrained(snap)
    save_tokenizer(build_tokenizer("llama3", merges), "llama3", snap)
    GenerationConfig(**ids).save_pretrained(snap)


def build_datasets(out: Path, trl_src: Path) -> dict:
    """Run TRL's scripts/generate_zen_dataset.py with push_to_hub redirected to parquet files.
    Returns {repo_id: {config: {split: path}}}."""
    from datasets import DatasetDict

    script = trl_src / "scripts/generate_zen_dataset.py"
    module = _load_file_module("_trl_generate_zen_dataset", script)
    written: dict = {}
    original = DatasetDict.push_to_hub

    def to_parquet(self, repo_id, config_name="default", **_):
        for split, ds in self.items():
            path = out / repo_id / config_name / f"{split}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            ds.to_parquet(str(path))
            written.setdefault(repo_id, {}).setdefault(config_name, {})[split] = str(path)

    DatasetDict.push_to_hub = to_parquet
    try:
        module.main(test_size=0.1, push_to_hub=True, repo_id=f"{ORG}/zen")
    finally:
        DatasetDict.push_to_hub = original
    return written


def build_all(cache: Path, trl_src: Path, *, force: bool = False, log=print) -> dict:
    """Build every stand-in into `cache` (skipped when a matching stamp exists). Returns the
    manifest {"models": [...], "datasets": {...}, "missing": [...]} also written to
    `<cache>/standins.json`."""
    cache = Path(cache)
    manifest_path = cache / "standins.json"
    stamp = {"build_version": BUILD_VERSION, "trl_src": str(trl_src)}
    if manifest_path.exists() and not force:
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("stamp") == stamp:
            return manifest
    hub = cache / "hf" / "hub"
    log("  stand-in datasets: TRL's scripts/generate_zen_dataset.py -> parquet")
    datasets = build_datasets(cache / "datasets", trl_src)
    merges = train_merges(dataset_strings(datasets) + TEMPLATE_TEXT)
    log(f"  stand-in tokenizers: byte-level BPE, {len(merges)} merges learnt from the datasets")
    models = []
    for seed, (name, spec) in enumerate(MODELS.items()):
        log(f"  stand-in model {ORG}/{name} ({spec[0]}, tokenizer {spec[1]})")
        _build_model(name, spec, hub, trl_src, seed, merges)
        models.append(f"{ORG}/{name}")
    log(f"  stand-in model {ORG}/tiny-RemoteForCausalLM (TRL's _remote_code, trust_remote_code)")
    _build_remote(hub, trl_src, len(MODELS), merges)
    models.append(f"{ORG}/tiny-RemoteForCausalLM")
    manifest = {"stamp": stamp, "models": models, "datasets": datasets, "missing": sorted(MISSING)}
    manifest_path.write_text(json.dumps(manifest, indent=1))
    return manifest
