"""Offline tiny models and tokenizers for tests, examples and the `--quick` presets.

Nothing here touches the network: the tokenizer is a character-level `tokenizers` model built in
memory (printable ASCII plus newline, special tokens, and a chat template), and the model is a
randomly initialised Llama of a few tens of thousands of parameters.
"""

from __future__ import annotations

import string
from pathlib import Path

SPECIAL_TOKENS = ["<pad>", "<s>", "</s>", "<unk>", "<|system|>", "<|user|>", "<|assistant|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>{{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def tiny_tokenizer(vocab_size: int | None = None):
    """A character-level `PreTrainedTokenizerFast`: one token per printable ASCII character.

    Returns a tokenizer with pad/bos/eos/unk tokens, left padding and a chat template.
    vocab_size: pad the vocabulary with unused tokens `<tN>` up to this size (e.g. a paper-size
    vocabulary for benchmarks); text still encodes one token per character.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    chars = sorted(set(string.printable) - set("\t\r\x0b\x0c"))
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for ch in chars:
        vocab.setdefault(ch, len(vocab))
    for i in range(len(vocab), vocab_size or 0):
        vocab[f"<t{i}>"] = i
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    backend.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        additional_special_tokens=SPECIAL_TOKENS[4:],
        padding_side="left",
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def tiny_model_and_tokenizer(
    seed: int = 0,
    *,
    hidden_size: int = 32,
    num_layers: int = 2,
    num_heads: int = 4,
    intermediate_size: int = 64,
    max_positions: int = 512,
    tie_word_embeddings: bool = False,
):
    """A randomly initialised tiny `LlamaForCausalLM` and its character-level tokenizer (offline).

    The model's vocabulary matches the tokenizer; its generation config knows eos and pad.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = tiny_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=max(1, num_heads // 2),
        max_position_embeddings=max_positions,
        tie_word_embeddings=tie_word_embeddings,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.eval()
    return model, tokenizer


def save_tiny_model(directory: str | Path, seed: int = 0, **config) -> Path:
    """Write a tiny model and its tokenizer with `save_pretrained`, for tests that need a --model path."""
    model, tokenizer = tiny_model_and_tokenizer(seed, **config)
    directory = Path(directory)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


class TokenCounter:
    """Counts the token positions (rows x columns) a model's input embedding sees, over every
    forward while it is attached (tests and benchmarks: how often tokens run through a model).

    counter = TokenCounter(model); ...; counter.close(); counter.tokens"""

    def __init__(self, model):
        self.tokens = 0
        self.handle = model.get_input_embeddings().register_forward_hook(self._hook)

    def _hook(self, module, args, output):
        self.tokens += args[0].numel()

    def close(self) -> None:
        self.handle.remove()
