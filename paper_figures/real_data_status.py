"""The papers' real-data tables: which are measured here, and the command for each.

One markdown row per (reproduction, column) of the registry
(:mod:`verification.experiments.reproductions`): paper, table, column, status and the
command.  Status comes from the reproduction's CSV in ``paper_figures/results/``:
``measured`` (every method of the column has a finished row: seeds and rounds say what ran),
``partial`` (some methods), or ``not run here`` — never a number that was not measured.
``python -m paper_figures.real_data_status`` writes ``paper_figures/results/real_data_status.md``
(the README's real-data table is this file's table).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
OUT_NAME = "real_data_status.md"


def _status(rep, column, rows) -> str:
    from verification.experiments.reproduction_status import column_coverage

    cov = column_coverage(rep, column, rows)
    return cov.describe() if cov.state == "not run" else f"{cov.state}: {cov.describe()}"


def table(results_dir=RESULTS) -> str:
    """The markdown table (rows in registry order)."""
    from verification.experiments.reproduction_run import read_rows
    from verification.experiments.reproductions import REPRODUCTIONS

    results_dir = Path(results_dir)
    lines = ["| paper | table | column | status | command |", "|---|---|---|---|---|"]
    for rep in REPRODUCTIONS.values():
        rows = read_rows(results_dir / f"{rep.name}.csv")
        for col in rep.columns:
            where = "" if col.data == "fmnist" else " --data-dir DIR"
            cmd = f"pflt reproduce {rep.name} --columns '{col.key}'{where}"
            result = (f" → `{rep.name}.md`" if (results_dir / f"{rep.name}.md").is_file()
                      and rows else "")
            lines.append(f"| {rep.paper} | {rep.table} | {col.key} ({col.data}, {col.model}) | "
                         f"{_status(rep, col, rows)}{result} | `{cmd}` |")
    return "\n".join(lines) + "\n"


def summary_table(results_dir=RESULTS) -> str:
    """The README's block: one row per reproduction with a result (its columns' states and
    the command), then one row per paper for its reproductions not run here (their tables
    and commands); :func:`table` (``real_data_status.md``) has one row per column with the
    seeds and T."""
    from verification.experiments.reproduction_run import read_rows
    from verification.experiments.reproduction_status import column_coverage
    from verification.experiments.reproductions import REPRODUCTIONS

    results_dir = Path(results_dir)
    lines = ["| paper | table | columns: status | command |", "|---|---|---|---|"]
    not_run: dict[str, list] = {}
    for rep in REPRODUCTIONS.values():
        rows = read_rows(results_dir / f"{rep.name}.csv")
        covs = [column_coverage(rep, col, rows) for col in rep.columns]
        where = "" if set(rep.datasets()) <= {"fmnist"} else " --data-dir DIR"
        if all(c.state == "not run" for c in covs):
            not_run.setdefault(rep.paper, []).append((rep, where))
            continue
        states = "; ".join(f"{c.column.key} {c.state}" + (
            f" ({len(c.have & c.wanted)}/{len(c.wanted)}, seeds "
            f"{','.join(map(str, c.seeds))}, T = {','.join(map(str, c.rounds))})"
            if c.state != "not run" else "") for c in covs)
        lines.append(f"| {rep.paper} | {rep.table} | {states} | "
                     f"`pflt reproduce {rep.name}{where}` |")
    for paper, reps in not_run.items():
        lines.append(f"| {paper} | {'; '.join(r.table for r, _ in reps)} | not run here | "
                     + ", ".join(f"`pflt reproduce {r.name}{w}`" for r, w in reps) + " |")
    return "\n".join(lines) + "\n"


def transfer_table(results_dir=RESULTS) -> str:
    """The papers' claims tested on the real Fashion-MNIST (transfers, not reproductions):
    per paper the count of each verdict, then one row per claim with its verdict and the
    measured differences (:mod:`verification.checks.reproduction_transfer`, on the CSVs in
    ``results_dir``)."""
    from verification.checks.reproduction_transfer import CLAIMS, judge
    from verification.experiments.reproductions_transfer import MEASURED

    order = ("HOLDS", "FAILS", "INCONCLUSIVE", "NOT RUN")
    judged = [(c, judge(c, results_dir)) for c in CLAIMS]
    verdict = {c.id: (o.extra.get("verdict") or o.verdict.value) for c, o in judged}
    papers = list(dict.fromkeys(c.paper for c in CLAIMS))
    lines = ["Transfers — the papers' claims tested on the real Fashion-MNIST **in place of** "
             "their datasets (MNIST, CIFAR-10): not reproductions of their numbers "
             f"(`pflt verify` checks `transfer_fmnist.*`; runs: {MEASURED}):", "",
             "| paper | claims | " + " | ".join(order) + " |", "|---|---|" + "---|" * len(order)]
    for p in papers:
        vs = [verdict[c.id] for c in CLAIMS if c.paper == p]
        lines.append(f"| {p} | {len(vs)} | " + " | ".join(str(vs.count(v)) for v in order) + " |")
    lines += ["", "| paper | claim | verdict | measured: better − worse (%), ± se over seeds, "
              "last round |", "|---|---|---|---|"]
    for c, o in judged:
        what = "; ".join(o.extra.get("pairs", [])) or o.detail.removeprefix("NOT RUN: ")
        lines.append(f"| {c.paper} | `{c.id.split('.')[1]}`: {c.reference} | "
                     f"{verdict[c.id]} | {what} |")
    return "\n".join(lines) + "\n"


def transfer_summary(results_dir=RESULTS) -> str:
    """The README's lines on the transfers: per paper, which claims held, failed, were
    inconclusive or were not run (every claim with its differences in
    ``real_data_status.md``)."""
    from verification.checks.reproduction_transfer import CLAIMS, judge
    from verification.experiments.reproductions_transfer import MEASURED

    verdicts: dict = {}
    for c in CLAIMS:
        o = judge(c, results_dir)
        v = o.extra.get("verdict") or o.verdict.value
        verdicts.setdefault(c.paper, {}).setdefault(v, []).append(c.id.split(".")[1])
    lines = ["| paper | its claims on the real Fashion-MNIST (transfers in place of its data, "
             "not reproductions; `pflt verify` checks `transfer_fmnist.*`) |", "|---|---|"]
    for paper, vs in verdicts.items():
        lines.append(f"| {paper} | " + "; ".join(
            f"{v}: {', '.join(vs[v])}" for v in ("HOLDS", "FAILS", "INCONCLUSIVE", "NOT RUN")
            if v in vs) + " |")
    return ("\n".join(lines) + f"\n\nTransfers {MEASURED}; each claim with its differences ± "
            "se: `paper_figures/results/real_data_status.md`.\n")


def render(results_dir=RESULTS) -> str:
    return ("# The papers' real-data tables\n\nGenerated by `python -m paper_figures.real_data_status` "
            "from the reproduction registry and the CSVs in paper_figures/results/. `--data-dir "
            "DIR`: the dataset's files (`pflt data fetch NAME` puts them in the data home, "
            "where the option is not needed); Fashion-MNIST is found where Debian installs it. "
            "docs/reproduction.md explains the columns.\n\n" + table(results_dir) + "\n"
            + transfer_table(results_dir))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m paper_figures.real_data_status",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default=str(RESULTS), help="directory of the CSVs")
    ap.add_argument("--out", default=None, help=f"output file (default RESULTS/{OUT_NAME})")
    ap.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    args = ap.parse_args(argv)
    out = Path(args.out or Path(args.results) / OUT_NAME)
    text = render(args.results)
    if args.check:
        return 0 if out.is_file() and out.read_text() == text else 1
    out.write_text(text)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
