"""The preset registry: every registered preset builds, and the CLI lists and accepts them."""

import pytest

from ict.cli import main
from ict.compare import presets
from ict.compare.presets import PRESETS, EvalSpec, Preset, get_preset, register_preset
from ict.errors import ConfigError


def test_every_registered_preset_builds_valid_cells():
    from ict.train import TrainConfig

    assert list(PRESETS) == [
        "toy", "toy-cot", "toy-cot-long", "toy-cot-explore", "toy-paths-screen", "quick",
        "smollm", "smollm-cot", "paper",
    ]  # fmt: skip
    for name, entry in PRESETS.items():
        preset = get_preset(name)
        assert entry.summary and preset.methods and preset.seeds >= 1
        TrainConfig(**preset.cell_train(preset.methods[0]))  # validates the settings
        # a fresh preset: changing one leaves the registry's next build alone
        preset.train.setdefault("task_config", {})["x"] = 1
        assert "x" not in get_preset(name).train.get("task_config", {})
    assert PRESETS["paper"].options == ("model_size", "dry_run", "work_dir")
    assert get_preset("toy").task == "toy:add" and get_preset("toy-cot").task == "toy:cot"
    with pytest.raises(
        ConfigError,
        match="choose one of toy, toy-cot, toy-cot-long, toy-cot-explore, toy-paths-screen, quick",
    ):
        get_preset("huge")
    with pytest.raises(ConfigError, match="takes only model_size"):
        get_preset("paper", steps=3)


def test_the_cli_lists_and_runs_what_the_registry_holds(monkeypatch, capsys):
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    help_text = capsys.readouterr().out
    for name, entry in PRESETS.items():
        assert f"  {name} " in help_text and entry.summary in help_text

    monkeypatch.setitem(PRESETS, "mine", PRESETS["toy"])  # a registered preset is a CLI choice
    register_preset("mine", "my preset")(lambda: Preset("mine", "", {}, EvalSpec()))
    assert get_preset("mine").name == "mine"
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    assert "  mine " in capsys.readouterr().out
    monkeypatch.setattr(
        presets, "get_preset", lambda name: (_ for _ in ()).throw(RuntimeError(name))
    )
    with pytest.raises(RuntimeError, match="mine"):
        main(["compare", "--preset", "mine"])
    assert main(["compare", "--preset", "toy", "--dry-run"]) == 2
    assert "--dry-run belongs to --preset paper" in capsys.readouterr().err
