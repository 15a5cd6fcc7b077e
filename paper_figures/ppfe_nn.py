"""PPFE for neural networks vs the decoupling baselines, accuracy per stage and communication.

The setting (federation, model, baselines, common hyper-parameters) is
:mod:`verification.experiments.ppfe_nn`'s.

Left panel: test accuracy (sample-weighted) vs round — PPFE's ensemble (eq. 8) and its
running stage model, each baseline's personalized model; stage boundaries dotted.
Right panel: the same accuracies against the cumulative number of parameters communicated
(2 · participants · shared parameters per round).  CSV: one row per (method, round).

``ppfe_nn_gap``: both sides of Theorem 7 (docs/formulas.md §C.5.3, RECONSTRUCTED): the
measured generalization gap of the stage model at the end of each stage t (test − training
loss) next to Theorem 7's bound for t + 1 stages of this MLP on this federation (constants
1, logs dropped: a shape — the bound grows with the stages through its personalized and
boosting terms).
"""

from __future__ import annotations

from paper_figures._style import save_figure  # noqa: E402

import csv
from pathlib import Path

import torch

from pfl_theory.ppfe_bounds import theorem7_terms
from verification.experiments.ppfe_nn import BASELINES, run_all, setting, stage_ends, trajectory  # noqa: F401

DELTA = 0.05  # confidence δ of the plotted bound


def gap_rows(rows: list[dict], ends: list[int], *, quick: bool, seed: int) -> list[dict]:
    """Per stage: the measured gap (test − train loss of the stage model at the stage's last
    round) and Theorem 7's terms for that many stages (widths of the experiment's MLP,
    client training sizes of its federation)."""
    fed, model, _, _ = setting(quick=quick, seed=seed)
    sizes = [int(c) for c in fed.train.counts]
    out = []
    for t, end in enumerate(ends):
        row = next(r for r in rows if r["method"] == "PPFE stage model" and r["round"] == end)
        bound = theorem7_terms([list(model.widths)] * (t + 1), sizes=sizes, delta=DELTA)
        out.append({"stage": t, "round": end,
                    "measured_gap": row["test_loss"] - row["train_loss"],
                    **{f"bound_{k}": v for k, v in bound.items()}})
    return out


def _gap_figure(out: Path, gaps: list[dict]) -> list[Path]:
    import matplotlib.pyplot as plt

    csv_path = out / "ppfe_nn_gap.csv"
    with open(csv_path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(gaps[0]))
        writer.writeheader()
        writer.writerows(gaps)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.6))
    stages = [g["stage"] + 1 for g in gaps]
    a1.plot(stages, [g["measured_gap"] for g in gaps], "o-", label="measured: test − train loss")
    a1.set(xlabel="stages T", ylabel="generalization gap (stage model)",
           title="measurement", xticks=stages)
    a1.legend(fontsize=8)
    for key, style in (("total", "k-"), ("shared", "--"), ("personalized", ":"),
                       ("boosting", "-.")):
        a2.plot(stages, [g[f"bound_{key}"] for g in gaps], style, label=key)
    a2.set(xlabel="stages T", ylabel="Theorem 7 (constants 1)", xticks=stages,
           title=f"theory: Theorem 7 terms, δ = {DELTA}")
    a2.legend(fontsize=8)
    fig.tight_layout()
    png = out / "ppfe_nn_gap.png"
    save_figure(fig, png, dpi=120)
    plt.close(fig)
    return [png, csv_path]


def make(out_dir, *, quick: bool = False, seed: int = 0) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    torch.set_num_threads(1)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows, ends = run_all(quick=quick, seed=seed)
    csv_path = out / "ppfe_nn.csv"
    with open(csv_path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["method", "round", "stage", "accuracy", "comm_params"],
                                extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for method in dict.fromkeys(r["method"] for r in rows):
        sel = [r for r in rows if r["method"] == method]
        style = dict(lw=2.2) if method == "PPFE ensemble" else dict(lw=1.2)
        if method == "PPFE stage model":
            style["ls"] = "--"
        ax1.plot([r["round"] for r in sel], [r["accuracy"] for r in sel], label=method, **style)
        if method != "local":
            ax2.plot([r["comm_params"] for r in sel], [r["accuracy"] for r in sel], label=method, **style)
        else:       # nothing communicated: no point on a log axis, but said in the legend
            ax2.plot([], [], label="local (communicates nothing: not drawn)", **style)
    for end in ends[:-1]:
        ax1.axvline(end, color="grey", ls=":", lw=0.8)
    ax1.set(xlabel="communication round", ylabel="test accuracy (sample-weighted)",
            title="PPFE stages (dotted) vs decoupling baselines")
    ax2.set(xlabel="parameters communicated (cumulative)", ylabel="test accuracy",
            title="accuracy vs communication", xscale="log")
    ax1.legend(fontsize=7)
    ax2.legend(fontsize=7)
    fig.tight_layout()
    png = out / "ppfe_nn.png"
    save_figure(fig, png, dpi=120)
    plt.close(fig)
    return [png, csv_path] + _gap_figure(out, gap_rows(rows, ends, quick=quick, seed=seed))
