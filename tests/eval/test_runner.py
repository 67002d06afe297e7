"""The runner with a scripted sampler: metrics, files, resume after a crash, cache safety."""

import json

import pytest

from ict.compare.presets import FIXTURES_DIR
from ict.errors import ConfigError
from ict.eval import EvalSettings
from ict.eval.settings import chunk_seed

FIXTURES = FIXTURES_DIR  # the fixture files shipped with ict (package data)


class ScriptedSampler:
    """Deterministic in (prompt, seed): answers correctly when hash(prompt, seed, j) is even."""

    def __init__(self, crash_after=None):
        self.calls = 0
        self.crash_after = crash_after
        self.seen_seeds = []

    def sample(self, prompts, *, n, seed):
        if self.crash_after is not None and self.calls >= self.crash_after:
            raise KeyboardInterrupt("simulated crash")
        self.calls += 1
        self.seen_seeds.append(seed)
        out = []
        for messages in prompts:
            question = messages[-1]["content"]
            rows = []
            for j in range(n):
                h = (sum(map(ord, question)) * 31 + seed * 7 + j) % 5
                text = (
                    "<answer>7</answer>"
                    if h in (0, 1)
                    else ("I think 7" if h == 2 else "<answer>0</answer>")
                )
                rows.append((text, 10 + j))
            out.append(rows)
        return out


def settings(**kw):
    base = dict(n=4, k=[1, 2, 4], batch_size=8, seed=5, num_bootstrap=200)
    base.update(kw)
    return EvalSettings(**base)


def run_eval(sampler, specs, settings, **kw):
    from ict.eval import run_eval

    return run_eval(sampler, specs, settings, model="scripted", **kw)


class AlwaysSeven:
    """A verifier (what an item without its own rule is judged by): right when the answer is 7."""

    def judge_one(self, item, text):
        from ict.rewards import Verdict, extract_answer

        found = extract_answer(text)
        ok = found.answer == "7"
        return Verdict(float(ok), ok, found.answer, found.format_ok)


def test_summary_metrics_match_the_samples(tmp_path):
    summary = run_eval(
        ScriptedSampler(),
        ["gsm8k"],
        settings(),
        out_dir=tmp_path,
        data_dir=FIXTURES,
        verifier=AlwaysSeven(),
    )
    records = [
        json.loads(line) for line in (tmp_path / "samples" / "gsm8k.jsonl").read_text().splitlines()
    ]
    assert [r["index"] for r in records] == [0, 1, 2]
    for r in records:
        assert r["num_correct"] == sum(s["answer"] == "7" for s in r["samples"])
        assert r["n"] == 4 and "fingerprint" in r and r["gold"]
    m = summary["benchmarks"]["gsm8k"]
    from math import comb

    expected = sum(1 - comb(4 - r["num_correct"], 2) / comb(4, 2) for r in records) / 3
    assert m["pass@2"] == pytest.approx(expected)
    assert m["accuracy"] == pytest.approx(m["pass@1"])
    assert m["format_rate"] == pytest.approx(
        sum(s["format_ok"] for r in records for s in r["samples"]) / 12
    )
    assert m["response_length_mean"] == pytest.approx(11.5)
    assert m["pass@4_ci95"][0] <= m["pass@4"] <= m["pass@4_ci95"][1]
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert (
        saved["settings"]["temperature"] == 1.0 and saved["model"] == "scripted" and saved["date"]
    )
    assert saved["metrics"]["eval/gsm8k/pass@4"] == m["pass@4"]
    md = (tmp_path / "summary.md").read_text()
    assert "| gsm8k | 3 |" in md and "top_p: 1.0" in md
    assert not list(tmp_path.rglob("*.tmp"))  # atomic writes leave no temp files


def _strip_date(summary):
    return {k: v for k, v in summary.items() if k not in ("date", "seconds")}


def test_resume_after_crash_gives_the_same_summary(tmp_path):
    specs = ["rg:chain_sum?min_terms=2&max_terms=2", "gsm8k"]
    s = settings(batch_size=8, limit=6)  # 2 problems per chunk: 3 chunks on chain_sum, 2 on gsm8k
    full = run_eval(ScriptedSampler(), specs, s, out_dir=tmp_path / "a", data_dir=FIXTURES)

    crashing = ScriptedSampler(crash_after=2)
    with pytest.raises(KeyboardInterrupt):
        run_eval(crashing, specs, s, out_dir=tmp_path / "b", data_dir=FIXTURES)
    cache = tmp_path / "b" / "samples" / "rg_chain_sum_min_terms=2_max_terms=2.jsonl"
    assert len(cache.read_text().splitlines()) == 4  # two finished chunks were cached
    with cache.open("a") as f:
        f.write('{"index": 4, "torn')  # a line torn by the crash is ignored
    resumed_sampler = ScriptedSampler()
    resumed = run_eval(resumed_sampler, specs, s, out_dir=tmp_path / "b", data_dir=FIXTURES)
    assert resumed_sampler.calls == 1 + 2  # only the missing chain_sum chunk, then gsm8k
    assert _strip_date(resumed) == _strip_date(full)


def test_cache_from_other_settings_is_refused(tmp_path):
    run_eval(ScriptedSampler(), ["gsm8k"], settings(), out_dir=tmp_path, data_dir=FIXTURES)
    with pytest.raises(ConfigError, match="other settings"):
        run_eval(
            ScriptedSampler(),
            ["gsm8k"],
            settings(temperature=0.7),
            out_dir=tmp_path,
            data_dir=FIXTURES,
        )
    again = run_eval(
        ScriptedSampler(),
        ["gsm8k"],
        settings(temperature=0.7),
        out_dir=tmp_path,
        data_dir=FIXTURES,
        overwrite=True,
    )
    assert again["settings"]["temperature"] == 0.7


def test_chunk_seeds_differ_by_chunk_and_benchmark():
    seeds = {
        chunk_seed(0, "a", 0),
        chunk_seed(0, "a", 1),
        chunk_seed(0, "b", 0),
        chunk_seed(1, "a", 0),
    }
    assert len(seeds) == 4


@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(k=[1, 8], n=4), "raise --n"),
        (dict(n=0), "--n"),
        (dict(temperature=0.0), "greedy"),
        (dict(limit=0), "--limit"),
    ],
)
def test_settings_validation(bad, match):
    with pytest.raises(ConfigError, match=match):
        settings(**bad).validate()
