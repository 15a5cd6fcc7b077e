"""CGPFL Table 1 on Fashion-MNIST, reproduced: the paper's ordering claims on our numbers.

The claims (IJCAI 2022 §5.2, Table 1: "our methods outperform the competitors with large
margins"): CGPFL (K = 4) and CGPFL-Heur above FedAvg and above pFedMe (PM), on the
FMNIST-MLR and FMNIST-DNN columns.  Judged on ``paper_figures/results/cgpfl_table1_fmnist.csv``
(written by ``pflt reproduce cgpfl_table1_fmnist``: one row per method, model and seed) by
:func:`verification.experiments.reproduction_report.ordering` — the difference of seed means
against 2 standard errors of the difference (seed-to-seed sd), last-round accuracy, at the
T with the most rows of each column (runs of different T are not averaged together).  The
verdict is the worst over the claims; NOT RUN (one line why) when the CSV is absent or
holds no row of the claims' methods.
"""

from __future__ import annotations

from pathlib import Path

from verification.core.registry import Context, Outcome, Verdict, check
from verification.core.verdicts import outcome, worst
from verification.experiments.reproduction_report import by_rounds, ordering, summarize
from verification.experiments.reproduction_run import read_rows
from verification.experiments.reproductions import CGPFL_TABLE1_FMNIST

CSV = Path(__file__).resolve().parents[2] / "paper_figures" / "results" / "cgpfl_table1_fmnist.csv"


def _not_run(why: str) -> Outcome:
    return outcome(Verdict.NOT_RUN, measured=None, theoretical="ordering",
                   detail=f"NOT RUN: {why}", extra={"not_run_reason": why})


def ordering_outcome(csv_path, claims) -> Outcome:
    """Outcome of the ``(column, better, worse)`` claims on the CSV at ``csv_path``."""
    csv_path = Path(csv_path)
    if not csv_path.is_file():
        return _not_run(f"{csv_path.name} absent (needs Fashion-MNIST: "
                        f"pflt reproduce {CGPFL_TABLE1_FMNIST.name})")
    rows = read_rows(csv_path)
    verdicts, lines, measured = [], [], {}
    for column, better, worse in claims:
        groups = by_rounds(rows, column)      # the T with the most rows (never mixed)
        summary = summarize(next(iter(groups.values()))) if groups else {}
        if (column, better) not in summary or (column, worse) not in summary:
            continue
        v, line = ordering(summary, column, better, worse, "last")
        verdicts.append(v)
        lines.append(line)
        measured[f"{column}: {better} > {worse}"] = v.value
    if not verdicts:
        return _not_run(f"{csv_path.name} has no rows of the claims' methods")
    return outcome(worst(verdicts), measured=measured, theoretical="better > worse",
                   detail="; ".join(lines))


@check("cgpfl.table1_fmnist_ordering", paper="CGPFL (IJCAI 2022)",
       reference="Table 1 (FMNIST columns), §5.2: CGPFL and CGPFL-Heur above FedAvg and pFedMe",
       kind="ordering", quick={}, full={})
def table1_fmnist_ordering(ctx: Context) -> Outcome:
    """The paper's ordering claims on our Fashion-MNIST reproduction (seed-to-seed standard
    errors); NOT RUN when the reproduction's CSV is absent."""
    return ordering_outcome(ctx.params.get("csv", CSV), CGPFL_TABLE1_FMNIST.claims)
