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


def test_a_gguf_model_becomes_an_ordinary_trainable_model():
    """The embedded model's de-quantised GGUF state (a GGUF quantizer left on a float model) is
    removed: transformers' own training check (what its Trainer, and so TRL's GRPOTrainer, runs
    first) refuses the model before and accepts it after, and nothing of the quantizer is left."""
    from transformers.quantizers.quantizer_gguf import GgufHfQuantizer
    from transformers.trainer_utils import validate_quantization_for_training
    from transformers.utils.quantization_config import GgufConfig

    from ict.models import drop_gguf_marker

    model, _ = tiny_model_and_tokenizer(seed=0)
    quantizer = GgufHfQuantizer(GgufConfig(), pre_quantized=True)
    model.hf_quantizer = quantizer  # the state from_pretrained leaves on a GGUF model

    model.is_quantized = True
    model.quantization_method = quantizer.quantization_config.quant_method
    model.config.quantization_config = quantizer.quantization_config
    with pytest.raises(ValueError, match="purely quantized"):
        validate_quantization_for_training(model)
    drop_gguf_marker(model)
    validate_quantization_for_training(model)
    assert model.is_quantized is False and getattr(model, "hf_quantizer", None) is None
    assert not hasattr(model, "quantization_method")
    assert not hasattr(model.config, "quantization_config")


@pytest.mark.slow
def test_the_embedded_model_trains_in_transformers(tmp_path):
    """The embedded SmolLM2 as loaded (not a stand-in): no quantizer state; transformers accepts
    it for training, and save_embedded writes a directory that loads back as the same model."""
    pytest.importorskip("gguf")
    import torch
    from transformers.trainer_utils import validate_quantization_for_training

    from ict.models import save_embedded

    model, _ = load_model_and_tokenizer(None)
    assert not model.is_quantized and getattr(model, "hf_quantizer", None) is None
    validate_quantization_for_training(model)
    saved, tok = load_model_and_tokenizer(save_embedded(tmp_path / "smollm2"))
    assert tok.chat_template and not getattr(saved, "is_quantized", False)
    before, after = model.state_dict(), saved.state_dict()
    assert before.keys() == after.keys()
    for name, value in before.items():
        assert torch.equal(value, after[name]), name


def test_check_model_path_rules(tmp_path, monkeypatch):
    from ict.models import check_model_path

    monkeypatch.chdir(tmp_path)
    (tmp_path / "models").mkdir()
    for missing in ("runs/x", "./x", "../x", "/no/such/dir", "models/x", "a/b/c", "~/no-such-x"):
        with pytest.raises(ModelLoadError, match="does not exist"):
            check_model_path(missing)
    for fine in (None, "default-org/some-model", "gpt2", "smollm2-135m-instruct", "models"):
        check_model_path(fine)
