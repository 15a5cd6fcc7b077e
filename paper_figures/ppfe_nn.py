"""PPFE for neural networks vs the decoupling baselines, accuracy per stage and communication.

Setting (toolkit choice, the paper's image experiments are not reproducible offline): the
planted label-skewed federation :func:`synthetic.permuted_labels.permuted_label_federation`
(K = 10 clusters, 4 per client, half of the clients with permuted labels — a shared
representation plus personal heads), a 4-layer MLP (widths 20-32-32-16-10), so PPFE runs the
paper's 4 stages (stage t personalizes the last t layers) with the 30/50/40/40 round split.
Baselines (head = last layer): FedRep, FedPer, LG-FedAvg, FedBABU, FedAvg+FT, plus FedAvg
and Local as references.  Same learning rate, batch size and S for all.

Left panel: test accuracy (sample-weighted) vs round — PPFE's ensemble (eq. 8) and its
running stage model, each baseline's personalized model; stage boundaries dotted.
Right panel: the same accuracies against the cumulative number of parameters communicated
(2 · participants · shared parameters per round).  CSV: one row per (method, round).
"""

from __future__ import annotations

import csv
from pathlib import Path

import torch

from verification.experiments_ppfe_nn import BASELINES, run_all, setting, stage_ends, trajectory  # noqa: F401


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
        writer = csv.DictWriter(fh, fieldnames=["method", "round", "stage", "accuracy", "comm_params"])
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
    fig.savefig(png, dpi=120)
    plt.close(fig)
    return [png, csv_path]
