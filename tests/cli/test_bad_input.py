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


# ---- YAML-valued flags (issue 50) ------------------------------------------------------------
@pytest.mark.parametrize(
    "flag, value, column, kind",
    [
        ("--task-config", "{min_terms: [}", 14, "mapping"),
        ("--selector-options", "{prob_below: 0.02", 18, "mapping"),
        ("--stop", '["</answer>", ', 15, "list"),
    ],
)
def test_a_malformed_yaml_flag_is_one_line_with_the_position_and_an_example(
    flag, value, column, kind, tmp_path, capsys, no_model_loads
):
    from ict.train.config import YAML_EXAMPLES, parse_yaml_value

    assert main(["train", flag, value, "--output-dir", str(tmp_path / "r")]) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"error: {flag} {value!r} is not valid YAML")
    assert f"at column {column})" in line
    example = YAML_EXAMPLES[flag[2:].replace("-", "_")]
    assert line.endswith(f"pass a YAML {kind} such as {flag} {example}")
    import yaml

    parsed = yaml.safe_load(example.strip("'"))  # the example itself is valid input
    assert isinstance(parsed, list if kind == "list" else dict)
    assert parse_yaml_value(flag[2:].replace("-", "_"), example.strip("'")) == parsed


def test_a_yaml_error_on_a_later_line_names_line_and_column():
    from ict.errors import ConfigError
    from ict.train.config import parse_yaml_value

    with pytest.raises(ConfigError, match=r"at line 2, column 6\)"):
        parse_yaml_value("task_config", "{a: 1,\n b: [}", source="--config / flags")


# ---- unwritable output locations (issue 50) --------------------------------------------------
@pytest.fixture
def read_only(tmp_path, monkeypatch):
    """A directory on which creating a file fails as on a read-only file system (EROFS): the
    directory is made read-only, and, since root writes there anyway, file creation under it is
    refused with the error a read-only mount gives."""
    import errno

    import ict.files

    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o555)
    real_open = os.open

    def refusing_open(path, flags, *args, **kwargs):
        if str(path).startswith(str(ro)) and flags & os.O_CREAT:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(ict.files.os, "open", refusing_open)
    yield ro
    monkeypatch.undo()
    os.chmod(ro, 0o755)


def _unwritable_commands(ro, tmp_path):
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    (run / "samples.jsonl").write_text('{"step": 1, "tokens": ["a"]}\n')
    return {
        "train": (["train", "--output-dir", str(ro / "run")], "--output-dir"),
        "train-resume": (["train", "--resume", str(ro)], "--resume"),
        "eval": (["eval", "--limit", "1", "--out", str(ro / "eval")], "--out"),
        "compare": (["compare", "--quick", "--out", str(ro / "grid")], "--out"),
        "compare-runs": (["compare", "--runs", str(run), "--out", str(ro / "r")], "--out"),
        "inspect-model": (
            ["inspect", "--model", "default", "--prompt", "1+1=", "--html", str(ro / "m.html")],
            "--html",
        ),
        "inspect-run": (["inspect", str(run), "--html", str(ro / "t.html")], "--html"),
    }


@pytest.mark.parametrize(
    "name",
    ["train", "train-resume", "eval", "compare", "compare-runs", "inspect-model", "inspect-run"],
)
def test_a_read_only_output_location_fails_in_one_line_before_the_model_loads(
    name, read_only, tmp_path, monkeypatch, capsys, no_model_loads
):
    import ict.compare.grid

    def no_grid(*args, **kwargs):
        raise AssertionError("the grid started")

    monkeypatch.setattr(ict.compare.grid, "run_grid", no_grid)
    argv, flag = _unwritable_commands(read_only, tmp_path)[name]
    assert main(argv) == 2
    line = one_error_line(capsys)
    assert f"error: {flag} {read_only}" in line and "Read-only file system" in line
    assert f"pass a writable {flag}" in line
    assert list(read_only.iterdir()) == []  # nothing created, not even the probe


@pytest.mark.skipif(
    not os.path.isdir("/sys") or os.access("/sys", os.W_OK) and os.geteuid() != 0,
    reason="needs a directory this user cannot write",
)
def test_a_really_unwritable_directory_is_refused(capsys, no_model_loads):
    """/sys refuses new files even to root (sysfs): the check creates a file, so it sees what a
    real write would (os.access would say root may write anywhere)."""
    from ict.errors import UserError
    from ict.files import check_writable

    try:
        (open("/sys/.ict-probe", "w")).close()
        pytest.skip("/sys is writable here")
    except OSError:
        pass
    with pytest.raises(UserError, match=r"--out /sys/ict-out cannot be written \("):
        check_writable("/sys/ict-out", flag="--out")


