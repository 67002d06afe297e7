import pytest

from ict.errors import ConfigError
from ict.evidence.endpoints import Endpoint, declare, metric_name, parse_endpoint


def test_parse_and_match():
    e = parse_endpoint("ict-random_sequence@pass@1")
    assert (
        e == Endpoint("ict", "random_sequence", "pass@1") and e.spec == "ict-random_sequence@pass@1"
    )
    assert e.matches("ict", "random_sequence", "eval/toy_cot/pass@1")
    assert not e.matches("random_sequence", "ict", "eval/toy_cot/pass@1")
    assert not e.matches("ict", "random_sequence", "eval/toy_cot/pass@16")
    assert parse_endpoint(" ict+stapo - grpo @ reward ").matches("ict+stapo", "grpo", "reward/mean")
    full = parse_endpoint("ict-grpo@eval/toy_cot/pass@4")
    assert full.matches("ict", "grpo", "eval/toy_cot/pass@4")
    assert not full.matches("ict", "grpo", "eval/other/pass@4")
    assert metric_name("eval/rg:x?a=1&b=2/pass@8") == "pass@8"


@pytest.mark.parametrize("bad", ["ict@pass@4", "ict-grpo", "-grpo@pass@1", "ict-@pass@1"])
def test_bad_specs_name_the_form(bad):
    with pytest.raises(ConfigError, match="METHOD-BASELINE@METRIC"):
        parse_endpoint(bad)


def test_declare_dedupes_and_checks():
    d = declare(["ict-grpo@pass@4", "ict-grpo@pass@4"], source="flags")
    assert len(d.primary) == 1 and d.as_dict()["primary"] == ["ict-grpo@pass@4"]
    with pytest.raises(ConfigError, match="alpha"):
        declare(alpha=5)
    with pytest.raises(ConfigError, match="margin"):
        declare(margin=0)
