import math

import pytest

from ict.cli import main


def test_help_lists_subcommands(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    for name in ("train", "eval", "stats"):
        assert name in out


def test_stats_demo_selects_exact_counts(capsys):
    assert main(["stats", "--batch", "3", "--length", "25", "--vocab", "20", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    lengths = [25, 25, 23]  # the demo pads the last two positions of the last response
    n_valid = sum(lengths)
    line = next(line for line in out.splitlines() if line.startswith("selected / valid"))
    # the paper's ICT and its random control: 10% of each response (9 here, not the batch's 8)
    per_response = sum(math.ceil(0.1 * n) for n in lengths)
    assert per_response != math.ceil(0.1 * n_valid)
    assert f"ict {per_response}/{n_valid}" in line
    assert f"random_sequence {per_response}/{n_valid}" in line
    assert f"entropy {math.ceil(0.2 * n_valid)}/{n_valid}" in line  # 20-Entropy: of the batch


def test_bad_flag_value_is_one_clear_error(capsys):
    assert main(["stats", "--reference", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --reference 'nope'") and "batch_mean" in err
    with pytest.raises(SystemExit):
        main(["stats", "--batch", "two"])
