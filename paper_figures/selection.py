"""Choosing CGPFL's K and PPFE's T: every selector against the empirical optimum (issue 16).

CGPFL (Tang, Guo, Guo, IJCAI 2022), e(K) of eq. (11) (docs/formulas.md §A.9) beside the BIC
and peer-validation selectors, on the planted federations of :mod:`verification.selection.k_benchmark`;
PPFE (Emrani et al. 2026) §5's bias–variance choice of T (§C.5.12) with inputs estimated from
data, beside validation, cross-validation and the paper's T = 4, on the linear generator
(:mod:`verification.selection.stages_linear`).  Left: K̂ against the best K (jittered, one point per
case and seed, per selector).  Middle: for K, the fraction of records within ±1 of the strict
best K, within ±1 of the noise-aware set of best K, and with ≤ 1 accuracy point lost, the best
K measured on the benchmark's large per-client test sample (scoring ``large``).  Right: the
same for T (≤ 1 % excess population risk).

``quick``: 4 cases / 2 configurations; otherwise the 8 ``medium_cases`` and the 30 stage
configurations (the 60-case K grid: ``python -m verification.selection.k_benchmark --full``).
Writes ``selection.png`` and ``selection.csv`` (one row per record; ``what`` = ``K`` for the
large-test scoring, ``K_small_test`` for the clients' own test data, ``T``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from paper_figures._io import write_csv
from paper_figures._style import save_figure  # noqa: E402
from verification.selection import k_benchmark as sk
from verification.selection import k_cases as skc
from verification.selection import stages_linear as ss


def bar_rates(summary: dict[str, dict], what: str) -> dict[str, list[float]]:
    """The bars of one panel: per selector (in ``summary`` order) the strict ±1, noise-aware
    ±1 and ≤ 1 point/percent rates; ``what`` is ``"K"`` (selection_k's keys) or ``"T"``
    (selection_stages')."""
    if what not in ("K", "T"):
        raise ValueError(f"what must be 'K' or 'T', got {what!r}")
    na = "set_within1" if what == "K" else "within1_na"
    lost = "≤ 1 acc. point lost" if what == "K" else "≤ 1 % excess risk"
    return {"within ±1 of best": [v["within1"] for v in summary.values()],
            "within ±1 of the noise-aware set": [v[na] for v in summary.values()],
            lost: [v["lost_le_1pt"] for v in summary.values()]}


def make(out_dir: Path, *, quick: bool = False, seed: int = 0) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cases, cfg = (skc.quick_cases(), skc.QUICK) if quick else (skc.medium_cases(), skc.FULL)
    cases = [dataclasses.replace(c, seed=c.seed + seed) for c in cases]
    k_res = sk.run_benchmark(cases, cfg)
    t_res = ss.run_stage_benchmark(ss.quick_configs() if quick else ss.full_configs())
    k_sum, t_sum = sk.summarise(k_res), ss.summarise_stages(t_res)

    rows = [[what, r["case"], r["selector"], r["seed"], r["k_hat"], r["best_k"], r["acc_lost"]]
            for what, key in (("K", "large"), ("K_small_test", None)) for res in k_res
            for r in (res[key] if key else res)["records"]]
    rows += [["T", str(r["config"]), r["selector"], r["seed"], r["t_hat"], r["best_t"], r["excess"]]
             for res in t_res for r in res["records"]]
    csv_path = write_csv(out_dir / "selection.csv",
                         ["what", "case", "selector", "seed", "selected", "best", "lost"], rows)

    from matplotlib.ticker import MaxNLocator

    fig, (a, b, c) = plt.subplots(1, 3, figsize=(17, 6.5),
                                  gridspec_kw={"width_ratios": [1.2, 1, 1]})
    rng = np.random.default_rng(0)
    names = list(k_sum)
    # up to 20 selectors, each its own colour (tab20) and marker: none repeats
    colours = plt.get_cmap("tab20").colors
    markers = "os^vD<>ph*XP8dH"
    for i, name in enumerate(names):
        recs = [r for res in k_res for r in res["large"]["records"] if r["selector"] == name]
        best = np.array([r["best_k"] for r in recs], dtype=float)
        a.scatter(best + rng.uniform(-0.25, 0.25, best.size) + 0.06 * (i - len(names) / 2),
                  [r["k_hat"] for r in recs], s=22, alpha=0.7, label=name,
                  color=colours[i % len(colours)], marker=markers[i % len(markers)])
    top = max(cfg.k_cap, 2) + 0.5
    a.plot([0.5, top], [0.5, top], "k--", lw=1)
    a.set(xlabel="empirically best K (large-test accuracy)", ylabel="selected K̂",
          title="CGPFL: K̂ vs best K (jittered)")
    a.xaxis.set_major_locator(MaxNLocator(integer=True))
    a.yaxis.set_major_locator(MaxNLocator(integer=True))
    a.legend(fontsize=7, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.12))
    for ax, summ, title, what in ((b, k_sum, "CGPFL's K (large test)", "K"),
                                  (c, t_sum, "PPFE's T", "T")):
        y = np.arange(len(summ))[::-1]            # first selector on top
        for j, (label, rates) in enumerate(bar_rates(summ, what).items()):
            ax.barh(y - 0.27 * (j - 1), rates, 0.27, label=label)
        ax.axvline(0.9, color="k", ls=":", lw=1, label="target 90 %")
        ax.set_yticks(y, list(summ), fontsize=8)  # horizontal: every name readable
        ax.set(xlim=(0, 1.05), xlabel="fraction of (case, seed) records",
               title=f"{title}: {sum(v['records'] for v in summ.values()) // max(len(summ), 1)} records each")
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    fig.tight_layout()
    png = out_dir / "selection.png"
    save_figure(fig, png, dpi=120)
    plt.close(fig)
    return [png, csv_path]
