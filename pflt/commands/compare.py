"""``pflt compare``: which method is best — a table of mean ± sd over seeds, and curves.

Examples::

    pflt compare runs/fedavg-s0 runs/fedavg-s1 runs/pfedme-s0 runs/pfedme-s1
    pflt compare runs/sweep --metric personalized_accuracy --at best --out cmp/

Each RUN_DIR is a directory written by ``pflt run`` (a ``pflt sweep`` output directory stands
for all its points).  Runs whose configurations agree except for the seed form one group.

The table has one row per configuration: its runs (finished / unfinished / diverged), its
**headline** model — the model its paper reports (pFedMe, Per-FedAvg, CGPFL …:
``personalized``; FedAvg: ``global``; see :func:`pflt.aggregate.headline_model`) — and the
headline accuracy, then each ``--metric``; every value twice, at the **last** evaluated round
and at the **best** one (per run the best evaluated round — highest accuracy, lowest loss —
then mean ± sd over seeds; the papers' tables report the best round, chosen on the test
split).  ``--at last`` or ``--at best`` keeps one.  The configuration with the best headline
accuracy is printed under the table, with the configurations it is *within noise* of (its
mean exceeds theirs by less than two combined standard errors over seeds: no single best) or
a note that it is ahead of all of them; with one seed the noise is unknown and it says so.

Only finished runs are averaged: a run still being written (its ``.lock`` held), killed, or
short of its configured rounds is counted as *unfinished* and a diverged one as *diverged*,
each named on stderr.  The same run given twice (``a a``, ``a ./a``, a link to ``a``) is
counted once, with a note; so is a copy of a run (another directory with the same
configuration and seed: it is not a second seed).

Writes into ``--out`` (default ``compare_out``, locked while writing, each file atomically):
``compare.csv`` (numeric, one row per configuration × metric × at: ``mean``, ``sd``, ``n``
in their own columns; the headline rows have metric ``headline_accuracy`` / ``headline_loss``
and name the model), ``compare.md`` (the table) and ``compare.png`` (one panel per metric,
headline accuracy first, labelled axes, one legend for the figure).  ``--metric`` (a name or
glob, repeatable) selects the metrics; by default every ``*_accuracy`` and ``*_loss``.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import sys
from pathlib import Path

from pflt.aggregate import (AT, Group, Run, deduplicate, expand_run_dirs, format_mean_sd,
                            group_runs, load_run, metric_names, models_of)
from pflt.run_dirs import deduplicate_runs
from pflt.out_lock import out_path

HEADLINE = ("headline_accuracy", "headline_loss")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "compare", help="which method is best: mean ± sd over seeds (last and best round), "
        "headline model per algorithm, curves", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="directories written by pflt run")
    p.add_argument("--metric", action="append", default=None, metavar="M",
                   help="metric name or glob (repeatable; default: every *_accuracy, *_loss)")
    p.add_argument("--at", choices=AT, default=None,
                   help="the last evaluated round or each run's best one (default: both)")
    p.add_argument("--out", type=out_path, default=Path("compare_out"),
                   help="output directory (default compare_out)")
    p.set_defaults(func=run)


def _headline_metric(g: Group, kind: str) -> str | None:
    model = g.headline()
    return f"{model}_{kind}" if model else None


def _stats(g: Group, metric: str, at: str) -> tuple[float, float, int]:
    if metric in HEADLINE:
        real = _headline_metric(g, metric.split("_", 1)[1])
        return g.stats(real, at) if real else (math.nan, math.nan, 0)
    return g.stats(metric, at)


def _col(metric: str, at: str, ats: tuple[str, ...]) -> str:
    return metric if len(ats) == 1 else f"{metric} ({at})"


def table_rows(groups: list[Group], metrics: list[str], ats: tuple[str, ...] = AT
               ) -> list[dict[str, str]]:
    """One row per configuration: label, run counts, headline model, then mean ± sd over
    the finished seeds of the headline accuracy and each metric, at each of ``ats``."""
    rows = []
    for g in groups:
        row = {"configuration": g.label, "finished": str(g.count("finished")),
               "unfinished": str(g.count("unfinished") + g.count("running")),
               "diverged": str(g.count("diverged")), "headline": g.headline() or "–"}
        for metric in ("headline_accuracy", *metrics):
            for at in ats:
                row[_col(metric, at, ats)] = format_mean_sd(*_stats(g, metric, at))
        rows.append(row)
    return rows


def csv_rows(groups: list[Group], metrics: list[str], ats: tuple[str, ...] = AT
             ) -> list[dict[str, object]]:
    """``compare.csv``: one numeric row per configuration × metric × at (empty ``mean`` /
    ``sd`` when undefined)."""
    rows = []
    for g in groups:
        for metric in (*HEADLINE, *metrics):
            if metric in HEADLINE:
                model = g.headline() or ""
            else:
                model = next((m for m in models_of(g.runs) if metric.startswith(m + "_")), "")
            for at in ats:
                mean, sd, n = _stats(g, metric, at)
                rows.append({"configuration": g.label, "algorithm": g.algorithm,
                             "metric": metric, "model": model, "at": at,
                             "mean": "" if n == 0 else repr(mean),
                             "sd": "" if n < 2 else repr(sd), "n": n,
                             "finished": g.count("finished"),
                             "unfinished": g.count("unfinished") + g.count("running"),
                             "diverged": g.count("diverged")})
    return rows


def markdown_table(rows: list[dict[str, str]]) -> str:
    """A GitHub-flavoured Markdown table of ``rows``."""
    cols = list(rows[0])
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(r[c] for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def best_line(groups: list[Group], ats: tuple[str, ...]) -> list[str]:
    """``best headline accuracy (at): <configuration> (<model>) mean ± sd, n seeds``."""
    lines = []
    for at in ats:
        scored = [(s, g) for g in groups if (s := _stats(g, "headline_accuracy", at))[2] > 0]
        if not scored:
            continue
        (mean, sd, n), g = max(scored, key=lambda sg: sg[0][0])
        lines.append(f"best headline accuracy ({at} round): {g.label} ({g.headline()} model) "
                     f"{format_mean_sd(mean, sd, n)} over {n} seed(s)"
                     + noise_note((mean, sd, n), [(s, o) for s, o in scored if o is not g]))
    return lines


def noise_note(best: tuple[float, float, int], others: list[tuple[tuple, Group]]) -> str:
    """Whether the best configuration is ahead of each other one by more than two combined
    standard errors over seeds (:func:`paper_figures.leaderboard_table.ahead`), or names
    those it is within the seed noise of."""
    from paper_figures.leaderboard_table import ahead

    if not others:
        return ""
    if best[2] < 2 or any(s[2] < 2 for s, _ in others):
        return "; one seed: the seed noise is unknown, run more seeds before calling it best"
    close = [(s, o) for s, o in others if not ahead(best, s)]
    if not close:
        return "; ahead of every other configuration by more than 2 standard errors"
    return ("; within noise (< 2 combined standard errors) of " + ", ".join(
        f"{o.label} {format_mean_sd(*s)}" for s, o in sorted(close, key=lambda so: -so[0][0]))
        + ": no single best")


def _series(r: Run, metric: str) -> dict[int, float]:
    return {int(e["round"]): float(e[metric]) for e in r.entries
            if isinstance(e.get(metric), (int, float)) and not isinstance(e.get(metric), bool)}


def plot(groups: list[Group], metrics: list[str], path: Path) -> Path:
    """One panel per metric (the headline accuracy first), every run a thin curve over
    rounds coloured by configuration (unfinished ones dashed), the mean over finished seeds
    thick; axes labelled, one legend for the figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    from pfl_theory.safe_files import atomic_save

    panels = ["headline_accuracy", *metrics]
    cols = min(3, len(panels))
    nrows = -(-len(panels) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(5 * cols, 3.6 * nrows), squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    handles: dict[str, object] = {}
    for ax, panel in zip(axes.flat, panels):
        for gi, g in enumerate(groups):
            colour = colours[gi % len(colours)]
            metric = _headline_metric(g, "accuracy") if panel == "headline_accuracy" else panel
            if metric is None:
                continue
            finished = []
            faint = sum(r.finished for r in g.runs) > 1     # a thick mean curve is drawn
            for r in g.runs:
                pts = _series(r, metric)
                if not pts:
                    continue
                if r.finished:
                    finished.append(pts)
                line, = ax.plot(list(pts), list(pts.values()), color=colour, lw=0.9,
                                alpha=0.35 if faint else 0.9,
                                ls="-" if r.finished else "--")
                handles.setdefault(g.label, line)
            if len(finished) > 1:  # the mean over seeds, on the rounds every seed evaluated
                rounds = sorted(set.intersection(*(set(p) for p in finished)))
                mean = [sum(p[t] for p in finished) / len(finished) for t in rounds]
                line, = ax.plot(rounds, mean, color=colour, lw=2.0)
                handles[g.label] = line
        title = ("headline accuracy (each algorithm's reported model)"
                 if panel == "headline_accuracy" else panel)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("round")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("accuracy" if panel == "headline_accuracy" else panel)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    labels = [f"{lab}" for lab in handles]
    if handles:
        fig.legend(list(handles.values()), labels, loc="lower center", fontsize=8,
                   ncol=min(4, len(labels)), frameon=False,
                   title="configuration (thick: mean over finished seeds; dashed: unfinished)",
                   title_fontsize=8)
    fig.tight_layout(rect=(0, 0.06 + 0.03 * (len(labels) // 4), 1, 1))
    atomic_save(path, lambda fh: fig.savefig(fh, format="png", dpi=110))
    plt.close(fig)
    return path


def run(args: argparse.Namespace) -> int:
    from pfl_theory.safe_files import atomic_open, atomic_write_text
    from pflt.out_lock import check_out_dir, out_lock

    out = check_out_dir(args.out)
    paths, notes = deduplicate(expand_run_dirs(args.runs))
    for note in notes:
        print(note, file=sys.stderr)
    runs, copies = deduplicate_runs([load_run(p) for p in paths])
    for note in copies:
        print(note, file=sys.stderr)
    for r in runs:
        if not r.finished:
            print(f"note: {r.path} is {r.status} ({r.why}): not averaged", file=sys.stderr)
    patterns = args.metric or [None]
    metrics: list[str] = []
    for pat in patterns:
        metrics += [m for m in metric_names(runs, pat) if m not in metrics]
    if not metrics:
        raise ValueError("the runs have no scalar metric to compare (empty histories?)")
    ats = (args.at,) if args.at else AT
    groups = group_runs(runs)
    rows = table_rows(groups, metrics, ats)
    table = markdown_table(rows)
    best = best_line(groups, ats)
    finished = sum(r.finished for r in runs)
    with out_lock(out):
        text = io.StringIO()
        numeric = csv_rows(groups, metrics, ats)
        with atomic_open(out / "compare.csv", "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(numeric[0]))
            writer.writeheader()
            writer.writerows(numeric)
        text.write(f"Mean ± sd over the finished seeds ({finished} of {len(runs)} runs, "
                   f"{len(groups)} configurations); last = the final evaluation, best = each "
                   f"run's best evaluated round; headline = the model the algorithm's paper "
                   f"reports\n\n{table}\n")
        text.writelines(f"\n{line}\n" for line in best)
        atomic_write_text(out / "compare.md", text.getvalue())
        plot(groups, metrics, out / "compare.png")
    print(table)
    for line in best:
        print(line)
    print(f"{len(runs)} run(s) ({finished} finished), {len(groups)} configuration(s): "
          f"{out}/compare.png, {out}/compare.csv, {out}/compare.md")
    return 0
