"""`ict stats`: token statistics and selections on a small random batch, no model needed.

A first-contact demo of the math in docs/METHOD.md: it draws random logits with a few peaked
("confident") and a few flat ("branching") positions for the responses to one prompt, computes H,
H2, p(y) and the JS score, and shows which positions each method keeps (ict.step.select_step,
the selection a training step runs: `ict` is the paper's, scored against the position-aligned
mean of the responses).
"""

from __future__ import annotations

import argparse


def add_parser(subparsers, summary: str) -> None:
    parser = subparsers.add_parser(
        "stats",
        help=summary,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--batch", type=int, default=2, help="responses in the batch (default 2)")
    parser.add_argument("--length", type=int, default=12, help="tokens per response (default 12)")
    parser.add_argument("--vocab", type=int, default=50, help="vocabulary size (default 50)")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature T")
    parser.add_argument(
        "--reference",
        default=None,
        help="JS reference: group_position (the paper's, default), batch_mean, group_mean, "
        "sequence_mean, previous_token",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import torch

    from ict.errors import ConfigError
    from ict.methods import MethodOptions, resolve_method
    from ict.stats import REFERENCES, token_stats
    from ict.step import StepInputs, select_method

    options = MethodOptions(method="ict", reference=args.reference)
    ict = resolve_method(options)
    if ict.reference not in REFERENCES or ict.reference == "reference_policy":
        choices = ", ".join(r for r in REFERENCES if r != "reference_policy")
        raise ConfigError(
            f"--reference {args.reference!r} is not available here; choose one of {choices}"
        )
    if min(args.batch, args.length, args.vocab) < 2:
        raise ConfigError("--batch, --length and --vocab must each be at least 2")

    generator = torch.Generator().manual_seed(args.seed)
    shape = (args.batch, args.length, args.vocab)
    # every third position is flat (low scale), the rest peaked (high scale): two kinds of tokens
    scale = torch.where(torch.arange(args.length) % 3 == 0, 0.3, 4.0)[None, :, None]
    logits = torch.randn(shape, generator=generator) * scale
    probs = torch.softmax(logits / args.temperature, dim=-1)
    tokens = torch.multinomial(probs.reshape(-1, args.vocab), 1, generator=generator).reshape(
        shape[:2]
    )
    mask = torch.ones(shape[:2], dtype=torch.bool)
    mask[-1, -2:] = False  # padding at the end of the last response
    advantages = torch.linspace(-1, 1, args.batch)

    stats = token_stats(
        logits,
        tokens,
        mask,
        temperature=args.temperature,
        reference=ict.reference,
        group_ids=torch.zeros(args.batch, dtype=torch.long),
    )
    inputs = StepInputs(mask, stats, advantages, tokens)
    selections = {
        name: select_method(
            resolve_method(MethodOptions(method=name, reference=args.reference)),
            options,
            inputs,
            seed=args.seed,
        )  # fmt: skip
        for name in ("ict", "entropy", "stapo", "random_sequence")
    }

    print(
        f"random batch: {args.batch} responses x {args.length} tokens, vocabulary {args.vocab}, "
        f"T={args.temperature}, seed {args.seed}, JS reference {ict.reference} (the responses "
        "answer one prompt)"
    )
    print(
        "positions t % 3 == 0 have flat logits (x0.3), the others peaked ones (x4); '.' = padding\n"
    )
    header = f"{'resp':>4} {'t':>3} {'H':>7} {'H2':>7} {'p(y)':>7} {'JS':>7}  " + " ".join(
        f"{name:>{max(7, len(name))}}" for name in selections
    )  # method names; random_sequence is the paper's random 10% of each response
    print(header)
    print("-" * len(header))
    for b in range(args.batch):
        for t in range(args.length):
            if not mask[b, t]:
                print(f"{b:>4} {t:>3} {'.':>7}")
                continue
            marks = " ".join(
                f"{'x' if sel[b, t] else '':>{max(7, len(n))}}" for n, sel in selections.items()
            )
            print(
                f"{b:>4} {t:>3} {stats.entropy[b, t].item():7.3f} {stats.renyi2[b, t].item():7.3f} "
                f"{stats.prob[b, t].item():7.3f} {stats.js[b, t].item():7.3f}  {marks}"
            )
    n_valid = int(mask.sum())
    print(
        "\nselected / valid: "
        + ", ".join(f"{n} {int(s.sum())}/{n_valid}" for n, s in selections.items())
    )
    print(
        "H and H2 in nats; JS in nats, in [0, log 2 = 0.693]; stapo keeps all but spurious tokens."
    )
    return 0
