"""ICTGRPOTrainer's single forward when on-policy (ict.integrations.trl.single_forward).

(i) no statistics forward: the policy backbone's forwards outside `generate` per step equal TRL's
GRPO step's; (ii) the one-forward step equals the two-pass path (one_forward=False): selection,
per-token loss gradient, logged statistics metrics and updated weights; (iii) the cases that keep
two passes say why and run the extra forward; (iv) an on-policy case through TRL's forward equals
the native trainer (ict.integrations.cases) with its statistics from that forward.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from _trl_helpers import recording_trainer_class, tiny_config, toy_dataset, toy_reward

from ict.integrations.cases import (
    LOSS_SEED,
    assert_gradients_match,
    equivalence_cases,
    native_gradient,
    native_selection,
)

pytestmark = pytest.mark.trl
trl = pytest.importorskip("trl")

from ict.integrations.trl.single_forward import regroup  # noqa: E402
from ict.select.topk import count_rule_mask  # noqa: E402


class ForwardCounter:
    """Counts the forwards of `model`'s backbone outside `model.generate` (the statistics
    forward, old/reference log-probs and the loss forwards; not the decoding steps)."""

    def __init__(self, model):
        self.count, self.generating = 0, False
        model.model.register_forward_hook(self._hook)
        generate = model.generate

        def wrapped(*a, **k):
            self.generating = True
            try:
                return generate(*a, **k)
            finally:
                self.generating = False

        model.generate = wrapped

    def _hook(self, module, args, output):
        if not self.generating:
            self.count += 1


def build(tmp_path, cls=None, seed=0, **config):
    """A tiny trainer (not trained yet) and a ForwardCounter on its model."""
    from ict.testing import tiny_model_and_tokenizer

    model, tokenizer = tiny_model_and_tokenizer(seed=seed)
    counter = ForwardCounter(model)
    args = tiny_config(tmp_path, **config)
    if cls is None:
        cls = recording_trainer_class()
    elif cls == "trl":
        from trl import GRPOConfig, GRPOTrainer

        same = ("output_dir", "per_device_train_batch_size", "num_generations", "seed",
                "max_completion_length", "max_steps", "learning_rate", "logging_steps",
                "report_to", "use_cpu", "save_strategy", "bf16", "dataloader_num_workers",
                "gradient_accumulation_steps", "steps_per_generation", "loss_type")  # fmt: skip
        args = GRPOConfig(**{k: getattr(args, k) for k in same})
        cls = GRPOTrainer
    trainer = cls(
        model=model, reward_funcs=toy_reward, args=args, train_dataset=toy_dataset(),
        processing_class=tokenizer,
    )  # fmt: skip
    return trainer, counter


ON_POLICY = [
    dict(),  # one micro-batch per generation batch
    dict(gradient_accumulation_steps=2, steps_per_generation=2),  # two micro-batches, regrouped
]


# ---- (i) no statistics forward ------------------------------------------------------------------
@pytest.mark.parametrize("method", ["ict", "grpo", "random_sequence"])
@pytest.mark.parametrize("layout", ON_POLICY, ids=["one_micro_batch", "two_micro_batches"])
def test_an_on_policy_step_runs_no_statistics_forward(tmp_path, method, layout):
    """Forwards per training step outside generation: ICT on TRL (one forward) == TRL's GRPO
    (its loss forwards, one per micro-batch); the two-pass path adds its statistics forwards."""
    counts = {}
    for name, cls, extra in [
        ("trl", "trl", dict(loss_type="grpo")),
        ("one", None, dict(method=method)),
        ("two", None, dict(method=method, one_forward=False)),
    ]:
        trainer, counter = build(tmp_path / name, cls, **layout, **extra, max_steps=2)
        if name != "trl":
            assert trainer.ict_one_forward == (name == "one"), trainer.ict_one_forward_reason
        trainer.train()
        counts[name] = counter.count
    micro_batches = 2 * layout.get("steps_per_generation", 1)  # 2 steps
    assert counts["trl"] == micro_batches
    assert counts["one"] == counts["trl"]
    assert counts["two"] > counts["trl"]


# ---- (ii) the same step as the two-pass path ----------------------------------------------------
STAT_METRIC_PREFIXES = ("valid/", "selected/", "by_selector/", "paper/", "overlap/")


def _by_row(records, key):
    """{generation-batch index: [rows, ...] tensor in generation order} of a recorded field."""
    out = {}
    per_batch = len(records) // 2
    for b in range(2):
        recs = records[b * per_batch : (b + 1) * per_batch]
        rows = torch.cat([r["inputs"]["ict_row"] for r in recs])
        values = torch.cat([r[key] if key in r else r["inputs"][key] for r in recs])
        out[b] = values[torch.argsort(rows)]
    return out


@pytest.mark.parametrize("method", ["ict", "random_sequence", "grpo"])
@pytest.mark.parametrize("layout", ON_POLICY, ids=["one_micro_batch", "two_micro_batches"])
def test_one_forward_step_equals_the_two_pass_step(tmp_path, method, layout):
    """Two steps (the first dense for ict/random_sequence, the second sparse): the selection,
    d loss / d log p per token (the per-token loss's weight), the statistics, every logged
    statistics metric and the updated weights equal the two-pass path's."""
    runs = {}
    for one in (True, False):
        trainer, _ = build(
            tmp_path / str(one), method=method, one_forward=one, max_steps=2, **layout
        )
        assert trainer.ict_one_forward == one
        trainer.train()
        runs[one] = trainer
    one, two = runs[True], runs[False]
    for key in ("ict_selected", "completion_ids"):
        a, b = _by_row(one.records, key), _by_row(two.records, key)
        for batch in a:
            assert torch.equal(a[batch], b[batch]), (key, batch)
    for key in ("grad", "logps", "ict_js", "ict_entropy", "ict_logprob"):
        a, b = _by_row(one.records, key), _by_row(two.records, key)
        for batch in a:
            torch.testing.assert_close(a[batch], b[batch], atol=1e-6, rtol=1e-5, msg=key)
    sparse = _by_row(one.records, "ict_selected")[1]
    valid = _by_row(one.records, "completion_mask")[1].bool()
    if method != "grpo":  # the second step selects (a tenth of each response)
        assert torch.equal(sparse.sum(1), count_rule_mask(valid, 0.1).sum(1))
    logs = [
        [(k, v) for entry in run.state.log_history for k, v in sorted(entry.items())
         if k.startswith(STAT_METRIC_PREFIXES)]
        for run in (one, two)
    ]  # fmt: skip
    assert len(logs[0]) > 20 and [k for k, _ in logs[0]] == [k for k, _ in logs[1]]
    for (key, a), (_, b) in zip(*logs, strict=True):
        assert a == pytest.approx(b, rel=1e-4, abs=1e-6), key
    # AdamW moves a weight by ~lr whatever its gradient's size, so a float32 summation-order
    # difference in a near-zero gradient shows as ~1e-6: 1e-3 of a step (lr = 1e-2) is allowed
    for p, q in zip(one.model.parameters(), two.model.parameters(), strict=True):
        torch.testing.assert_close(p, q, atol=1e-5, rtol=1e-5)


# ---- (iii) the fallbacks ------------------------------------------------------------------------
FALLBACKS = [
    (dict(method="entropy"), "needs the statistics of the whole batch"),
    (dict(method="stapo"), "needs the statistics of the whole batch"),
    (dict(method="ict_batch_mean"), "needs the statistics of the whole batch"),
    (dict(method="ict", one_forward=False), "one_forward=False"),
    (dict(method="ict", num_iterations=2), "off-policy"),
    (dict(method="ict", steps_per_generation=2), "off-policy"),
    (dict(method="ict", granularity="token_id"), "granularity 'token_id'"),
    (
        dict(method="clip_cov", gradient_accumulation_steps=2, steps_per_generation=2),
        "loss_mode='clip_cov' (per micro-batch) depends on how the rows are split",
    ),
    (
        dict(
            method="grpo", loss_type="bnpo", gradient_accumulation_steps=2, steps_per_generation=2
        ),
        "loss_type='bnpo' depends on how the rows are split",
    ),  # fmt: skip
    (
        dict(
            method="ict",
            per_device_train_batch_size=2,
            gradient_accumulation_steps=2,
            steps_per_generation=2,
        ),
        "per_device_train_batch_size=2 is not a multiple of num_generations=4",
    ),  # fmt: skip
]


@pytest.mark.parametrize("config, reason", FALLBACKS, ids=[r for _, r in FALLBACKS])
def test_fallbacks_keep_two_passes_and_say_why(tmp_path, config, reason):
    trainer, _ = build(tmp_path, **config)
    assert not trainer.ict_one_forward
    assert reason in trainer.ict_one_forward_reason


def test_a_fallback_runs_the_statistics_forward(tmp_path):
    """entropy (a global top-k by a score): the loss forwards plus one statistics forward per
    generation batch (per_device_train_batch_size rows at a time)."""
    trainer, counter = build(tmp_path, method="entropy", max_steps=2)
    trainer.train()
    assert counter.count == 2 + 2


# ---- the pieces ---------------------------------------------------------------------------------
@pytest.mark.parametrize("ratio", [0.1, 0.25, 0.5, 0.9])
def test_count_rule_is_the_per_row_top_k_count(ratio):
    """count_rule_mask keeps, per row, as many tokens as ict.select's per-row top-k does."""
    from ict.select import select_tokens
    from ict.stats import TokenStats

    g = torch.Generator().manual_seed(0)
    valid = torch.rand(16, 23, generator=g) < 0.7
    valid[3] = False  # an empty row keeps nothing
    js = torch.rand(16, 23, generator=g)
    zeros = torch.zeros_like(js)
    stats = TokenStats(entropy=zeros, renyi2=zeros, logprob=zeros, js=js)
    picked = select_tokens("js_top", valid, stats=stats, ratio=ratio, scope="sequence")
    rule = count_rule_mask(valid, ratio)
    assert torch.equal(picked.sum(1), rule.sum(1)) and not (rule & ~valid).any()


def test_regroup_puts_whole_groups_in_each_micro_batch():
    """TRL's shuffled split, regrouped: generation order, same sizes, every field moved alike."""
    perm = torch.randperm(8, generator=torch.Generator().manual_seed(1))
    full = {
        "ict_row": perm, "x": perm[:, None] * 10 + torch.arange(3), "names": [f"r{i}" for i in perm.tolist()],
        "num_items_in_batch": torch.tensor(5), "tool_mask": None,
    }  # fmt: skip
    chunks = [
        {k: (v[i : i + 4] if k not in ("num_items_in_batch", "tool_mask") else v)
         for k, v in full.items()}
        for i in (0, 4)
    ]  # fmt: skip
    out = regroup(chunks)
    assert [c["ict_row"].tolist() for c in out] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    for c in out:
        assert torch.equal(c["x"], c["ict_row"][:, None] * 10 + torch.arange(3))
        assert c["names"] == [f"r{i}" for i in c["ict_row"].tolist()]
        assert int(c["num_items_in_batch"]) == 5 and c["tool_mask"] is None


# ---- (iv) the native trainer, on-policy ---------------------------------------------------------
# (case, settings over the case's): token_mean makes the step's normaliser the selected-token
# count, which the one-forward path sets up from the count rule before any score exists
ON_POLICY_CASES = [
    ("method_ict", {}), ("method_random_sequence", {}), ("method_grpo", {}),
    ("method_ict_kl", {}), ("method_ict_bottom", {}), ("method_entropy_bonus", {}),
    ("method_ict", {"loss_agg": "token_mean"}), ("method_ict_branch", {"loss_agg": "token_mean"}),
    ("method_ict", {"entropy_coef": 0.05, "loss_agg": "token_mean"}),
]  # fmt: skip
PROMPT_LEN = 3


def on_policy_case(case, model):
    """The case with its statistics and log-probabilities those of `model` (its final hidden
    states and LM head on the case's prompt + responses) and no perturbation (on-policy).
    Returns (case, input_ids [B, P + T], attention_mask)."""
    B, T = case.tokens.shape
    prompt = torch.arange(B * PROMPT_LEN).view(B, PROMPT_LEN) % 11 + 20
    ids = torch.cat([prompt, case.tokens], dim=1)
    attn = torch.cat([torch.ones_like(prompt), case.mask.long()], dim=1)
    with torch.no_grad():
        hidden = model.model(input_ids=ids, attention_mask=attn).last_hidden_state
    hidden = hidden[:, PROMPT_LEN - 1 : PROMPT_LEN - 1 + T].float()
    weight = model.lm_head.weight.detach().float()
    logp = torch.log_softmax(hidden @ weight.T, dim=-1)
    old = logp.gather(-1, case.tokens[..., None]).squeeze(-1) * case.mask
    entropy = -(logp.exp() * logp).sum(-1) * case.mask
    on = dataclasses.replace(
        case, hidden=hidden, lm_head_weight=weight, old_logprob=old, logprob=old.clone(),
        entropy=entropy,
    )  # fmt: skip
    return on, ids, attn


@pytest.mark.parametrize(
    "name, extra", ON_POLICY_CASES, ids=[f"{n}{''.join(f'-{k}={v}' for k, v in e.items())}"
                                         for n, e in ON_POLICY_CASES]
)  # fmt: skip
def test_on_policy_case_matches_native(tmp_path, name, extra):
    """A generation batch of two groups in two shuffled micro-batches (TRL's layout), through
    ICTGRPOTrainer's one-forward path (regroup, set-up, loss with the statistics of its own
    forward): the selection, the step's loss and the parameter gradient equal the native
    trainer's on-policy update (statistics from the same model, old log-probs = current)."""
    case = next(c for c in equivalence_cases() if c.name == name)
    case = dataclasses.replace(case, options={**case.options, **extra})
    o = case.options
    trainer, _ = build(
        tmp_path, method=o["method"], gradient_accumulation_steps=2, steps_per_generation=2,
        seed=0, **extra,
    )  # fmt: skip
    assert trainer.ict_one_forward, trainer.ict_one_forward_reason
    trainer.state.global_step, trainer.state.max_steps = o["step"] - 1, 0  # past the warm-up
    trainer.max_completion_length = case.mask.size(1)
    trainer.current_gradient_accumulation_steps = 2
    trainer.model.train()
    model = trainer.model
    case, ids, attn = on_policy_case(case, model)
    selected = native_selection(case)
    want_grads, _, want_loss = native_gradient(
        case, model, ids, attn, selected, temperature=trainer.temperature
    )
    rows = torch.randperm(8, generator=torch.Generator().manual_seed(3))  # TRL's shuffle
    chunks = [
        {
            "prompt_ids": ids[r, :PROMPT_LEN], "prompt_mask": attn[r, :PROMPT_LEN],
            "completion_ids": case.tokens[r], "completion_mask": case.mask[r].long(),
            "advantages": case.advantages[r], "num_items_in_batch": case.mask.sum(),
            "ict_row": r,
        }
        for r in (rows[:4], rows[4:])
    ]  # fmt: skip
    chunks = regroup(chunks)
    trainer._ict_prepare_one_forward(chunks)
    loss = 0.0
    for j, chunk in enumerate(chunks):
        trainer._step = j
        torch.manual_seed(LOSS_SEED)
        loss = loss + trainer._compute_loss(model, chunk)
    got_selected = torch.cat([c["ict_selected"] for c in chunks])  # regrouped: generation order
    assert torch.equal(got_selected.bool(), selected)
    torch.testing.assert_close(loss.detach(), want_loss, atol=1e-6, rtol=1e-5)
    params = [p for p in model.parameters() if p.requires_grad]
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    grads = [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads, strict=True)]
    assert_gradients_match(case, grads, want_grads)
