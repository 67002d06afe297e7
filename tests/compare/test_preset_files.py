"""The shipped presets are YAML package data (src/ict/configs/presets): every field of every
preset, built through the registry, equals what the Python definitions gave when they became
files, and the descriptions follow the values.

presets_recorded.json holds `dataclasses.asdict` of every preset (and of the paper's model sizes
and dry run) as main's Python presets built them at 37faf96..a4f990d (description and summary
left out: those are now generated), written by

    PYTHONPATH=<main>/src python - <<'EOF'   # a4f990d
    import dataclasses, json; from ict.compare.presets import PRESETS, get_preset
    print(json.dumps({n: dataclasses.asdict(get_preset(n)) for n in PRESETS}, indent=1))
    EOF

(the paper's entries likewise with model_size=... and dry_run=True, work_dir=WORK). A change of a
preset's values must change that file too, on purpose.
"""

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from ict.compare.presets import PRESET_DIR, PRESETS, get_preset, read_preset_file
from ict.compare.tuning import TuningSpec
from ict.errors import ConfigError

RECORDED = json.loads((Path(__file__).parent / "presets_recorded.json").read_text())


def _plain(preset) -> dict:
    """asdict of a Preset as JSON reads it back (tuples as lists), description left out."""
    values = json.loads(json.dumps(dataclasses.asdict(preset)))
    values.pop("description")
    return values


def _builds():
    for name, entry in PRESETS.items():
        yield name, {}
        if "model_size" in entry.options:
            for size in read_preset_file(name)["model_sizes"]:
                yield f"{name}+{size}", {"model_size": size}


@pytest.mark.parametrize(
    "key,options", list(_builds()), ids=lambda v: v if isinstance(v, str) else ""
)
def test_every_preset_equals_its_recorded_values(key, options):
    built = _plain(get_preset(key.split("+")[0], **options))
    recorded = RECORDED[key]
    assert sorted(built) == sorted(recorded)
    for field in recorded:  # field by field, so a failure names the field
        assert built[field] == recorded[field], field


def test_the_paper_dry_run_equals_its_recorded_values(tmp_path):
    built = _plain(get_preset("paper", dry_run=True, work_dir=tmp_path))
    assert built["train"]["model"] == str(tmp_path / "tiny-model")  # saved there
    assert Path(built["data_dir"], "gsm8k_train.jsonl").is_file()  # the shipped fixtures
    built["train"]["model"], built["data_dir"] = "WORK/tiny-model", "FIX"
    recorded = RECORDED["paper+dry"]
    for field in recorded:
        assert built[field] == recorded[field], field


def test_every_recorded_preset_is_shipped():
    names = {key.split("+")[0] for key in RECORDED}
    assert names == set(PRESETS) == {p.stem for p in PRESET_DIR.glob("*.yaml")}


def test_toy_cot_long_is_the_declared_study():
    """docs/reports/toy-cot-long-tuned/PROTOCOL.md's arms, seeds, endpoints and tuning rule."""
    preset = get_preset("toy-cot-long")
    assert preset.methods == ["grpo", "ict", "random_sequence", "entropy", "kl_cov"]
    assert preset.seeds == 20
    assert preset.primary == ["ict-grpo@pass@4", "ict-random_sequence@pass@1"]
    assert (preset.alpha, preset.equivalence_margin) == (0.05, 0.03)
    assert preset.tuning == TuningSpec(
        values=(2e-5, 6.3e-5, 2e-4), seeds=(1000, 1001), metric=(1, 4), tie_margin=0.02,
        grow=1, validation_samples=16,
    )  # fmt: skip
    assert preset.train["max_steps"] == 150 and preset.train["learning_rate"] == 2e-4
    assert preset.warm == get_preset("toy-cot").warm  # the toy-cot warm start, shared


def test_descriptions_follow_the_values():
    preset = get_preset("toy-cot-long")
    text = preset.description
    for words in (
        "150 RL steps of 4 prompts x 8 samples", "methods grpo, ict, random_sequence, entropy, "
        "kl_cov; 20 seeds", "n = 64", "ict-grpo@pass@4", "2e-05, 6.3e-05, 0.0002",
        "tuning seeds 1000, 1001", "3-layer 128-wide",
    ):  # fmt: skip
        assert words in text, words
    quick = get_preset("quick")
    assert "10 RL steps" in quick.description and "2 seeds" in quick.description
    assert "tuned" in PRESETS["toy-cot-long"].summary and "tuned" not in PRESETS["toy"].summary


def test_a_file_extends_another_key_by_key():
    quick, toy = read_preset_file("quick"), read_preset_file("toy")
    assert quick["train"]["max_steps"] == 10 and quick["seeds"] == 2
    assert quick["warm"] == toy["warm"]  # inherited whole
    assert {k: v for k, v in quick["train"].items() if k not in yaml.safe_load(
        (PRESET_DIR / "quick.yaml").read_text())["train"]} == {
        k: v for k, v in toy["train"].items() if k not in ("max_steps", "save_every",
        "log_samples_every", "dense_warmup_steps")}  # fmt: skip


def test_unknown_keys_and_sizes_say_so(tmp_path, monkeypatch):
    from ict.compare import presets

    with pytest.raises(ConfigError, match="unknown paper model size '3b'"):
        get_preset("paper", model_size="3b")
    monkeypatch.setattr(presets, "PRESET_DIR", tmp_path)
    (tmp_path / "bad.yaml").write_text("methods: [grpo]\nsteps: 3\n")
    with pytest.raises(ConfigError, match=r"unknown keys \['steps'\]"):
        presets.build_shipped("bad")
    with pytest.raises(ConfigError, match="no preset file"):
        presets.read_preset_file("absent")