def test_a_full_output_location_is_refused(tmp_path, monkeypatch):
    import shutil

    from ict.errors import UserError
    from ict.files import check_writable

    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage._replace(free=10 * 2**20))
    with pytest.raises(UserError, match=r"only 10 MiB free in .* \(at least 64 MiB needed\)"):
        check_writable(tmp_path / "out", flag="--out")
    assert not (tmp_path / "out").exists()
    check_writable(tmp_path / "out", flag="--out", min_free_bytes=2**20)  # enough: passes


def test_an_output_path_under_a_file_is_refused(tmp_path):
    from ict.errors import UserError
    from ict.files import check_writable

    (tmp_path / "f").write_text("x")
    with pytest.raises(UserError, match=r"is a file, not a directory"):
        check_writable(tmp_path / "f" / "run", flag="--output-dir")


def test_a_write_failing_later_is_one_line(tmp_path, monkeypatch, capsys):
    """A write that fails after the checks (the disk fills during `ict eval`) ends in one line."""
    import errno

    import ict.cli.eval

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "e" / "x.json"))

    monkeypatch.setattr(ict.cli.eval, "resolve", full)
    assert main(["eval", "--out", str(tmp_path / "e")]) == 1
    line = one_error_line(capsys)
    assert line == (
        f"error: could not write {tmp_path / 'e' / 'x.json'} (No space left on device); "
        "free space or make it writable"
    )


def test_the_bad_input_table_lists_the_new_lines_as_they_are_printed(tmp_path, capsys):
    """docs/training.md's table quotes the YAML flag's line exactly as `ict train` prints it,
    and the other new lines in the form the code writes them."""
    from pathlib import Path

    table = (Path(__file__).resolve().parents[2] / "docs" / "training.md").read_text()
    assert main(["train", "--task-config", "{min_terms: [}", "--output-dir", str(tmp_path)]) == 2
    assert f"`{one_error_line(capsys)}`" in table
    for part in (
        "cannot be written (Read-only file system in DIR); pass a writable --output-dir",
        "(at least 64 MiB needed); free space there or pass a writable --out",
        "is a file, not a directory; pass a writable --output-dir",
        "(No space left on device); free space or make it writable; the last checkpoint",
    ):
        assert part in table, part


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "--output-dir", "{ro}/run"],
        ["train", "--task-config", "{min_terms: [}"],
        ["eval", "--out", "{ro}/e"],
        ["compare", "--quick", "--out", "{ro}/c"],
        ["compare", "--runs", "{ro}", "--out", "{ro}/r"],
        ["inspect", "--model", "default", "--prompt", "1+1=", "--html", "{ro}/m.html"],
    ],
    ids=["train", "train-yaml", "eval", "compare", "compare-runs", "inspect"],
)
def test_the_one_line_comes_before_torch_is_imported(argv, tmp_path):
    """In a fresh process: one line, exit status 2, and torch never imported (what keeps it
    within seconds: measured 1-2 s on 2 busy CPU cores, against 4-10 s when torch loads first)."""
    import subprocess
    import sys

    ro = tmp_path / "ro"
    ro.mkdir()
    code = (
        "import errno, os, sys\n"
        "import ict.files\n"
        "real = os.open\n"
        "def refuse(path, flags, *a, **k):\n"
        f"    if str(path).startswith({str(ro)!r}) and flags & os.O_CREAT:\n"
        "        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))\n"
        "    return real(path, flags, *a, **k)\n"
        "ict.files.os.open = refuse\n"
        "from ict.cli import main\n"
        "rc = main(sys.argv[1:])\n"
        "print('torch' in sys.modules)\n"
        "sys.exit(rc)\n"
    )
    args = [a.replace("{ro}", str(ro)) for a in argv]
    done = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=tmp_path, capture_output=True, text=True,
        timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    err = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(err) == 1 and err[0].startswith("error: "), done.stderr
    assert done.stdout.strip() == "False"  # torch was not imported


def test_a_permission_error_on_a_read_is_not_called_a_failed_write():
    import errno

    from ict.files import is_write_failure

    assert is_write_failure(OSError(errno.ENOSPC, "No space left on device", "x"))
    assert is_write_failure(OSError(errno.EROFS, "Read-only file system", "x"))
    assert not is_write_failure(OSError(errno.EACCES, "Permission denied", "x"))
    assert not is_write_failure(FileNotFoundError(errno.ENOENT, "No such file", "x"))
