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
the last). Writes the PNG and a CSV with one row per run, model and client: ``--out X.png``
writes ``X.png`` and ``X.csv``; ``--out DIR`` (a folder: no extension, or an existing
directory) writes ``DIR/per_client.png`` and ``DIR/per_client.csv``; the default is the
current directory's ``per_client.png``/``.csv``.  Any other ``--out`` (another extension, an
existing file that is not a ``.png``, a device) is refused before anything is read.

The accuracies are checked first: every client's a number in [0, 1], one per client of the
run (``num_clients`` of its configuration); a hand-edited or damaged history is one line
naming its file.
"""

from __future__ import annotations

import argparse
import csv
import math
from pathlib import Path

from pflt.cli import UserError
from pflt.out_lock import out_path

SUFFIX = "_client_accuracy"
QUANTILES = (0.0, 0.1, 0.5, 0.9, 1.0)
STEM = "per_client"
#: where no result is written: the system's device and kernel file systems
SYSTEM_DIRS = ("/dev", "/proc", "/sys")


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
    p.add_argument("--out", type=out_path, default=Path(f"{STEM}.png"),
                   help="X.png: writes X.png and X.csv; DIR (a folder): DIR/per_client.png "
                   "and DIR/per_client.csv (default: per_client.png in the current directory)")
    p.set_defaults(func=run)


def output_paths(out: Path) -> tuple[Path, Path]:
    """``(png, csv)`` of ``--out`` (module docstring); :class:`UserError` otherwise."""
    text = str(out)
    resolved = Path(out).expanduser().resolve()
    system = next((d for d in SYSTEM_DIRS
                   if resolved == Path(d) or Path(d) in resolved.parents), None)
    if system is not None:
        raise UserError(f"--out {text}: {system} is a system directory, not a place for "
                        f"results; give a folder or a .png file of your own")
    if out.suffix.lower() == ".png":
        if out.exists() and not out.is_file():
            raise UserError(f"--out {text} exists and is not a regular file")
        return out, out.with_suffix(".csv")
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {text} exists and is neither a directory nor a .png file")
    if out.suffix and not out.is_dir():
        raise UserError(f"--out {text}: give a folder (no extension) or a .png file (the CSV "
                        f"goes beside it), not a {out.suffix} file")
    return out / f"{STEM}.png", out / f"{STEM}.csv"


def checked_accuracies(values, key: str, clients, where: str) -> list[float]:
    """``values`` as floats, each a finite number in [0, 1], one per client (``clients``:
    the run's number, if known); :class:`UserError` naming ``where`` otherwise."""
    if not isinstance(values, list):
        raise UserError(f"{where}: {key} is not a list of accuracies")
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                or not 0.0 <= v <= 1.0:
            raise UserError(f"{where}: {key}[{i}] = {v!r} is not an accuracy (a number in "
                            f"[0, 1])")
    if isinstance(clients, int) and not isinstance(clients, bool) and len(values) != clients:
        raise UserError(f"{where}: {key} holds {len(values)} accuracies for a run of "
                        f"{clients} clients")
    if not values:
        raise UserError(f"{where}: {key} is empty")
    return [float(v) for v in values]


def client_accuracies(entries: list[dict], models: list[str] | None, round_: int | None,
                      where: str, clients: int | None = None
                      ) -> tuple[int, dict[str, list[float]]]:
    """``(round, {model: accuracies of every client})`` of the entry at ``round_`` (default:
    the last one that stored per-client accuracies), each checked
    (:func:`checked_accuracies`; ``clients``: the run's number of clients)."""
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
    found = {k[:-len(SUFFIX)]: entry[k] for k in entry if k.endswith(SUFFIX)}
    if models:
        missing = sorted(set(models) - set(found))
        if missing:
            raise UserError(f"{where}: no model {', '.join(missing)} in round "
                            f"{entry.get('round')}; evaluated: {', '.join(sorted(found))}")
        found = {m: found[m] for m in models}
    found = {m: checked_accuracies(v, m + SUFFIX, clients, where) for m, v in found.items()}
    return int(entry.get("round", -1)), found


def quantile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolation quantile of an ascending list (numpy's default rule)."""
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (pos - lo) * (sorted_values[hi] - sorted_values[lo])


def draw(curves: list[tuple[str, list[float]]], path: Path) -> Path:
    from pfl_theory.safe_files import atomic_save
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
    try:
        atomic_save(path, lambda fh: fig.savefig(fh, format="png", dpi=130))
    finally:
        plt.close(fig)
    return path


def _history_file(run_dir: Path) -> Path:
    """The file the entries were read from: ``history.jsonl`` (every evaluation) when the
    run has one, else ``history.json``."""
    from algorithms.engine.run_files import HISTORY_LINES

    lines = run_dir / HISTORY_LINES
    return lines if lines.is_file() else run_dir / "history.json"


def run(args: argparse.Namespace) -> int:
    from pfl_theory.safe_files import atomic_open
    from pflt.run_dirs import load_run

    png, csv_path = output_paths(Path(args.out))
    curves, rows = [], []
    for where in args.runs:
        try:
            r = load_run(where)
        except (FileNotFoundError, ValueError) as exc:
            raise UserError(str(exc)) from None
        round_, found = client_accuracies(r.entries, args.model, args.round,
                                          str(_history_file(Path(where))),
                                          r.config.get("num_clients"))
        for model, values in found.items():
            label = f"{where} {model} (round {round_})"
            curves.append((label, values))
            rows += [{"run": where, "model": model, "round": round_, "client": i,
                      "accuracy": v} for i, v in enumerate(values)]
            ordered = sorted(values)
            print(f"{label}: " + ", ".join(f"{int(q * 100)}% {quantile(ordered, q):.4f}"
                                           for q in QUANTILES))
    draw(curves, png)
    with atomic_open(csv_path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["run", "model", "round", "client", "accuracy"])
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {png} and {csv_path}")
    return 0
