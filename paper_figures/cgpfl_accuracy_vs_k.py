"""Accuracy of CGPFL against K with e(K) (CGPFL, IJCAI 2022, Fig. 3 analogue; §A.9).

For K = 1 … N/2 on planted label-skew data (K₀ = 4): test accuracy of the personalized
models θ̃_i and of the context models ω_{k(i)} after T rounds; e(K) computed from the round-0
uploads (CGPFL-Heur's computation) on a second axis, K̂ = argmin e(K) and K₀ marked.
Writes ``cgpfl_accuracy_vs_k.png`` / ``.csv``.
"""

from __future__ import annotations

from paper_figures._style import save_figure  # noqa: E402

import csv
from pathlib import Path

from verification.experiments.cgpfl import accuracy_vs_k


def make(out_dir: Path, *, quick: bool = False, seed: int = 0) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    res = accuracy_vs_k(seed, num_clients=8 if quick else 20, k0=2 if quick else 4,
                        rounds=4 if quick else 30)
    rows = res["rows"]
    csv_path = out_dir / "cgpfl_accuracy_vs_k.csv"
    with open(csv_path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["K", "personalized", "context", "e"])
        w.writeheader()
        w.writerows(rows)
    ks = [r["K"] for r in rows]
    fig, ax = plt.subplots(figsize=(6.5, 4))
    ax.plot(ks, [r["personalized"] for r in rows], "o-", label="personalized θ̃_i")
    ax.plot(ks, [r["context"] for r in rows], "s-", label="context ω_k(i)")
    if res["k_hat"] == res["k0"]:          # one line, not two drawn over each other
        ax.axvline(res["k0"], color="g", ls="--", lw=2, label=f"K̂ = K₀ = {res['k0']}")
    else:
        ax.axvline(res["k_hat"], color="g", ls="--", label=f"K̂ = {res['k_hat']}")
        ax.axvline(res["k0"], color="k", ls=":", label=f"K₀ = {res['k0']}")
    ax.set(xlabel="K", ylabel="test accuracy")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))   # K is a count: no 2.5
    ax2 = ax.twinx()
    ax2.plot(ks, [r["e"] for r in rows], "r^-", alpha=0.6, label="e(K)")
    ax2.set_ylabel("e(K)", color="r")
    best = max(rows, key=lambda r: r["personalized"])["K"]
    ax.set_title(f"CGPFL accuracy vs K (best personalized at K = {best}, K̂ = {res['k_hat']})")
    lines = ax.get_legend_handles_labels()
    more = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], loc="lower right", fontsize=8)
    fig.tight_layout()
    png = out_dir / "cgpfl_accuracy_vs_k.png"
    save_figure(fig, png, dpi=120)
    plt.close(fig)
    return [png, csv_path]
