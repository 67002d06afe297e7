"""Bad input to the CLI fails at once, in one line naming the problem and the fix, before any
model loads: a mistyped local --model path, --report-to wandb without credentials, a YAML value
of the wrong type under a flag; negative numbers are read as flag values in both spellings."""

from __future__ import annotations

import os

import pytest

from ict.cli import join_negative_values, main


@pytest.fixture
def no_model_loads(monkeypatch):
    """Any model or tokenizer load (a hub id tried for a minute, a local one) fails the test."""
    import transformers

    def refuse(*args, **kwargs):
        raise AssertionError("a model or tokenizer was loaded")

    for cls in (transformers.AutoModelForCausalLM, transformers.AutoTokenizer):
        monkeypatch.setattr(cls, "from_pretrained", refuse)


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("error: ") and "Traceback" not in err[0]
    return err[0]


@pytest.mark.parametrize("model", ["runs/no-such-run", "./no-such-model", "models/mistyped"])
@pytest.mark.parametrize(
    "command",
    [
        ["train", "--max-steps", "1"],
        ["eval", "--limit", "1"],
        ["inspect", "--prompt", "1+1=", "--no-html"],
    ],
    ids=["train", "eval", "inspect"],
)
def test_a_missing_local_model_path_is_refused_at_once(
    command, model, tmp_path, monkeypatch, capsys, no_model_loads
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models").mkdir()  # `models/mistyped` names an existing parent: a local path
    assert main([*command, "--model", model]) == 2
    line = one_error_line(capsys)
    assert f"--model {model} does not exist" in line and "hub id" in line
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_hub_id_is_not_taken_for_a_path(tmp_path, monkeypatch):
    from ict.models import check_model_path

    monkeypatch.chdir(tmp_path)
    for name in ("Qwen/Qwen2.5-0.5B-Instruct", "gpt2", None, "smollm2-135m-instruct"):
        check_model_path(name)  # no error: tried as a hub id (or the embedded default) later


@pytest.fixture
def no_wandb_login(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    for name in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    netrc = tmp_path / "netrc"
    netrc.write_text("machine example.org login me password secret\n")
    os.chmod(netrc, 0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    return netrc


def test_wandb_without_credentials_is_refused_before_anything_loads(
    no_wandb_login, tmp_path, capsys, no_model_loads
):
    out = tmp_path / "run"
    assert main(["train", "--report-to", "wandb", "--output-dir", str(out)]) == 2
    line = one_error_line(capsys)
    assert "wandb login" in line and "--wandb-mode offline" in line
    assert not out.exists()  # no half-made run directory


def test_wandb_offline_or_logged_in_passes_the_check(no_wandb_login, monkeypatch):
    from ict.errors import ConfigError
    from ict.train.outputs import check_report_to

    with pytest.raises(ConfigError, match="no W&B credentials"):
        check_report_to("wandb")
    check_report_to("wandb", "offline")  # no login needed
    check_report_to("wandb", "disabled")
    monkeypatch.setenv("WANDB_MODE", "offline")
    check_report_to("wandb")
    monkeypatch.delenv("WANDB_MODE")
    no_wandb_login.write_text("machine api.wandb.ai login user password 0123456789abcdef\n")
    check_report_to("wandb")  # `wandb login` wrote the netrc entry
    no_wandb_login.write_text("")
    monkeypatch.setenv("WANDB_API_KEY", "0123456789abcdef")
    check_report_to("wandb")


def test_a_yaml_value_is_type_checked_under_a_flag(tmp_path, capsys, no_model_loads):
    path = tmp_path / "c.yaml"
    path.write_text("run:\n  max_steps: ten\n")
    assert main(["train", "--config", str(path), "--max-steps", "2"]) == 2
    line = one_error_line(capsys)
    assert "max_steps='ten'" in line and str(path) in line and "not a valid int" in line


@pytest.mark.parametrize(
    "argv",
    [["--learning-rate", "-1e-5"], ["--learning-rate=-1e-5"]],
    ids=["space", "equals"],
)
def test_a_negative_number_is_a_flag_value(argv, tmp_path, capsys, no_model_loads):
    """Both spellings reach the config as -1e-5 (which the config then refuses, in one line),
    instead of argparse's usage dump for an unknown option `-1e-5`."""
    assert main(["train", *argv, "--output-dir", str(tmp_path / "r")]) == 2
    line = one_error_line(capsys)
    assert "learning_rate must be a finite number >= 0, got -1e-05" in line


def test_negative_values_are_joined_to_their_flag_only():
    argv = ["train", "--learning-rate", "-1e-5", "--seed", "-3", "--x=-1", "--no-plots", "-h"]
    assert join_negative_values(argv) == [
        "train", "--learning-rate=-1e-5", "--seed=-3", "--x=-1", "--no-plots", "-h",
    ]  # fmt: skip
    assert join_negative_values(["--temperature", "-inf", "--", "-2"]) == [
        "--temperature=-inf", "--", "-2",
    ]  # fmt: skip


def test_an_unknown_config_name_lists_the_packaged_presets(
    tmp_path, capsys, no_model_loads, monkeypatch
):
    """`--config toy` (a comparison preset's name) is one line naming the packaged training
    presets and the command the comparison preset belongs to."""
    from ict.train.config import packaged_presets

    monkeypatch.chdir(tmp_path)  # no file named toy here
    assert "default" in packaged_presets()
    assert main(["train", "--config", "toy", "--max-steps", "1"]) == 2
    line = one_error_line(capsys)
    assert "packaged presets: default" in line and "ict compare --preset toy" in line
    assert main(["train", "--config", "no-such-preset", "--max-steps", "1"]) == 2
    line = one_error_line(capsys)
    assert "packaged presets: default" in line and "compare" not in line
