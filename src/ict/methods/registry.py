"""The method registry: a token selector plus the settings that make it the method a paper describes.

`--method NAME` (the native trainer, `ICTGRPOConfig(method=...)`, verl's `ict.method`) names a
`Method` from `METHODS`, or any selector of `ict.select.SELECTORS` (then it runs with the
selector's own facts and the defaults below). A composition "a+b" whose first part is a method is
that method with the selectors of the other parts intersected with its own: `ict+stapo` is the
paper's ICT (reference, loss, warm-up) minus STAPO's spurious tokens. Every setting a method fixes
can still be overridden one by one (`--reference batch_mean`); a field left None by a method takes
the selector's fact (ratio, scope) or the common default.

The built-in methods are `_builtin`'s, each with its description (the generated tables of
docs/METHOD.md, "Named variants and ablations", and `ict train --help`).

A method name says which paper's recipe runs, a selector name what it keeps: the method `ict` runs
the selector `js_top`. A name may be both only where it means the same thing (the method of that
name runs the selector of that name, with the selector's facts): `get_method` reads METHODS first.
A method may fix its clip range (`eps_low`, `eps_high`, ict.methods.options.CLIP_FIELDS): each engine maps it onto its
own setting (native `eps_low` / `eps_high`, TRL `epsilon` / `epsilon_high`: None = the method's;
verl's `clip_ratio_low` / `clip_ratio_high`, checked against it). Sources: docs/METHOD.md.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ict.errors import ConfigError

DEFAULT_REFERENCE = "group_position"  # the paper's; also what diagnostics of ICT use
PAPER_DENSE_WARMUP = 10  # Theta: the paper's 10, 20 and 40 converged alike
# the entropy bonus baseline's coefficient: verl's long-time default `entropy_coeff` (0.001) is
# invisible next to |A| ~ 1 on the small models ict trains on a CPU; 0.01 is the largest of the
# coefficients Cui et al. (arXiv 2505.22617, sec. 4) compare against
ENTROPY_BONUS = 0.01
# arXiv 2506.01347's runs (TianHongZXY/RLVR-Decomposed, run_*_psr_nsr.sh on their verl fork): the
# actor's clip_ratio 0.2 and entropy_coeff 0.001 (their ppo_trainer.yaml defaults, which the
# scripts keep), kl_coef 0 and no KL loss; the advantages' lambda is ict.loss.W_REINFORCE_LAMBDA
NEGATIVE_REINFORCEMENT_CLIP = 0.2
NEGATIVE_REINFORCEMENT_ENTROPY = 0.001


@dataclass(frozen=True)
class Method:
    """A named training method. None fields fall back to the selector's facts / common defaults.

    selector: a selector name or composition (ict.select). ratio: fraction kept (None: the
    selector's default). scope: top-k scope (None: the selector's default). reference: the JS
    reference distribution (ict.stats.REFERENCES). loss_agg / normalize_by: ict.loss aggregation.
    dense_warmup_steps: steps that update every valid token before the selection applies.
    loss_mode: the per-token policy loss (ict.loss.modes: vanilla, clip_cov, kl_cov).
    entropy_coef: the entropy bonus's coefficient (ict.loss.policy_loss).
    eps_low / eps_high: the clip range the method's authors run (None: ict.loss's 0.2 / 0.28).
    advantage: the advantage estimator (ict.loss.ADVANTAGE_ESTIMATORS; None: grpo).
    entropy_advantage: alpha of the entropy-based advantage shaping (ict.loss.shape_advantages).
    """

    name: str
    selector: str
    description: str = ""
    ratio: float | None = None
    scope: str | None = None
    reference: str | None = None
    loss_agg: str | None = None
    normalize_by: str | None = None
    dense_warmup_steps: int | None = None
    loss_mode: str | None = None
    entropy_coef: float | None = None
    eps_low: float | None = None
    eps_high: float | None = None
    advantage: str | None = None
    entropy_advantage: float | None = None

    def resolved(self) -> Method:
        """A copy with every None field filled from the selector's facts and the defaults."""
        from ict.loss import DEFAULT_ADVANTAGE, LossConfig
        from ict.select.core import selector_facts

        facts = selector_facts(self.selector)
        return dataclasses.replace(
            self,
            ratio=self.ratio if self.ratio is not None else facts["default_ratio"],
            scope=self.scope or facts["default_scope"],
            reference=self.reference or DEFAULT_REFERENCE,
            # LossConfig's defaults: GRPO's per-response mean over the selected tokens (the paper's)
            loss_agg=self.loss_agg or LossConfig.loss_agg,
            normalize_by=self.normalize_by or LossConfig.normalize_by,
            dense_warmup_steps=self.dense_warmup_steps or 0,
            loss_mode=self.loss_mode or LossConfig.loss_mode,
            entropy_coef=self.entropy_coef if self.entropy_coef is not None else 0.0,
            eps_low=self.eps_low if self.eps_low is not None else LossConfig.eps_low,
            eps_high=self.eps_high if self.eps_high is not None else LossConfig.eps_high,
            advantage=self.advantage or DEFAULT_ADVANTAGE,
            entropy_advantage=self.entropy_advantage or 0.0,
        )

    def fixes_clip_range(self) -> bool:
        """Whether the method (as registered, before resolving) fixes its own clip range."""
        return self.eps_low is not None or self.eps_high is not None

    def with_overrides(self, **overrides) -> Method:
        """This method with the non-None `overrides` applied, then resolved."""
        changes = {k: v for k, v in overrides.items() if v is not None}
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ConfigError(f"unknown method setting(s) {sorted(unknown)}")
        return dataclasses.replace(self, **changes).resolved()

    def needs(self) -> tuple[str, ...]:
        """TokenStats fields and inputs the selector reads (ict.select facts)."""
        from ict.select.core import selector_facts

        return selector_facts(self.selector)["needs"]


