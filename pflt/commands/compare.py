"""``pflt compare``: several runs on one figure, and a table of mean ± sd over seeds.

Examples::

    pflt compare runs/fedavg-s0 runs/fedavg-s1 runs/pfedme-s0 runs/pfedme-s1
    pflt compare runs/sweep --metric personalized_accuracy --out cmp/

Each RUN_DIR is a directory written by ``pflt run`` (a ``pflt sweep`` output directory stands
for all its points).  Runs whose configurations agree except for the seed form one group.
Writes into ``--out`` (default ``compare_out``): ``compare.png`` (one panel per metric, one
curve per run over rounds, one colour per configuration), ``compare.csv`` and ``compare.md``
(final value of every metric per configuration: mean ± sd over seeds and the number of
seeds) and prints the table.  ``--metric`` (a name or glob, repeatable) selects the metrics;
by default every ``*_accuracy`` and ``*_loss``.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from pflt.aggregate import (Group, Run, expand_run_dirs, format_mean_sd, group_runs,
                            load_run, metric_names)
from pflt.out_lock import out_path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "compare", help="plot several runs over rounds; table of mean ± sd over seeds",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="directories written by pflt run")
    p.add_argument("--metric", action="append", default=None, metavar="M",
                   help="metric name or glob (repeatable; default: every *_accuracy, *_loss)")
    p.add_argument("--out", type=out_path, default=Path("compare_out"),
                   help="output directory (default compare_out)")
    p.set_defaults(func=run)


def table_rows(groups: list[Group], metrics: list[str]) -> list[dict[str, str]]:
    """One row per configuration: label, seeds, diverged count, mean ± sd per metric."""
    rows = []
    for g in groups:
        row = {"configuration": g.label, "seeds": str(len(g.runs)),
               "diverged": str(sum(r.diverged for r in g.runs))}
        for m in metrics:
            row[m] = format_mean_sd(*g.stats(m))
        rows.append(row)
    return rows


def markdown_table(rows: list[dict[str, str]]) -> str:
    """A GitHub-flavoured Markdown table of ``rows``."""
    cols = list(rows[0])
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(r[c] for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def plot(runs_by_group: list[Group], metrics: list[str], path: Path) -> Path:
    """One panel per metric; every run a curve over rounds, coloured by configuration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(3, len(metrics))
    rows = -(-len(metrics) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, metric in zip(axes.flat, metrics):
        for gi, g in enumerate(runs_by_group):
            colour = colours[gi % len(colours)]
            series = []
            for r in g.runs:
                pts = dict((e["round"], e[metric]) for e in r.entries
                           if isinstance(e.get(metric), (int, float)))
                if pts:
                    series.append(pts)
                    ax.plot(list(pts), list(pts.values()), color=colour,
                            alpha=0.35 if len(g.runs) > 1 else 0.9, lw=0.9,
                            label=None if len(g.runs) > 1 else g.label)
            if len(series) > 1:  # the mean over seeds, on the rounds every seed evaluated
                rounds = sorted(set.intersection(*(set(p) for p in series)))
                mean = [sum(p[t] for p in series) / len(series) for t in rounds]
                ax.plot(rounds, mean, color=colour, lw=2.0,
                        label=f"{g.label} (mean of {len(series)})")
        ax.set_title(metric)
        ax.set_xlabel("round")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(metrics):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run(args: argparse.Namespace) -> int:
    from pflt.out_lock import check_out_dir

    out = check_out_dir(args.out)
    runs: list[Run] = [load_run(p) for p in expand_run_dirs(args.runs)]
    patterns = args.metric or [None]
    metrics: list[str] = []
    for pat in patterns:
        metrics += [m for m in metric_names(runs, pat) if m not in metrics]
    if not metrics:
        raise ValueError("the runs have no scalar metric to compare (empty histories?)")
    groups = group_runs(runs)
    rows = table_rows(groups, metrics)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "compare.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    table = markdown_table(rows)
    (out / "compare.md").write_text(
        f"Final values, mean ± sd over seeds ({len(runs)} runs, {len(groups)} "
        f"configurations)\n\n{table}\n")
    plot(groups, metrics, out / "compare.png")
    print(table)
    print(f"{len(runs)} run(s), {len(groups)} configuration(s): {out}/compare.png, "
          f"{out}/compare.csv, {out}/compare.md")
    return 0
