"""PLGU Fig. 1/6 and Fig. 5 analogues: do sharpness-aware personalization methods lift the
poorest clients on a label-skewed federation?

PLGU — Qu et al., *How to Prevent the Poor Performance Clients for Personalized Federated
Learning?* (CVPR 2023); docs/formulas.md §D.5–D.9.  The setting (data, model, methods and
their hyper-parameters) is :mod:`verification.experiments.plgu`'s.
Quick: N = 40, 20 rounds, one seed, D ∈ {0, 2, 4}; full: N = 100, 120 rounds, 3 seeds, D ∈ {0..4}.

Writes
* ``plgu_client_ecdf.png/.csv`` — ECDF of the final per-client test accuracy of FedAvg,
  FedSAM, Ditto, FedRep, pFedHN, PLGU-LF (global and personalized), PLGU-GRep, PLGU-GHN;
* ``plgu_table.csv/.md`` — the same methods plus ρ = 0 ablations of PLGU-LF and PLGU-GRep
  (separating the perturbation's effect from the schemes' structure): average (mean over clients), lowest-5% and top-5% (mean of the
  worst / best ⌈0.05 N⌉ clients, §D.9 choice), mean ± sd over seeds;
* ``plgu_effect_of_D.png/.csv`` — PLGU-LF's three numbers against D (Fig. 5 analogue).

"""

from __future__ import annotations

import math
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from paper_figures._io import write_csv  # noqa: E402
from paper_figures._style import save_figure  # noqa: E402
from verification.experiments.plgu import (  # noqa: E402,F401
    CAP, CLASSES, COMMON, DIM, METHODS, MLP, client_accuracy, federation, stats)


def make(out_dir, *, quick: bool = False, seed: int = 0) -> list[pathlib.Path]:
    torch.set_num_threads(1)
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    n_clients, rounds, seeds = (40, 20, [seed]) if quick else (100, 120, [seed, seed + 1, seed + 2])
    results = {label: [] for label, *_ in METHODS}
    d_values = [0, 2, 4] if quick else [0, 1, 2, 3, 4]
    d_results = {d: [] for d in d_values}
    for s in seeds:
        fed = federation(num_clients=n_clients, seed=s)
        model = MLP(DIM, CLASSES)
        cache: dict = {}

        def accuracies(name, hps):
            key = (name, tuple(sorted(hps.items())))
            if key not in cache:
                cache[key] = client_accuracy(name, hps, fed, model, rounds=rounds, seed=s)
            return cache[key]

        for label, name, hps, which in METHODS:
            results[label].append(accuracies(name, hps)[which])
        for d in d_values:
            acc = accuracies("plgu-lf", dict(local_rounds=10, rho=0.05, personalized_layers=d))
            d_results[d].append([acc["global"], acc["personalized"]])
    files = []
    # ECDF of per-client accuracy (all seeds pooled)
    fig, ax = plt.subplots(figsize=(6, 4.2))
    ecdf_rows = []
    for label in (m[0] for m in METHODS if "ρ=0" not in m[0]):   # ablations: table only
        acc = np.sort(np.concatenate(results[label]))
        frac = np.arange(1, len(acc) + 1) / len(acc)
        ax.step(acc, frac, where="post", label=label, lw=2 if label.startswith("PLGU") else 1,
                ls="-" if label.startswith("PLGU") else "--")
        ecdf_rows += [[label, f"{a:.6f}", f"{f:.6f}"] for a, f in zip(acc, frac)]
    ax.set_xlabel("client test accuracy")
    ax.set_ylabel("fraction of clients ≤ x")
    ax.set_title(f"label skew, N={n_clients}, 3 of {CLASSES} classes/client, {rounds} rounds")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    files += [out / "plgu_client_ecdf.png", write_csv(out / "plgu_client_ecdf.csv",
                                                 ["method", "accuracy", "ecdf"], ecdf_rows)]
    save_figure(fig, files[0], dpi=120)
    plt.close(fig)
    # table: mean ± sd over seeds of (average, lowest 5%, top 5%)
    rows, md = [], ["| method | average | lowest 5% | top 5% |", "|---|---|---|---|"]
    for label, *_ in METHODS:
        per_seed = np.array([stats(a) for a in results[label]])
        mu, sd = per_seed.mean(0), per_seed.std(0)
        rows.append([label] + [f"{v:.4f}" for v in mu] + [f"{v:.4f}" for v in sd])
        md.append(f"| {label} | " + " | ".join(
            f"{100 * m:.2f}" + (f" ± {100 * e:.2f}" if len(seeds) > 1 else "") for m, e in zip(mu, sd)) + " |")
    files.append(write_csv(out / "plgu_table.csv", ["method", "average", "lowest5", "top5",
                                               "sd_average", "sd_lowest5", "sd_top5"], rows))
    (out / "plgu_table.md").write_text(
        f"Client test accuracy (%), N={n_clients}, {rounds} rounds, seeds {seeds}; "
        f"lowest/top 5% = mean of the worst/best ceil(0.05 N) = {math.ceil(0.05 * n_clients)} clients.\n\n"
        + "\n".join(md) + "\n")
    files.append(out / "plgu_table.md")
    # effect of D
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.4), sharey=True)
    d_rows = []
    for k, (ax, which) in enumerate(zip(axes, ("global", "personalized"))):
        vals = np.array([[stats(r[k]) for r in d_results[d]] for d in d_values]).mean(1)
        for j, name in enumerate(("average", "lowest 5%", "top 5%")):
            ax.plot(d_values, vals[:, j], marker="o", label=name)
        ax.set_title(f"PLGU-LF {which}")
        ax.set_xlabel("D = personalized (unperturbed) layers")
        d_rows += [[which, d, *(f"{v:.4f}" for v in vals[i])] for i, d in enumerate(d_values)]
    axes[0].set_ylabel("client test accuracy")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    files += [out / "plgu_effect_of_D.png", write_csv(out / "plgu_effect_of_D.csv",
                                                 ["model", "D", "average", "lowest5", "top5"], d_rows)]
    save_figure(fig, files[-2], dpi=120)
    plt.close(fig)
    return files


if __name__ == "__main__":  # pragma: no cover
    import sys
    import time

    t0 = time.perf_counter()
    paths = make(sys.argv[1] if len(sys.argv) > 1 else "/tmp/plgu_fig",
                 quick="--full" not in sys.argv)
    print(f"{time.perf_counter() - t0:.1f}s", *map(str, paths), sep="\n")