METHODS: dict[str, Method] = {}


def register_method(method: Method) -> Method:
    """Add `method` to `METHODS` (its selector must be registered); returns it."""
    from ict.select.core import parse_selector

    if "+" in method.name or not method.name:
        raise ValueError(f"method name {method.name!r} must be non-empty and must not contain '+'")
    parse_selector(method.selector)
    METHODS[method.name] = method
    return method


def get_method(name: str) -> Method:
    """The method called `name`: a registered Method, else a selector (composition) with defaults.

    Raises ConfigError naming the unknown part and the choices.
    """
    from ict.select.core import parse_selector

    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"method must be a name, got {name!r}; choose from {available_methods()}")
    key = name.strip().lower()
    if key in METHODS:
        return METHODS[key]
    first, *rest = key.split("+")
    if rest and first.strip() in METHODS:  # a method with more selectors intersected
        base = METHODS[first.strip()]
        try:
            extra = [_selector_of(part.strip()) for part in rest]
        except ConfigError as err:
            raise ConfigError(
                f"unknown method {name!r}: {err}. Methods: {', '.join(available_methods())}"
            ) from None
        return dataclasses.replace(base, name=key, selector="+".join([base.selector, *extra]))
    try:
        parse_selector(key)
    except ConfigError:
        import difflib

        from ict.select import available_selectors

        close = difflib.get_close_matches(key, [*METHODS, *available_selectors()], n=2)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        raise ConfigError(
            f"unknown method {name!r}{hint}: use a method ({', '.join(available_methods())}), "
            f"a selector ({', '.join(available_selectors())}) or a composition such as ict+stapo"
        ) from None
    return Method(key, key)


def _selector_of(part: str) -> str:
    """The selector a composition part names: a method's selector, else a selector name."""
    from ict.select.core import parse_selector

    if part in METHODS:
        return METHODS[part].selector
    return "+".join(s.name for s in parse_selector(part))


def available_methods() -> list[str]:
    """Registered method names (a selector name or an 'a+b' composition also works)."""
    return sorted(METHODS)


