"""ict.eval.backends.on_device: evaluations sample with a copy of the model on another device."""

import torch

from ict.eval.backends import on_device


class _Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Linear(2, 2)


def test_a_model_elsewhere_is_copied_to_the_device_and_left_where_it_was():
    seen = {}

    def inner(model, tokenizer, settings):
        seen["model"] = model
        return "sampler"

    model = _Tiny()
    assert on_device("meta", inner)(model, "tok", None) == "sampler"
    assert seen["model"] is not model and seen["model"].w.weight.device.type == "meta"
    assert model.w.weight.device.type == "cpu"  # the trained model stays put


def test_a_model_already_there_is_used_as_it_is():
    seen = {}
    model = _Tiny()
    on_device("cpu", lambda m, t, s: seen.setdefault("model", m))(model, "tok", None)
    assert seen["model"] is model
