"""CGPFL-Heur's K̂ against the planted K₀ (CGPFL, IJCAI 2022, eq. 11 / §A.9; docs/formulas.md §E.A 12).

Left: K̂ chosen by CGPFL-Heur (round 0, μ = 200, on the uploads) against K₀ over ≥ 10 seeds.
Right: fraction of trials with K̂ = K₀ as a function of μ (same e(K) ingredients), which
shows the band of μ in which the heuristic works.  Writes ``cgpfl_select_k.png`` / ``.csv``.
"""

from __future__ import annotations

from paper_figures._style import save_figure  # noqa: E402

import csv
from pathlib import Path

import numpy as np

from verification.experiments.cgpfl import MU, khat_trials

MUS = (10, 30, 50, 100, 200, 400, 800, 1600)


def make(out_dir: Path, *, quick: bool = False, seed: int = 0) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    seeds = range(seed, seed + (3 if quick else 10))
    k0s, n = ([2], 8) if quick else ([2, 3, 4, 5, 6], 24)
    rows = khat_trials(seeds, k0s, num_clients=n, mus=MUS, mu=MU)
    csv_path = out_dir / "cgpfl_select_k.csv"
    with open(csv_path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["seed", "k0", "k_hat"] + [f"k_hat_mu_{m}" for m in MUS])
        for r in rows:
            w.writerow([r["seed"], r["k0"], r["k_hat"]] + r["sweep"])
    k0 = np.array([r["k0"] for r in rows])
    kh = np.array([r["k_hat"] for r in rows])
    sweep = np.array([r["sweep"] for r in rows])
    acc = float(np.mean(kh == k0))
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    jit = np.random.default_rng(0).uniform(-0.15, 0.15, size=k0.size)
    a.scatter(k0 + jit, kh, alpha=0.6)
    lim = [0.5, max(k0.max(), kh.max()) + 0.5]
    a.plot(lim, lim, "k--", lw=1, label="K̂ = K₀")
    a.set(xlabel="planted K₀", ylabel="K̂ (CGPFL-Heur)",
          title=f"μ = {MU:g}: K̂ = K₀ in {acc:.0%} of {len(rows)} trials")
    a.xaxis.set_major_locator(MaxNLocator(integer=True))     # K is a count: no 2.5
    a.yaxis.set_major_locator(MaxNLocator(integer=True))
    a.legend()
    b.semilogx(MUS, (sweep == k0[:, None]).mean(0), "o-")
    b.set(xlabel="μ in e(K)", ylabel="fraction K̂ = K₀", ylim=(-0.05, 1.05),
          title="the heuristic works only in a band of μ")
    fig.tight_layout()
    png = out_dir / "cgpfl_select_k.png"
    save_figure(fig, png, dpi=120)
    plt.close(fig)
    return [png, csv_path]
