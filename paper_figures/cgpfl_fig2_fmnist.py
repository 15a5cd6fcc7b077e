"""CGPFL (IJCAI 2022) Fig. 2 on the real Fashion-MNIST: accuracy and loss against the round
for several K (MLR and DNN), beside CGPFL-Heur, pFedMe, Per-FedAvg and Ditto.

The runs are the cells of the reproduction ``cgpfl_fig2_fmnist``
(:mod:`verification.experiments.reproductions`: N = 40, α = 1, λ = 12, R = 10, S = 5,
lr = 0.005, T = 200).  Two steps, or one with ``--run``::

    pflt reproduce cgpfl_fig2_fmnist [--data-dir DIR] [--jobs 2]
    python -m paper_figures.cgpfl_fig2_fmnist [--out DIR]
    python -m paper_figures.cgpfl_fig2_fmnist --run [--data-dir DIR] [--rounds T] [--jobs J]

It reads the reproduction's CSV, each row's run directory (the ``--out`` of its command)
and that run's ``history.csv``; curves are the mean over the seeds present.  Writes
``cgpfl_fig2_fmnist.png`` (2 × 2: accuracy / test loss × MLR / DNN) and ``.csv`` (the
plotted points).  Not a ``pflt figures`` module (it needs the real data): no ``make``.
"""

from __future__ import annotations

import argparse
import csv
import shlex
import sys
from collections import defaultdict
from pathlib import Path

from paper_figures._style import save_figure

NAME = "cgpfl_fig2_fmnist"
DEFAULT_CSV = Path("paper_figures") / "results" / f"{NAME}.csv"


def curves(csv_path) -> dict:
    """``{(column, method): {"round": [...], "accuracy": [...], "loss": [...]}}`` — the
    mean over the CSV's seeds of each run's ``history.csv`` (accuracy, test loss of the
    row's evaluated model)."""
    from verification.experiments.reproduction_run import read_rows

    per = defaultdict(list)
    for row in read_rows(csv_path):
        if row.get("status", "ok") != "ok":
            continue
        argv = shlex.split(row["command"])
        run_dir = Path(argv[argv.index("--out") + 1])
        model = row["metric"].rsplit("_accuracy", 1)[0]
        with (run_dir / "history.csv").open(newline="") as fh:
            hist = [(int(h["round"]), float(h[f"{model}_accuracy"]), float(h[f"{model}_loss"]))
                    for h in csv.DictReader(fh)]
        per[(row.get("column") or row["model"], row["method"])].append(hist)
    out = {}
    for key, runs in per.items():
        common = sorted(set.intersection(*(set(r for r, _, _ in h) for h in runs)))
        acc = {t: [] for t in common}
        loss = {t: [] for t in common}
        for h in runs:
            for t, a, lo in h:
                if t in acc:
                    acc[t].append(a)
                    loss[t].append(lo)
        out[key] = {"round": common, "seeds": len(runs),
                    "accuracy": [sum(acc[t]) / len(acc[t]) for t in common],
                    "loss": [sum(loss[t]) / len(loss[t]) for t in common]}
    return out


def plot(data: dict, out_dir) -> list[Path]:
    """``NAME.png`` and ``NAME.csv`` of :func:`curves`'s output in ``out_dir``."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path = out_dir / f"{NAME}.csv"
    with csv_path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["column", "method", "round", "accuracy", "loss", "seeds"])
        for (col, method), c in sorted(data.items()):
            for t, a, lo in zip(c["round"], c["accuracy"], c["loss"]):
                w.writerow([col, method, t, a, lo, c["seeds"]])
    columns = sorted({col for col, _ in data}, key=lambda c: ("dnn" in c, c))
    fig, axes = plt.subplots(2, max(1, len(columns)), figsize=(6 * max(1, len(columns)), 8),
                             squeeze=False)
    for j, col in enumerate(columns):
        for (c, method), cur in sorted(data.items()):
            if c != col:
                continue
            style = "-" if method.startswith("CGPFL") else "--"
            axes[0][j].plot(cur["round"], cur["accuracy"], style, label=method)
            axes[1][j].plot(cur["round"], cur["loss"], style, label=method)
        axes[0][j].set(title=f"Accuracy: {col}", xlabel="round", ylabel="test accuracy")
        axes[1][j].set(title=f"Loss: {col}", xlabel="round", ylabel="test loss")
        axes[0][j].legend(fontsize=8)
        axes[1][j].legend(fontsize=8)
    fig.suptitle("CGPFL Fig. 2 on Fashion-MNIST (N = 40, α = 1, λ = 12, R = 10, S = 5)")
    fig.tight_layout()
    png = out_dir / f"{NAME}.png"
    save_figure(fig, png, dpi=110)
    plt.close(fig)
    return [png, csv_path]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m paper_figures.cgpfl_fig2_fmnist",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--csv", default=str(DEFAULT_CSV), help="the reproduction's CSV")
    ap.add_argument("--out", default="figures_out", help="where the PNG and CSV go")
    ap.add_argument("--run", action="store_true", help="first run the missing cells")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--seeds", type=int, nargs="+", default=None)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--runs-dir", default=str(Path("runs") / "reproduce"))
    args = ap.parse_args(argv)
    if args.run:
        from verification.experiments.reproduction import cells
        from verification.experiments.reproduction_run import run_cells
        from verification.experiments.reproductions import get_reproduction

        rep = get_reproduction(NAME)
        run_cells(cells(rep, seeds=args.seeds, rounds=args.rounds), args.csv, args.runs_dir,
                  data_dir=args.data_dir, jobs=args.jobs)
    if not Path(args.csv).is_file():
        print(f"{args.csv}: absent; run `pflt reproduce {NAME} [--data-dir DIR]` first "
              f"(or add --run)", file=sys.stderr)
        return 2
    for p in plot(curves(args.csv), args.out):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
