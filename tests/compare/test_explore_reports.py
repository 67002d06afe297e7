"""scripts/explore_study.py's written reports on synthetic cells: the declared secondary endpoints
(secondary.md / .json) and the SmolLM2 companion's summary (companion.md + its report)."""

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from report.helpers import write_run

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location(
    "explore_study", ROOT / "scripts" / "explore_study.py"
)
explore_study = importlib.util.module_from_spec(spec)
sys.modules["explore_study"] = explore_study
spec.loader.exec_module(explore_study)

FALLING = [1.0, 0.9, 0.8, 0.7, 0.5, 0.4, 0.3, 0.2]  # 8 steps: W = 4, ratio 0.35 / 0.85


def _grid(root: Path, rates: dict, seeds, *, n: int, start: dict, entropy=None, block="A"):
    rng = np.random.default_rng(len(str(root)))
    (root / "runs").mkdir(parents=True, exist_ok=True)
    (root / "warm_start.json").write_text(json.dumps({"path": f"/cache/toy/{block}"}))
    (root / "start_eval.json").write_text(json.dumps({"benchmarks": {"toy": start}}))
    groups = {}
    for seed in seeds:
        for method, rate in rates.items():
            correct = rng.binomial(n, rate, 30).tolist()
            h = (entropy or {}).get(method)
            extra = {"format_rate": 1.0 if method == "grpo" else 0.5}
            run = write_run(root / "runs", method, seed, steps=8, correct=correct, n=n,
                            entropy=h, extra=extra)  # fmt: skip
            groups.setdefault(method, []).append(run)
    return groups


def test_secondary_report_states_the_declared_endpoints(tmp_path, monkeypatch):
    from ict.report.runs import load_run

    monkeypatch.setattr(explore_study, "PASS1", "eval/toy/pass@1")
    monkeypatch.setattr(explore_study, "PASS4", "eval/toy/pass@4")
    rates = {"grpo": 0.6, "ict": 0.3, "random_sequence": 0.45}
    start = {"pass@1": 0.3, "pass@4": 0.7}
    dirs = _grid(tmp_path / "w0", rates, range(0, 4), n=4, start=start, block="A")
    more = _grid(tmp_path / "w1", rates, range(4, 8), n=4, start=start, block="B")
    groups = {m: [load_run(d) for d in dirs[m] + more[m]] for m in rates}
    for i, run in enumerate(groups["ict"]):  # the kl stage's files, on ICT's runs only
        (run.path / "kl_to_start.json").write_text(json.dumps({"kl_mean_nats": 0.01 * (i + 1)}))
    md = explore_study.secondary_report(groups, tmp_path).read_text()
    raw = json.loads((tmp_path / "secondary.json").read_text())
    ni = raw["pass1_non_inferiority"]
    assert (
        ni["verdict"] == "inferior" and ni["seed_level"]["test"] == "paired t, 2 blocks, Welch df"
    )
    assert f"{ni['margin']:.3f}" in md and "**inferior**" in md
    assert raw["pass4"]["ict-grpo"]["verdict"] == "lower"
    assert set(raw["entropy_ratio"]["mean"]) == set(rates)
    assert raw["kl_to_start"]["mean"] == {"ict": pytest.approx(0.045)}  # 0.01..0.08
    assert "## Mean token KL of the final policy to the start model" in md


def test_token_kl_is_the_mean_categorical_kl_over_response_tokens():
    import torch
    from torch.distributions import Categorical, kl_divergence

    from ict.generation import generate
    from ict.testing import tiny_model_and_tokenizer

    policy, tok = tiny_model_and_tokenizer()
    start, _ = tiny_model_and_tokenizer()
    with torch.no_grad():
        for p in start.parameters():
            p.add_(0.05 * torch.randn_like(p))
    rollout = generate(policy, tok, ["1+1=", "2+3="], num_samples=3, temperature=1.5,
                       max_new_tokens=5, seed=0)  # fmt: skip
    kl, tokens = explore_study.token_kl(policy, start, rollout, 1.5)
    same, _ = explore_study.token_kl(policy, policy, rollout, 1.5)
    ids, attn = rollout.input_ids, rollout.attention_mask
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        a = policy(ids, attention_mask=attn, position_ids=pos).logits[:, :-1] / 1.5
        b = start(ids, attention_mask=attn, position_ids=pos).logits[:, :-1] / 1.5
    ref = kl_divergence(Categorical(logits=a), Categorical(logits=b))[rollout.response_mask[:, 1:]]
    assert tokens == int(rollout.response_mask.sum()) and tokens == ref.numel()
    assert kl == pytest.approx(float(ref.mean()), rel=1e-4) and kl > 0
    assert same == pytest.approx(0.0, abs=1e-6)


def test_companion_report_describes_each_arm_and_says_partial(tmp_path, monkeypatch):
    root = tmp_path / "companion"
    start = {"problems": 30, "n": 16, "pass@1": 0.3, "pass@16": 0.8, "format_rate": 0.6}
    entropy = {"grpo": FALLING, "ict": [0.5] * 8, "random_sequence": [0.5] * 8}
    rates = {"grpo": 0.6, "ict": 0.4, "random_sequence": 0.4}
    _grid(root, rates, range(2), n=16, start=start, entropy=entropy)
    md = explore_study.companion_report(tmp_path, tmp_path / "dest").read_text()
    assert "PARTIAL: 2 of 6 seeds" in md
    rows = {
        line.split(" | ")[0].strip("| "): line for line in md.splitlines() if line.startswith("| ")
    }
    assert "0.600 | 0.300 | 0.800" in rows["start model"]
    assert rows["grpo"].split(" | ")[2].startswith(f"{0.35 / 0.85:.3f}")
    assert rows["ict"].split(" | ")[2].startswith("1.000")
    assert "0 of 2 reached it" in rows["ict"] and "2 of 2 reached it" in rows["grpo"]
    assert (tmp_path / "dest" / "companion" / "report.md").is_file()
    assert explore_study.companion_report(tmp_path / "nothing", tmp_path / "d2") is None


def test_stage_b_scope_names_the_pilot_rule_that_chose_the_rate():
    from ict.report.scope import scope_line, scope_problems

    record = {"choice": {"pool": "full", "lr": 6.3e-05, "horizon": 200}}
    text = explore_study.stage_b_lr_choice(record)
    assert text.startswith("stage A's declared rule (PROTOCOL.md), one rate shared by every arm")
    assert "the largest of 2e-05, 4e-05, 6.3e-05 at which ICT's validation pass@1" in text
    assert "(6.3e-05 on the full pool;" in text and "were not part of the choice" in text
    assert explore_study.stage_b_lr_choice(None) is None
    lines = [
        scope_line("initialisations", "2 supervised warm starts"),
        scope_line("learning rate", "6.3e-05 for every method"),
        scope_line("learning rate chosen by", text),
        "| 32 | -0.066; **lower (primary)** |",
    ]
    assert scope_problems("\n".join(lines)) == []
