import pytest

from ict.errors import ModelLoadError
from ict.models import (
    ensure_pad_token,
    format_prompt,
    load_model_and_tokenizer,
    resolve_checkpoint_dir,
)
from ict.testing import tiny_model_and_tokenizer, tiny_tokenizer


def test_loads_saved_directory_and_run_directory(tmp_path):
    from ict.train.checkpoint import save_checkpoint

    model, tok = tiny_model_and_tokenizer(seed=0)
    ckpt = save_checkpoint(tmp_path / "run", 2, model, tok, {})  # as `ict train` writes it
    assert resolve_checkpoint_dir(tmp_path / "run") == ckpt
    (ckpt / "trainer_state.pt").unlink()  # an incomplete checkpoint is no checkpoint
    assert resolve_checkpoint_dir(tmp_path / "run") is None
    save_checkpoint(tmp_path / "run", 2, model, tok, {})
    for source in (ckpt, tmp_path / "run"):
        model, tok = load_model_and_tokenizer(source)
        assert model.config.vocab_size == len(tok)
        assert tok.padding_side == "left" and tok.pad_token == "<pad>"
        assert not model.training


def test_clear_errors_for_bad_paths(tmp_path):
    with pytest.raises(ModelLoadError, match="does not exist"):
        load_model_and_tokenizer(str(tmp_path / "missing" / "model"))
    with pytest.raises(ModelLoadError, match="neither a model directory"):
        load_model_and_tokenizer(tmp_path)


def test_pad_token_falls_back_to_eos():
    tok = tiny_tokenizer()
    tok.pad_token = None
    ensure_pad_token(tok)
    assert tok.pad_token == tok.eos_token


def test_format_prompt_uses_chat_template_or_raw_text():
    tok = tiny_tokenizer()
    assert format_prompt(tok, "hi") == "<|user|>hi\n<|assistant|>"
    assert (
        format_prompt(tok, "hi", system="be brief")
        == "<|system|>be brief\n<|user|>hi\n<|assistant|>"
    )
    tok.chat_template = None
    assert format_prompt(tok, "hi") == "hi"


@pytest.mark.slow
def test_embedded_default_loads():
    pytest.importorskip("gguf")
    model, tok = load_model_and_tokenizer(None)
    assert model.config.vocab_size == 49152 and tok.chat_template


def test_model_label_names_what_was_trained():
    from types import SimpleNamespace

    from ict.models import EMBEDDED_MODEL_LABEL, model_label

    assert model_label("Qwen/Qwen2.5-0.5B-Instruct") == "Qwen/Qwen2.5-0.5B-Instruct"
    assert model_label(None) == EMBEDDED_MODEL_LABEL
    # a model passed in memory (a grid's warm start) is not the embedded default
    warm = SimpleNamespace(config=SimpleNamespace(_name_or_path="/cache/toy-cot/abc"))
    assert model_label(None, warm) == "in-memory SimpleNamespace from /cache/toy-cot/abc"
