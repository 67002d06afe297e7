"""The quiet console (ict.console) and a quiet `ict train`: third-party bars only with --verbose,
ict's own bars kept, the precision line once."""

import json
import logging

import pytest

from ict.cli import main


def _bar(tqdm, desc):
    for _ in tqdm(range(3), desc=desc):
        pass


def test_quiet_console_silences_tqdm_outside_ict_and_restores_it(capfd):
    from tqdm import std
    from tqdm.auto import tqdm

    from ict.console import quiet_console

    original = std.tqdm.__dict__["__init__"]
    with quiet_console():
        _bar(tqdm, "third-party bar")  # this module is not ict: as transformers' GGUF bar
        _bar(std.tqdm, "plain tqdm")
        # a bar made by ict's own code (the trainer's step bar) still shows
        exec("for _ in tqdm(range(3), desc='ict bar'): pass", {"__name__": "ict.x", "tqdm": tqdm})
        with quiet_console():  # nested: changes nothing, and leaves the outer context quiet
            _bar(tqdm, "nested bar")
        _bar(tqdm, "after nested")
    assert std.tqdm.__dict__["__init__"] is original  # restored
    _bar(tqdm, "bar after")
    out, err = capfd.readouterr()
    for silenced in ("third-party bar", "plain tqdm", "nested bar", "after nested"):
        assert silenced not in out + err
    assert "ict bar" in err and "3/3" in err
    assert "bar after" in err

    with quiet_console(verbose=True):
        _bar(tqdm, "verbose bar")
    assert "verbose bar" in capfd.readouterr().err


def test_quiet_console_silences_transformers_bars_and_is_the_one_helper(capfd):
    import transformers.utils.logging as tf_logging

    from ict.cli import compare
    from ict.console import quiet_console

    assert compare.quiet_console is quiet_console  # compare and train share it
    with quiet_console():
        _bar(tf_logging.tqdm, "transformers bar")  # e.g. transformers' "Loading weights"
    assert "transformers bar" not in capfd.readouterr().err


@pytest.fixture
def no_training(monkeypatch):
    """`ict train` up to a constructed Trainer (model loaded, precision chosen), no steps."""
    from ict.train.trainer import Trainer

    def train(self, **_):
        return {"steps": 0, "paths": {"run_dir": str(self.run_dir)}, "headline": "no steps"}

    monkeypatch.setattr(Trainer, "train", train)
    ict_logger = logging.getLogger("ict")
    level = ict_logger.level
    yield
    ict_logger.setLevel(level)


@pytest.mark.parametrize("verbose", [False, True])
def test_train_console_precision_once_loading_bars_only_verbose(
    verbose, tiny_model_dir, tmp_path, no_training, capfd, caplog
):
    task = tmp_path / "sums.jsonl"
    task.write_text(
        "".join(json.dumps({"q": f"{i} + 1 = ?", "a": str(i + 1)}) + "\n" for i in range(4))
    )
    argv = ["train", "--model", str(tiny_model_dir), "--task", f"{task}?question=q&answer=a"]
    argv += ["--output-dir", str(tmp_path / "run"), "--max-steps", "1", "--no-plots"]
    with caplog.at_level(logging.INFO, logger="ict"):
        assert main(argv + (["--verbose"] if verbose else [])) == 0
    out, err = capfd.readouterr()
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("precision: ")]
    shown = [line for line in (out + err).splitlines() if "precision: " in line]
    assert len(logged) == 1 and len(shown) == 1, (logged, shown)  # the log line, not also a print
    assert "run directory:" in out
    # transformers' weight-loading bar of from_pretrained: only with --verbose
    assert ("Loading weights" in err) == verbose, err[-2000:]
