import math

import pytest

from ict.cli import main


def test_help_lists_subcommands(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    for name in ("train", "eval", "stats"):
        assert name in out


def test_stats_demo_selects_exact_counts(capsys):
    assert main(["stats", "--batch", "3", "--length", "10", "--vocab", "20", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    n_valid = 3 * 10 - 2  # the demo pads the last two positions of the last response
    line = next(line for line in out.splitlines() if line.startswith("selected / valid"))
    assert f"ict {math.ceil(0.1 * n_valid)}/{n_valid}" in line
    assert f"entropy {math.ceil(0.2 * n_valid)}/{n_valid}" in line
    assert f"random {math.ceil(0.1 * n_valid)}/{n_valid}" in line


def test_bad_flag_value_is_one_clear_error(capsys):
    assert main(["stats", "--reference", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --reference 'nope'") and "batch_mean" in err
    with pytest.raises(SystemExit):
        main(["stats", "--batch", "two"])
