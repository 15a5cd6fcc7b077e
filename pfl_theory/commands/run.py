"""``pflt run``: train a registered algorithm on a federation and save its history.

Every hyper-parameter of every registered algorithm is an option (``--lam``, ``--lr``,
``--personal-lr``, ``--inner-steps`` …); an option that the chosen algorithm does not have
is an error.  Defaults are the algorithm's own (for ``pfedme``: pFedMe's synthetic setting
λ=20, η=0.005, η_p=0.01, K=5, R=20, |D|=20, β=1, S=10).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from pfl_theory.cli import UserError


def _hp_options() -> dict[str, tuple[type, str, list[str]]]:
    from algorithms.base import hyperparameters, registry

    options: dict[str, tuple[type, str, list[str]]] = {}
    for name, cls in registry().items():
        for f in hyperparameters(cls):
            kind = type(f.default) if f.default is not None else str
            if f.name in options:
                options[f.name][2].append(name)
            else:
                options[f.name] = (kind, f.metadata.get("help", ""), [name])
    return options


def _bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


def add_parser(sub) -> None:
    from algorithms.base import registry

    p = sub.add_parser("run", help="train an algorithm on a federation; write history.json/csv",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_argument_group("run")
    g.add_argument("--algorithm", default="pfedme", help=f"one of: {', '.join(registry())}")
    g.add_argument("--model", default="mlr", choices=["mlr", "dnn", "cnn"], help="model (default mlr)")
    g.add_argument("--hidden", type=int, default=None, help="hidden width of dnn/cnn (dnn default 20)")
    g.add_argument("--l2", type=float, default=0.0, help="ℓ2 coefficient of the model loss")
    g.add_argument("--rounds", type=int, default=50, help="communication rounds T (default 50)")
    g.add_argument("--seed", type=int, default=0, help="seed for data, init and sampling")
    g.add_argument("--eval-every", type=int, default=1, help="evaluate every k rounds")
    g.add_argument("--out", default="runs/latest", help="output directory (default runs/latest)")
    g.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    g.add_argument("--dtype", default="float32", choices=["float32", "float64"], help="float type")
    g.add_argument("--threads", type=int, default=None, help="torch CPU threads (default torch's)")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")
    d = p.add_argument_group("data")
    d.add_argument("--data", default="synthetic",
                   help="synthetic | synthetic-iid | digits | mnist5k | mnist:DIR | fmnist:DIR"
                        " | emnist:DIR | cifar10:DIR | cifar100:DIR (default synthetic)")
    d.add_argument("--clients", type=int, default=100, help="number of clients N (default 100)")
    d.add_argument("--synthetic-alpha", type=float, default=0.5, help="Synthetic(α, β): α")
    d.add_argument("--synthetic-beta", type=float, default=0.5, help="Synthetic(α, β): β")
    d.add_argument("--partition", default="label-skew", choices=["label-skew", "dirichlet", "iid"],
                   help="partition of real data (default label-skew)")
    d.add_argument("--classes-per-client", type=int, default=2, help="label-skew: labels per client")
    d.add_argument("--size-range", type=int, nargs=2, default=None, metavar=("LO", "HI"),
                   help="label-skew: client sizes uniform in [LO, HI]")
    d.add_argument("--dirichlet-alpha", type=float, default=0.5, help="dirichlet concentration")
    d.add_argument("--train-fraction", type=float, default=0.75, help="per-client train share")
    d.add_argument("--max-client-size", type=int, default=None, help="cap samples per client")
    h = p.add_argument_group("algorithm hyper-parameters (default: the algorithm's own)")
    for name, (kind, text, owners) in sorted(_hp_options().items()):
        conv = _bool if kind is bool else kind
        h.add_argument(f"--{name.replace('_', '-')}", dest=f"hp_{name}", type=conv, default=None,
                       help=f"{text} [{', '.join(owners)}]")
    p.set_defaults(func=run)


def run(args) -> int:
    from algorithms.base import get_algorithm, hyperparameters
    from algorithms.models import build_model
    from algorithms.runner import NonFiniteError, run as run_rounds
    from synthetic.sources import DataSpec, build_federation

    cls = get_algorithm(args.algorithm)
    own = {f.name for f in hyperparameters(cls)}
    given = {k[3:]: v for k, v in vars(args).items() if k.startswith("hp_") and v is not None}
    foreign = sorted(set(given) - own)
    if foreign:
        raise UserError(f"option(s) {', '.join('--' + f.replace('_', '-') for f in foreign)} "
                        f"do not apply to {args.algorithm}")
    for name, value in (("rounds", args.rounds), ("clients", args.clients),
                        ("eval-every", args.eval_every)):
        if value < 1:
            raise UserError(f"--{name} must be >= 1, got {value}")
    algorithm = cls(**given)
    if args.threads:
        torch.set_num_threads(args.threads)
    spec = DataSpec(data=args.data, num_clients=args.clients, alpha=args.synthetic_alpha,
                    beta=args.synthetic_beta, partition=args.partition,
                    classes_per_client=args.classes_per_client,
                    size_range=tuple(args.size_range) if args.size_range else None,
                    dirichlet_alpha=args.dirichlet_alpha, train_fraction=args.train_fraction,
                    max_client_size=args.max_client_size, seed=args.seed)
    dtype = torch.float64 if args.dtype == "float64" else torch.float32
    fed = build_federation(spec, device=args.device, dtype=dtype)
    model = build_model(args.model, fed, hidden=args.hidden, l2=args.l2)
    print(f"{args.algorithm} on {fed.name}: N={fed.num_clients}, "
          f"{int(fed.train.counts.sum())} train / {int(fed.test.counts.sum())} test samples, "
          f"model={args.model}, device={fed.device}", file=sys.stderr)
    try:
        result = run_rounds(algorithm, fed, model, rounds=args.rounds, seed=args.seed,
                            eval_every=args.eval_every, out_dir=args.out,
                            progress=not args.no_progress,
                            config={"data": vars(spec) | {"size_range": spec.size_range},
                                    "model_options": {"hidden": args.hidden, "l2": args.l2}})
    except NonFiniteError as exc:
        print(f"pflt run: {exc} (history up to round {exc.round - 1} in {args.out})",
              file=sys.stderr)
        return 1
    last = result.history.last()
    summary = {k: v for k, v in last.items() if not isinstance(v, list)}
    Path(args.out, "summary.json").write_text(json.dumps(summary, indent=1))
    _print_summary(last, args.out)
    return 0


def _print_summary(entry: dict, out: str) -> None:
    names = [k[:-len("_accuracy")] for k, v in entry.items()
             if k.endswith("_accuracy") and isinstance(v, float)]
    print(f"\nround {entry['round']}  ({entry.get('wall_seconds', 0):.1f} s)")
    print(f"{'model':<14}{'accuracy':>10}{'mean':>9}{'low5%':>9}{'top5%':>9}{'test loss':>11}")
    for n in names:
        print(f"{n:<14}{entry[n + '_accuracy']:>10.4f}{entry[n + '_accuracy_mean']:>9.4f}"
              f"{entry[n + '_accuracy_low5']:>9.4f}{entry[n + '_accuracy_top5']:>9.4f}"
              f"{entry[n + '_loss']:>11.4f}")
    print(f"results: {out}/history.json, {out}/history.csv, {out}/summary.json")