def _builtin() -> None:
    """The built-in methods, in the order reports list them: baselines, controls, ICT, variants."""
    from ict.loss.policy import ENTROPY_ADVANTAGE_ALPHA, ENTROPY_ADVANTAGE_KAPPA

    register_method(Method("grpo", "every", "GRPO: every valid token."))
    register_method(
        Method(
            "entropy",
            "entropy_top",
            "20-Entropy (Wang et al. 2025): global top 20% by entropy, DAPO's token mean over "
            "the selected tokens.",
            loss_agg="token_mean",
        )
    )
    register_method(
        Method(
            "stapo",
            "not_spurious",
            "STAPO (arXiv 2602.15620): every token except the spurious ones, with a secondary "
            "source's thresholds (p < 0.01, entropy below the valid tokens' 5% quantile), not a "
            "paper version's (docs/METHOD.md: v1 runs 0.002 and 0.75 over low-p tokens).",
        )
    )
    register_method(Method("random", "uniform", "Control: a random 10% of the batch's tokens."))
    register_method(
        Method(
            "clip_cov",
            "every",
            "Clip-Cov (Cui et al. 2025): GRPO, with the gradient cut on a random few tokens of "
            "high advantage-log-prob covariance; token mean, clip range 1 / 1.",
            loss_agg="token_mean",
            loss_mode="clip_cov",
            eps_low=1.0,
            eps_high=1.0,
        )
    )
    register_method(
        Method(
            "kl_cov",
            "every",
            "KL-Cov (Cui et al. 2025): GRPO without the ratio clip, a |log-ratio| penalty on the "
            "tokens of highest advantage-log-prob covariance; token mean.",
            loss_agg="token_mean",
            loss_mode="kl_cov",
        )
    )
    register_method(
        Method(
            "entropy_bonus",
            "every",
            f"GRPO minus {ENTROPY_BONUS} x the policy's entropy (an entropy bonus).",
            entropy_coef=ENTROPY_BONUS,
        )
    )
    register_method(
        Method(
            "entropy_advantage",
            "every",
            f"Entropy-based advantage (Cheng et al. 2025, arXiv 2506.14758 v3): GRPO, each token's "
            f"advantage plus min({ENTROPY_ADVANTAGE_ALPHA} x its entropy, |A| / "
            f"{ENTROPY_ADVANTAGE_KAPPA:g}), detached; token mean, clip 0.2 / 0.28.",
            loss_agg="token_mean",
            entropy_advantage=ENTROPY_ADVANTAGE_ALPHA,
        )
    )
    register_method(
        Method(
            "passk",
            "every",
            "Pass@k Training (Chen et al. 2025, arXiv 2508.10751; code RUCAIBox/Passk_Training): "
            "the analytic pass@k advantage (k = 4), DAPO's token mean and clip 0.2 / 0.28.",
            loss_agg="token_mean",
            advantage="passk",
        )
    )
    for name, selector, what in (
        ("w_reinforce", "every", "lambda = 0.1 on correct responses, -1 on incorrect ones"),
        ("nsr", "nonzero_advantage", "-1 on incorrect responses only (correct ones dropped)"),
        ("psr", "nonzero_advantage", "+1 on correct responses only (incorrect ones dropped)"),
    ):
        register_method(
            Method(
                name,
                selector,
                f"{name.upper().replace('_', '-')} (Zhu et al. 2025, arXiv 2506.01347; code "
                f"TianHongZXY/RLVR-Decomposed): no baseline, advantage {what}; token mean, clip "
                f"{NEGATIVE_REINFORCEMENT_CLIP} / {NEGATIVE_REINFORCEMENT_CLIP}, entropy bonus "
                f"{NEGATIVE_REINFORCEMENT_ENTROPY}.",
                loss_agg="token_mean",
                normalize_by="selected",
                entropy_coef=NEGATIVE_REINFORCEMENT_ENTROPY,
                eps_low=NEGATIVE_REINFORCEMENT_CLIP,
                eps_high=NEGATIVE_REINFORCEMENT_CLIP,
                advantage=name,
            )
        )
    register_method(
        Method(
            "random_sequence",
            "uniform",
            "Control: a random 10% of each response, with ICT's warm-up and loss.",
            scope="sequence",
            dense_warmup_steps=PAPER_DENSE_WARMUP,
        )
    )
    register_method(
        Method(
            "ict",
            "js_top",
            "ICT as the paper defines it: JS to the position-aligned group mean, top 10% of each "
            "response, Sparse-GRPO, dense warm-up.",
            scope="sequence",
            reference="group_position",
            loss_agg="seq_mean_token_mean",
            normalize_by="selected",
            dense_warmup_steps=PAPER_DENSE_WARMUP,
        )
    )
    register_method(
        Method(
            "ict_batch_mean",
            "js_top",
            "Batch-mean ICT (this project's guess before the paper's method was known): JS to the "
            "batch-mean distribution, global top 10%, token mean, no warm-up.",
            scope="global",
            reference="batch_mean",
            loss_agg="token_mean",
            dense_warmup_steps=0,
        )
    )
    register_method(
        dataclasses.replace(
            METHODS["ict"],
            name="ict_branch",
            selector="js_next_top",
            description="This project's ablation (not the paper's): the paper's ICT with the score "
            "of position t+1 credited to the token at t, the token whose choice made the contexts "
            "differ.",
        )
    )
    register_method(
        Method(
            "ict_kl",
            "kl_top",
            "Ablation: the paper's ICT scored by KL(p || group-position mean) instead of JS.",
            scope="sequence",
            reference="group_position",
            dense_warmup_steps=PAPER_DENSE_WARMUP,
        )
    )
    register_method(
        Method(
            "ict_bottom",
            "js_bottom",
            "Ablation ('90%-frequent'): the bottom 90% of each response by JS.",
            scope="sequence",
            reference="group_position",
            dense_warmup_steps=PAPER_DENSE_WARMUP,
        )
    )


_builtin()
