"""The papers' headline claims on the real Fashion-MNIST — transfers, not reproductions.

One check per claim of pFedMe, PPFE and PLGU (ids ``transfer_fmnist.*``), judged on the CSVs
of the transfer entries (:mod:`verification.experiments.reproductions_transfer`, written by
``pflt reproduce NAME`` to ``paper_figures/results/``; PLGU's lowest / top 5 % by
:mod:`verification.experiments.transfer_metrics`).  A claim is a list of pairs
``(entry, column, better, worse, kind, which)``:

* ``kind="gt"`` — ``better > worse``: the difference of seed means against 2 standard errors of
  the difference, ``se = sqrt(sd_b²/n_b + sd_w²/n_w)`` (sample sd over training seeds) — HOLDS
  above +2 se, FAILS below −2 se, else INCONCLUSIVE
  (:func:`verification.experiments.reproduction_report.ordering`);
* ``kind="ge"`` — ``better`` not below ``worse`` (the paper's "without the average losing",
  "larger K does not improve"): FAILS below −2 se, else HOLDS;
* ``which`` — ``""`` (the entry's CSV), ``"low5"`` / ``"top5"`` (its companion CSVs).

Fewer than 2 finished seeds on either side is INCONCLUSIVE.  Each pair is judged at one T
that both methods ran (the one with most seeds on the scarcer side; runs of different T or
``--option`` groups are never averaged, see :func:`_same_t`); a T below the paper's is named
"reduced T" in the detail.  The verdict is the worst over the judged pairs; pairs
without rows are left out, and a claim with no judged pair is NOT RUN (one line why: the CSV
is absent or lacks the methods — Fashion-MNIST or the run is missing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from verification.core.registry import Context, Outcome, Verdict, check
from verification.core.verdicts import outcome, worst
from verification.experiments.reproduction_report import Z, by_rounds, ordering, summarize
from verification.experiments.reproduction_run import read_rows
from verification.experiments.reproductions_transfer import (
    PFEDME_FIGS_TRANSFER, PFEDME_TRANSFER, PLGU_GLOBAL_TRANSFER, PLGU_PERSONAL_TRANSFER,
    PLGU_RHO_TRANSFER, PPFE_ABLATIONS_TRANSFER, PPFE_TRANSFER, TRANSFERS)

RESULTS = Path(__file__).resolve().parents[2] / "paper_figures" / "results"
_ENTRIES = {r.name: r for r in TRANSFERS}


@dataclass(frozen=True)
class Claim:
    """A paper's claim: check ``id``, ``paper``, ``reference`` (where it is claimed, and as
    which transfer) and its ``pairs``."""

    id: str
    paper: str
    reference: str
    pairs: tuple


def _pairs(entry, columns, better, worses, kind="gt", which="") -> tuple:
    return tuple((entry.name, c, b, w, kind, which) for c in columns
                 for b in ((better,) if isinstance(better, str) else better) for w in worses)


_PF_COLS = ("fmnist_mlr", "fmnist_dnn")
_PP_COLS = ("fmnist_(100,2)", "fmnist_(100,5)")
_PPFE_BASELINES = tuple(r.label for r in PPFE_TRANSFER.rows if r.label != "PPFE")
_T = " transfer (Fashion-MNIST in place of {})"
CLAIMS = (
    Claim("transfer_fmnist.pfedme_pm_best", "pFedMe (NeurIPS 2020)",
          "§5.3, Table 1: the personalized model is the best performer (PM > GM, Per-FedAvg, "
          "FedAvg);" + _T.format("MNIST"),
          _pairs(PFEDME_TRANSFER, _PF_COLS, "pFedMe-PM", ("pFedMe-GM", "Per-FedAvg", "FedAvg"))),
    Claim("transfer_fmnist.pfedme_over_fedavg", "pFedMe (NeurIPS 2020)",
          "Table 1: Per-FedAvg and pFedMe-GM above FedAvg on both models;" + _T.format("MNIST"),
          _pairs(PFEDME_TRANSFER, _PF_COLS, ("Per-FedAvg", "pFedMe-GM"), ("FedAvg",))),
    Claim("transfer_fmnist.pfedme_fig1_k", "pFedMe (NeurIPS 2020)",
          "§5.2, Fig. 1: K = 7 does not improve on K = 5 (personalized model);"
          + _T.format("MNIST"),
          _pairs(PFEDME_FIGS_TRANSFER, _PF_COLS, "pFedMe-PM K=5", ("pFedMe-PM K=7",), "ge")),
    Claim("transfer_fmnist.pfedme_fig2_beta", "pFedMe (NeurIPS 2020)",
          "§5.2, Fig. 2: a larger β converges faster, especially the global model (β = 2 "
          "above β = 1 at the round reached);" + _T.format("MNIST"),
          _pairs(PFEDME_FIGS_TRANSFER, _PF_COLS, "pFedMe-GM β=2", ("pFedMe-GM β=1",))),
    Claim("transfer_fmnist.ppfe_above_fedavg", "PPFE (arXiv 2602.14244)",
          "§6, Table 1 (CIFAR-10 (100,2), (100,5)): PPFE above FedAvg;" + _T.format("CIFAR-10"),
          _pairs(PPFE_TRANSFER, _PP_COLS, "PPFE", ("FedAvg",))),
    Claim("transfer_fmnist.ppfe_above_personalized", "PPFE (arXiv 2602.14244)",
          "§6, Table 1: PPFE above every personalized baseline;" + _T.format("CIFAR-10"),
          _pairs(PPFE_TRANSFER, _PP_COLS, "PPFE",
                 tuple(b for b in _PPFE_BASELINES if b != "FedAvg"))),
    Claim("transfer_fmnist.ppfe_table3_reduction", "PPFE (arXiv 2602.14244)",
          "§6.3, Table 3: model reduction improves accuracy (PPFE > w/o MR);"
          + _T.format("CIFAR-10"),
          _pairs(PPFE_ABLATIONS_TRANSFER, _PP_COLS, "PPFE", ("w/o MR",))),
    Claim("transfer_fmnist.ppfe_table4_fixed_heads", "PPFE (arXiv 2602.14244)",
          "§6.3, Table 4: PPFE above fixed heads M1-M3, and M1 above M3;"
          + _T.format("CIFAR-10"),
          _pairs(PPFE_ABLATIONS_TRANSFER, _PP_COLS, "PPFE", ("M1", "M2", "M3"))
          + _pairs(PPFE_ABLATIONS_TRANSFER, _PP_COLS, "M1", ("M3",))),
    Claim("transfer_fmnist.ppfe_table5_progression", "PPFE (arXiv 2602.14244)",
          "§6.3, Table 5: PPFE > WP (no progression) > WPW (and no reweighting);"
          + _T.format("CIFAR-10"),
          _pairs(PPFE_ABLATIONS_TRANSFER, _PP_COLS, "PPFE", ("WP",))
          + _pairs(PPFE_ABLATIONS_TRANSFER, _PP_COLS, "WP", ("WPW",))),
    Claim("transfer_fmnist.ppfe_table6_sparse", "PPFE (arXiv 2602.14244)",
          "App., Table 6: masks slightly lower than SVD (PPFE not below PPFE (Sparse));"
          + _T.format("CIFAR-10"),
          _pairs(PPFE_ABLATIONS_TRANSFER, _PP_COLS, "PPFE", ("PPFE (Sparse)",), "ge")),
    Claim("transfer_fmnist.plgu_low5_without_average_loss", "PLGU (CVPR 2023)",
          "§1, §6.2, Table 1 (global): PLGU-LF lifts the lowest 5 % of clients above FedAvg "
          "and FedSAM without the average losing;" + _T.format("CIFAR-10"),
          _pairs(PLGU_GLOBAL_TRANSFER, ("fmnist_C10",), "PLGU-LF", ("FedAvg", "FedSAM"),
                 which="low5")
          + _pairs(PLGU_GLOBAL_TRANSFER, ("fmnist_C10",), "PLGU-LF", ("FedAvg", "FedSAM"),
                   "ge")),
    Claim("transfer_fmnist.plgu_global_average", "PLGU (CVPR 2023)",
          "§6.2, Table 1 (global): PLGU-LF's average above FedAvg, FedSAM, Ditto, pFedMe, "
          "its top 5 % not below FedAvg's and FedSAM's;" + _T.format("CIFAR-10"),
          _pairs(PLGU_GLOBAL_TRANSFER, ("fmnist_C10",), "PLGU-LF",
                 ("FedAvg", "FedSAM", "Ditto", "pFedMe"))
          + _pairs(PLGU_GLOBAL_TRANSFER, ("fmnist_C10",), "PLGU-LF", ("FedAvg", "FedSAM"),
                   "ge", "top5")),
    Claim("transfer_fmnist.plgu_personalized", "PLGU (CVPR 2023)",
          "§6.2, Table 2 (personalized): PLGU-GRep and PLGU-GHN above Ditto, pFedMe, FedRep, "
          "pFedHN on the average and the lowest 5 %;" + _T.format("CIFAR-10"),
          _pairs(PLGU_PERSONAL_TRANSFER, ("fmnist_C10",), ("PLGU-GRep", "PLGU-GHN"),
                 ("Ditto", "pFedMe", "FedRep", "pFedHN"))
          + _pairs(PLGU_PERSONAL_TRANSFER, ("fmnist_C10",), ("PLGU-GRep", "PLGU-GHN"),
                   ("Ditto", "pFedMe", "FedRep", "pFedHN"), which="low5")),
    Claim("transfer_fmnist.plgu_table4_rho", "PLGU (CVPR 2023)",
          "§6.3, Table 4: ρ = 0.05 is best and ρ = 0.5 degrades largely (ρ=0.05 > ρ=0.5, "
          "not below ρ=0.1; PLGU-LF global);" + _T.format("CIFAR-10"),
          _pairs(PLGU_RHO_TRANSFER, ("fmnist_C10",), "PLGU-LF (G) ρ=0.05",
                 ("PLGU-LF (G) ρ=0.5",))
          + _pairs(PLGU_RHO_TRANSFER, ("fmnist_C10",), "PLGU-LF (G) ρ=0.05",
                   ("PLGU-LF (G) ρ=0.1",), "ge")),
)


def _not_run(why: str) -> Outcome:
    return outcome(Verdict.NOT_RUN, measured=None, theoretical="ordering",
                   detail=f"NOT RUN: {why}", extra={"not_run_reason": why})


def _not_below(summary, column, better, worse) -> tuple[Verdict, str]:
    (mb, sb, nb), (mw, sw, nw) = summary[(column, better)]["last"], summary[(column, worse)]["last"]
    if nb < 2 or nw < 2:
        return Verdict.INCONCLUSIVE, (f"{better} ≥ {worse} ({column}): fewer than 2 seeds "
                                      f"({nb}, {nw}): INCONCLUSIVE")
    se = math.sqrt(sb ** 2 / nb + sw ** 2 / nw)
    v = Verdict.FAILS if mb - mw < -Z * se else Verdict.HOLDS
    return v, (f"{better} ≥ {worse} ({column}): {mb:.2f} − {mw:.2f} = {mb - mw:+.2f} ± "
               f"{se:.2f} (se, {nb}+{nw} seeds): {v.value}")


def _same_t(rows: list[dict], column: str, better: str, worse: str):
    """``(T, {method: options}, rows)`` of the two methods at one T, or ``None``: per method
    and T the ``(T, --option)`` group with most rows (groups are never mixed); among the T
    both methods ran, the one with most seeds on the scarcer side, then the larger T.  Two
    methods may differ in options at one T (PPFE's ``total_rounds`` scaled to a reduced T,
    which FedAvg has not): the detail names them."""
    per: dict = {}
    for (t, opts), group in by_rounds(rows, column).items():
        for method in (better, worse):
            mine = [r for r in group if r["method"] == method]
            if mine and len(mine) > len(per.get((method, t), ("", []))[1]):
                per[(method, t)] = (opts, mine)
    common = {t for (m, t) in per if m == better} & {t for (m, t) in per if m == worse}
    if not common:
        return None
    t = max(common, key=lambda t: (min(len(per[(better, t)][1]), len(per[(worse, t)][1])), t))
    return (t, {m: per[(m, t)][0] for m in (better, worse)},
            per[(better, t)][1] + per[(worse, t)][1])


def judge(claim: Claim, results=RESULTS) -> Outcome:
    """The outcome of ``claim`` on the CSVs in ``results`` (rules in the module docstring)."""
    results = Path(results)
    verdicts, lines, short, measured, absent = [], [], [], {}, set()
    for entry, column, better, worse, kind, which in claim.pairs:
        name = entry + (f"_{which}" if which else "")
        path = results / f"{name}.csv"
        if not path.is_file():
            absent.add(path.name)
            continue
        picked = _same_t(read_rows(path), column, better, worse)
        if picked is None:
            continue
        t, opts, rows = picked
        summary = summarize(rows)
        if kind == "gt":
            v, line = ordering(summary, column, better, worse, "last")
        else:
            v, line = _not_below(summary, column, better, worse)
        paper_t = _ENTRIES[entry].rounds
        tag = (f"T = {t}" + (f", reduced T (paper's {paper_t})" if t < paper_t else "")
               + "".join(f"; {m}: --option {o}" for m, o in opts.items() if o))
        what = {"low5": "lowest 5 %", "top5": "top 5 %"}.get(which) or (
            "mean over clients" if _ENTRIES[entry].metric == "accuracy_mean" else "accuracy")
        lines.append(f"{line} [{what}, last round; {tag}]")
        verdicts.append(v)
        short.append(f"{column}: " + line.replace(f" ({column}, last)", "")
                     .replace(f" ({column})", "").replace(" (se, ", " (")
                     + f" [{what}; {tag}]")
        measured[f"{column}: {better} {'>' if kind == 'gt' else '≥'} {worse}"
                 + (f" ({which})" if which else "")] = v.value
    if not verdicts:
        why = (f"{', '.join(sorted(absent))} absent" if absent else
               "the transfer CSVs hold no rows of the claim's methods")
        entries = sorted({p[0] for p in claim.pairs})
        return _not_run(f"{why} (needs Fashion-MNIST: pflt reproduce {' / '.join(entries)})")
    return outcome(worst(verdicts), measured=measured, theoretical="claimed ordering",
                   detail="transfer (Fashion-MNIST): " + "; ".join(lines),
                   extra={"pairs": short, "verdict": worst(verdicts).value})


def _register(claim: Claim) -> None:
    def run(ctx: Context) -> Outcome:
        return judge(claim, ctx.params.get("results", RESULTS))

    run.__name__ = run.__qualname__ = claim.id.split(".")[1]
    run.__doc__ = f"{claim.paper}: {claim.reference} Judged on the transfer CSVs."
    check(claim.id, paper=claim.paper, reference=claim.reference, kind="ordering",
          quick={}, full={})(run)


#: the ids, literally, for ``pflt verify --only``'s source scan (verification/core/runner.py
#: imports only the modules whose literal check declarations match; these checks are
#: registered in a loop) — a test keeps this list equal to CLAIMS':
#   @check("transfer_fmnist.pfedme_pm_best")
#   @check("transfer_fmnist.pfedme_over_fedavg")
#   @check("transfer_fmnist.pfedme_fig1_k")
#   @check("transfer_fmnist.pfedme_fig2_beta")
#   @check("transfer_fmnist.ppfe_above_fedavg")
#   @check("transfer_fmnist.ppfe_above_personalized")
#   @check("transfer_fmnist.ppfe_table3_reduction")
#   @check("transfer_fmnist.ppfe_table4_fixed_heads")
#   @check("transfer_fmnist.ppfe_table5_progression")
#   @check("transfer_fmnist.ppfe_table6_sparse")
#   @check("transfer_fmnist.plgu_low5_without_average_loss")
#   @check("transfer_fmnist.plgu_global_average")
#   @check("transfer_fmnist.plgu_personalized")
#   @check("transfer_fmnist.plgu_table4_rho")
for _claim in CLAIMS:
    _register(_claim)
