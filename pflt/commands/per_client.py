"""``pflt per-client``: every client's test accuracy in a run, drawn and summarised.

Examples::

    pflt per-client runs/pfedme                        # every model, last evaluation
    pflt per-client runs/pfedme runs/fedavg --model personalized --out per_client.png

``pflt run`` stores each evaluated model's accuracy on every client's test split
(``<model>_client_accuracy`` in ``history.json``); the summary shows only their weighted and
plain means and the 5 % tails. This command draws them: per run and model, the clients'
accuracies sorted from worst to best (the x axis is the fraction of clients, so runs with
different N share it), and prints the quantiles (min, 10 %, median, 90 %, max). Without
``--model`` every model the run evaluated; ``--round`` picks an evaluated round (default:
the last). Writes the PNG (``--out``, default ``per_client.png``) and a CSV beside it with one
row per run, model and client.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from pflt.cli import UserError
from pflt.out_lock import out_path

SUFFIX = "_client_accuracy"
QUANTILES = (0.0, 0.1, 0.5, 0.9, 1.0)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "per-client", help="draw every client's test accuracy of runs (sorted, with quantiles)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="directories written by pflt run")
    p.add_argument("--model", action="append", default=None,
                   help="an evaluated model (personalized, global, …); repeatable; "
                        "default: every model the run evaluated")
    p.add_argument("--round", type=int, default=None,
                   help="an evaluated round (default: the last)")
    p.add_argument("--out", type=out_path, default=Path("per_client.png"),
                   help="the PNG to write; the CSV goes beside it (default: per_client.png)")
    p.set_defaults(func=run)


def client_accuracies(entries: list[dict], models: list[str] | None, round_: int | None,
                      where: str) -> tuple[int, dict[str, list[float]]]:
    """``(round, {model: accuracies of every client})`` of the entry at ``round_`` (default:
    the last one that stored per-client accuracies)."""
    stored = [e for e in entries if any(k.endswith(SUFFIX) for k in e)]
    if not stored:
        raise UserError(f"{where}: no per-client accuracies in its history")
    if round_ is None:
        entry = stored[-1]
    else:
        entry = next((e for e in stored if e.get("round") == round_), None)
        if entry is None:
            raise UserError(f"{where}: round {round_} was not evaluated; evaluated: "
                            + ", ".join(str(e.get("round")) for e in stored))
    found = {k[:-len(SUFFIX)]: [float(v) for v in entry[k]] for k in entry
             if k.endswith(SUFFIX) and isinstance(entry[k], list)}
    if models:
        missing = sorted(set(models) - set(found))
        if missing:
            raise UserError(f"{where}: no model {', '.join(missing)} in round "
                            f"{entry.get('round')}; evaluated: {', '.join(sorted(found))}")
        found = {m: found[m] for m in models}
    return int(entry.get("round", -1)), found


def quantile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolation quantile of an ascending list (numpy's default rule)."""
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (pos - lo) * (sorted_values[hi] - sorted_values[lo])


def draw(curves: list[tuple[str, list[float]]], path: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for label, values in curves:
        ordered = sorted(values)
        n = len(ordered)
        xs = [(i + 0.5) / n for i in range(n)]
        ax.step(xs, ordered, where="mid", label=f"{label} (N = {n})")
    ax.set(xlabel="fraction of clients (sorted by accuracy)", ylabel="client test accuracy",
           ylim=(0, 1.02), xlim=(0, 1), title="Per-client test accuracy, worst to best")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def run(args: argparse.Namespace) -> int:
    from pflt.run_dirs import load_run

    curves, rows = [], []
    for where in args.runs:
        try:
            r = load_run(where)
        except (FileNotFoundError, ValueError) as exc:
            raise UserError(str(exc)) from None
        round_, found = client_accuracies(r.entries, args.model, args.round, where)
        for model, values in found.items():
            label = f"{where} {model} (round {round_})"
            curves.append((label, values))
            rows += [{"run": where, "model": model, "round": round_, "client": i,
                      "accuracy": v} for i, v in enumerate(values)]
            ordered = sorted(values)
            print(f"{label}: " + ", ".join(f"{int(q * 100)}% {quantile(ordered, q):.4f}"
                                           for q in QUANTILES))
    png = draw(curves, Path(args.out))
    with png.with_suffix(".csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["run", "model", "round", "client", "accuracy"])
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {png} and {png.with_suffix('.csv')}")
    return 0
