"""The supervised warm start's tokenizer renders prompts raw, as the model was trained on them."""

from ict.compare.presets import WarmStart
from ict.compare.warm_start import load_warm_start, new_warm_model
from ict.models import format_prompt
from ict.testing import CHAT_TEMPLATE


def test_warm_start_tokenizer_has_no_chat_template_even_from_an_old_cache(tmp_path):
    model, tokenizer = new_warm_model(
        WarmStart(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32), 64
    )
    assert tokenizer.chat_template is None
    assert format_prompt(tokenizer, [{"role": "user", "content": "Q:1+2\nA:"}]) == "Q:1+2\nA:"
    # a cache written before the fix kept the test tokenizer's template: loading removes it
    tokenizer.chat_template = CHAT_TEMPLATE
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    (tmp_path / "info.json").write_text("{}")
    _, loaded, _ = load_warm_start(tmp_path)
    assert loaded.chat_template is None
    _, again, _ = load_warm_start(tmp_path)  # the saved files were fixed too
    assert again.chat_template is None


def test_a_warm_start_trains_on_the_device_asked_and_records_it(tmp_path, monkeypatch):
    from ict.compare.warm_start import warm_start

    monkeypatch.setenv("ICT_CACHE", str(tmp_path))
    warm = WarmStart(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32,
                     max_steps=2, check_every=1, batch_size=4)  # fmt: skip
    model, _, info = warm_start("toy:add?max_a=9&max_b=9", warm, device="cpu")
    assert info["device"] == "cpu" and next(model.parameters()).device.type == "cpu"
    assert load_warm_start(tmp_path / "toy" / info["path"].split("/")[-1])[2]["device"] == "cpu"
