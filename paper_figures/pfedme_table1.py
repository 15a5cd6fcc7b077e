"""pFedMe Table 1 (Synthetic column) reproduction: ours vs the paper.

pFedMe (Dinh, Tran, Nguyen, NeurIPS 2020) Table 1; docs/formulas.md §B.7; experiment in
:func:`verification.experiments.pfedme_table1.table1` (hyper-parameters and departures there).
Writes ``table1.md`` (ours mean ± std over seeds next to the paper's numbers, and whether
the orderings PM > GM, PM > Per-FedAvg > FedAvg hold), ``table1.csv`` (per-seed values) and
``table1.png`` (bar chart).  ``quick``: 3 rounds, 1 seed, the small 20-client draw (a smoke
run, not a reproduction); full: the paper's data and T = 600 with ``FULL_SEEDS`` seeds.
"""

from __future__ import annotations

from paper_figures._style import save_figure  # noqa: E402

import csv
import pathlib
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from verification.experiments import pfedme_table1 as ex  # noqa: E402

FULL_SEEDS = 2
PAPER_ROWS = ("FedAvg", "Per-FedAvg", "pFedMe-GM", "pFedMe-PM")


def _pm(values) -> str:
    v = 100 * np.asarray(values, dtype=float)
    return f"{v.mean():.2f} ± {v.std():.2f}"


def markdown(results: dict[str, dict[str, Any]], *, note: str = "") -> str:
    """The comparison table for ``{model: table1 result}``."""
    lines = ["# pFedMe Table 1 (Synthetic(0.5, 0.5)): ours vs paper", ""]
    if note:
        lines += [note, ""]
    for model, res in results.items():
        lines += [f"## {model.upper()} — seeds {res['seeds']}, T = {res['rounds']}, "
                  f"{res['federation']}", "",
                  "| Algorithm | paper (%) | ours best-over-rounds (%) | ours final (%) | "
                  "ours final, mean over clients (%) | best − paper |",
                  "|---|---|---|---|---|---|"]
        for label, row in res["rows"].items():
            paper = ex.PAPER_SYNTHETIC[model].get(label)
            ptxt = f"{paper[0]:.2f} ± {paper[1]:.2f}" if paper else "–"
            diff = f"{100 * np.mean(row['weighted_best']) - paper[0]:+.2f}" if paper else "–"
            lines.append(f"| {label} | {ptxt} | {_pm(row['weighted_best'])} | "
                         f"{_pm(row['weighted_final'])} | {_pm(row['mean_final'])} | {diff} |")
        lines.append("")
        for metric in ("weighted_best", "weighted_final"):
            order = ex.ordering(res, metric)
            lines.append(f"* ordering ({metric}): " + ", ".join(
                f"{k} {'holds' if v else 'FAILS'}" for k, v in order.items()))
        lines.append("")
    lines += ["Accuracies are sample-weighted (total correct / total test samples, as the "
              "public code computes); 'best-over-rounds' is the code's reported statistic "
              "(max over evaluated rounds: every 5th round in full runs). ± is the standard "
              "deviation over seeds with ddof 0 (np.std, as the code's average_data). "
              "pFedMe-local is w_{i,R}, what the public code's 'personalized' accuracy "
              "evaluated.", ""]
    return "\n".join(lines)


def write_outputs(results: dict[str, dict[str, Any]], out_dir, *, note: str = ""
                  ) -> list[pathlib.Path]:
    """Write ``table1.md``, ``table1.csv`` and ``table1.png`` for ``{model: result}``."""
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    md = out / "table1.md"
    md.write_text(markdown(results, note=note))
    path_csv = out / "table1.csv"
    with path_csv.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["model", "algorithm", "seed", "rounds", *ex.METRICS, "paper_mean",
                    "paper_std"])
        for model, res in results.items():
            for label, row in res["rows"].items():
                paper = ex.PAPER_SYNTHETIC[model].get(label, (None, None))
                for i, seed in enumerate(res["seeds"]):
                    w.writerow([model, label, seed, res["rounds"],
                                *(row[m][i] for m in ex.METRICS), *paper])
    fig, axes = plt.subplots(1, len(results), figsize=(5 * len(results), 4.4), squeeze=False)
    for ax, (model, res) in zip(axes[0], results.items()):
        labels = list(res["rows"])
        x = np.arange(len(labels))
        ours = np.array([100 * np.mean(res["rows"][k]["weighted_best"]) for k in labels])
        err = np.array([100 * np.std(res["rows"][k]["weighted_best"]) for k in labels])
        paper = np.array([ex.PAPER_SYNTHETIC[model].get(k, (np.nan, 0))[0] for k in labels])
        comparable = res["rounds"] == ex.PAPER_ROUNDS
        ax.bar(x - 0.2, paper, 0.4, label=f"paper (T = {ex.PAPER_ROUNDS})")
        # a run shorter than the paper's is drawn hatched and pale: not a reproduction
        ax.bar(x + 0.2, ours, 0.4, yerr=err, capsize=3, alpha=1.0 if comparable else 0.45,
               hatch=None if comparable else "//",
               label=f"ours (T = {res['rounds']}, {len(res['seeds'])} seed(s))"
               + ("" if comparable else ": NOT comparable"))
        ax.set_xticks(x, [k.replace(" (code's 'PM')", "\n(code 'PM')") for k in labels],
                      rotation=30, ha="right", fontsize=8)
        ax.set_ylim(0, 100)        # a bar's length is its value: the axis starts at 0
        ax.set_ylabel("test accuracy (%)")
        ax.set_title(f"Synthetic(0.5,0.5), {model.upper()}")
    handles, names = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=2, fontsize=8)   # one, off the bars
    if note:
        fig.suptitle(note, fontsize=9, color="firebrick")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    png = out / "table1.png"
    save_figure(fig, png, dpi=120)
    plt.close(fig)
    return [md, path_csv, png]


def make(out_dir, *, quick: bool = False, seed: int = 0) -> list[pathlib.Path]:
    """Run Table 1 for MLR and DNN and write the comparison (see module docstring)."""
    rounds = 3 if quick else ex.PAPER_ROUNDS
    seeds = [seed] if quick else [seed + s for s in range(FULL_SEEDS)]
    results = {m: ex.table1(seeds=seeds, rounds=rounds, model=m, quick=quick,
                            eval_every=1 if quick else 5) for m in ("mlr", "dnn")}
    note = (f"QUICK smoke run: ours T = {rounds} rounds on a small 20-client draw against the "
            f"paper's T = {ex.PAPER_ROUNDS} — not comparable" if quick else "")
    return write_outputs(results, out_dir, note=note)
