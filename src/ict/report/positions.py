"""Token-level evidence of where each selector's picks fall, from samples.jsonl.

Two views, per selector (every key of a record's "selected" masks: ict, entropy, stapo and the
run's own method):
- category shares: the share of the selector's picks in each token category (the task labels its
  own tokens, ict.data.task_categorizer: e.g. toy:cot's chain categories; other tasks get a generic
  labelling),
  next to the share of all response tokens in that category;
- divergence share: responses with the same prompt at the same step form a group; the group's first
  divergence position is the first token index where its responses do not all agree (a response
  that has ended counts as different). The share of the selector's picks (in logged groups of two
  or more responses) that sit at that index, next to the share of tokens there.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ict.data import Categorize, generic_categories, task_categorizer
from ict.files import read_jsonl
from ict.report.runs import flat_config


def first_divergence(responses: Sequence[Sequence[str]]) -> int | None:
    """First token index where the responses do not all have the same token (a response that has
    ended counts as different); None for fewer than two responses or identical ones."""
    if len(responses) < 2:
        return None
    longest = max(len(r) for r in responses)
    for i in range(longest):
        column = {r[i] if i < len(r) else None for r in responses}
        if len(column) > 1:
            return i
    return None


@dataclass
class PickEvidence:
    """Counts behind the tables; shares are derived from them."""

    tokens: Counter = field(default_factory=Counter)  # category -> response tokens
    picks: dict = field(default_factory=lambda: defaultdict(Counter))  # selector -> category -> n
    groups: int = 0  # groups of >= 2 logged responses with a divergence position
    group_tokens: int = 0  # tokens in those groups' responses
    at_divergence_tokens: int = 0  # tokens at the divergence index in those responses
    group_picks: Counter = field(default_factory=Counter)  # selector -> picks in those responses
    at_divergence: Counter = field(default_factory=Counter)  # selector -> picks at the index

    def category_shares(self) -> tuple[list[str], dict[str, dict[str, float]]]:
        """(categories, {"all tokens" | selector: {category: share}})."""
        cats = sorted(self.tokens, key=lambda c: -self.tokens[c])
        out = {"all tokens": _shares(self.tokens, cats)}
        for name, counter in sorted(self.picks.items()):
            out[name] = _shares(counter, cats)
        return cats, out

    def divergence_shares(self) -> dict[str, tuple[float, int]]:
        """{"all tokens" | selector: (share at the first divergence position, picks counted)}."""
        out = {
            "all tokens": (_ratio(self.at_divergence_tokens, self.group_tokens), self.group_tokens)
        }
        for name in sorted(self.group_picks):
            total = self.group_picks[name]
            out[name] = (_ratio(self.at_divergence[name], total), total)
        return out


def _ratio(a: int, b: int) -> float:
    return a / b if b else float("nan")


def _shares(counter: Counter, cats: list[str]) -> dict[str, float]:
    total = sum(counter.values())
    return {c: _ratio(counter.get(c, 0), total) for c in cats}


def pick_evidence(
    records: Iterable[dict], categorize: Categorize = generic_categories
) -> PickEvidence:
    """Category and divergence counts over samples.jsonl records (see the module docstring).
    Records from several runs may be pooled: groups are keyed by (run, step, prompt) when a record
    carries "run", else by (step, prompt)."""
    ev = PickEvidence()
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for rec in records:
        tokens = rec.get("tokens") or []
        labels = categorize(list(tokens))
        ev.tokens.update(labels)
        for name, mask in (rec.get("selected") or {}).items():
            ev.picks[name].update(lab for lab, m in zip(labels, mask, strict=False) if m)
        groups[(rec.get("run"), rec.get("step"), rec.get("prompt"))].append(rec)
    for members in groups.values():
        index = first_divergence([m.get("tokens") or [] for m in members])
        if index is None:
            continue
        ev.groups += 1
        for m in members:
            ev.group_tokens += len(m.get("tokens") or [])
            ev.at_divergence_tokens += int(index < len(m.get("tokens") or []))
            for name, mask in (m.get("selected") or {}).items():
                ev.group_picks[name] += sum(mask)
                ev.at_divergence[name] += int(index < len(mask) and bool(mask[index]))
    return ev


def run_records(runs) -> list[dict]:
    """samples.jsonl records of report Runs, each tagged with its run directory as "run"."""
    out = []
    for run in runs:
        if run.samples_path.exists():
            out += [{**rec, "run": str(run.path)} for rec in read_jsonl(run.samples_path)]
    return out


def write_section(doc, runs) -> dict | None:
    """Add "Where the picks fall" to a report Document; returns its numbers (None: no samples)."""
    records = run_records(runs)
    if not records:
        return None
    tasks = {flat_config(r.config).get("task") for r in runs}
    categorize = task_categorizer(tasks.pop() if len(tasks) == 1 else None)
    ev = pick_evidence(records, categorize)
    cats, shares = ev.category_shares()
    doc.heading("Where the picks fall")
    doc.para(
        f"From samples.jsonl ({len(records)} logged responses, all runs pooled; each run records "
        "the ICT, 20-Entropy and STAPO selections and its own method's). Share of each selector's "
        "picks per token category, next to the share of all response tokens:"
    )
    doc.table(
        ["selector", *cats],
        [[name, *(f"{row[c]:.2f}" for c in cats)] for name, row in shares.items()],
    )
    div = ev.divergence_shares()
    doc.para(
        f"First divergence position: the first token where a logged group's responses (same "
        f"prompt, same step; {ev.groups} groups) do not all agree. Share of each selector's picks "
        "at that position (picks counted in brackets), next to the share of tokens there:"
    )
    doc.table(
        ["selector", "share at first divergence", "picks"],
        [[name, f"{share:.3f}", str(n)] for name, (share, n) in div.items()],
    )
    return {
        "categories": shares,
        "divergence": {k: v[0] for k, v in div.items()},
        "groups": ev.groups,
    }
