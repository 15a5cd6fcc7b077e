"""pFedMe theory vs measurement on the engine (docs/formulas.md §E.B7–9; pFedMe, NeurIPS 2020,
Theorems 1–2).  Experiments: :mod:`verification.experiments.pfedme_quadratic`.  Three PNG + CSV pairs:

* ``pfedme_rate_strongly_convex`` (Theorem 1(a), E.B7) — left: F(w̄_T) − F* vs T for
  noise-free QuadraticMean clients (λ = 4, exact prox, S = N) with the bound's initial term
  ``c·Δ₀μ_F e^{−η̃μ_F T/2}`` (η̂₁ read as the effective step η̃ = ηβR; the constant c is
  NORMALISED: the smallest c with bound ≥ measurement at every T); right: the stationary
  floor vs δ² (mini-batch size varied, ν = 0) with the floor term ``c·λ²δ²/μ_F`` (c fitted
  by least squares in log space, slope fixed at 1) and the fitted power law; third: the
  noise-free stationary floor vs N/S − 1 with ``c·(N/S − 1)`` (c fitted, slope fixed);
* ``pfedme_ball_lambda`` (Theorems 1(b)/2(b), E.B9) — (1/N)Σ‖θ̃_i − w‖² vs λ with the
  prediction σ²_{F,1}(λ)/λ² + δ² (constants 1, not fitted) for quadratic clients, and the
  measured ball of non-convex cosine clients for λ > 2√2·L;
* ``pfedme_nonconvex_T`` (Theorem 2(a), E.B8) — E‖∇F(w_{t*})‖² vs T (non-convex cosine
  clients, one run per horizon T at the step η_T ∝ T^{−1/3}) with the fitted power law and a
  T^{−2/3} reference through the first point: the experiment, horizons, seeds and fit of the
  check ``pfedme.nonconvex_rate_T``, so the figure shows the exponent the check reports
  (an earlier version fitted prefix averages of one constant-step run: −0.99, the
  transient Δ_F/(ηT), against the check's −0.80).
"""

from __future__ import annotations

import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402

from paper_figures._io import write_csv  # noqa: E402
from paper_figures._style import save_figure  # noqa: E402
from verification.experiments import pfedme_quadratic as ex  # noqa: E402
from verification.estimators.fitting import fit_loglog  # noqa: E402


#: Experiment sizes per mode (tests shrink these).
SIZES = {
    "quick": {"rounds": 60, "batch_sizes": (1, 4, 16), "floor_seeds": 2, "floor_rounds": 40,
              "sampled": (5, 10, 20),
              "lams": (10.0, 30.0, 100.0, 300.0), "ball_seeds": 2, "ball_rounds": 10,
              "nc_ts": (16, 32, 64, 128), "nc_seeds": 2, "nc_lr0": 0.2, "clients": 20},
    "full": {"rounds": 150, "batch_sizes": (1, 2, 4, 8, 16, 32), "floor_seeds": 4,
             "floor_rounds": 150, "sampled": (2, 4, 5, 10, 20, 30),
             "lams": (5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0),
             "ball_seeds": 4, "ball_rounds": 30, "nc_ts": (16, 32, 64, 128, 256, 512, 1024),
             "nc_seeds": 4, "nc_lr0": 0.2, "clients": 20},
}




def _save(fig, path: pathlib.Path) -> pathlib.Path:
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)
    return path


def strongly_convex(out: pathlib.Path, z: dict, seed: int) -> list[pathlib.Path]:
    r = ex.strongly_convex_run(rounds=z["rounds"], seed=seed, clients=z["clients"])
    T, gap = r["T"], r["avg_gap"]
    shape = r["Delta0"] * r["mu_F"] * np.exp(-r["eta_eff"] * r["mu_F"] * T / 2)
    ok = gap > 1e-30
    c = float(np.max(gap[ok] / shape[ok]))
    fl = ex.floor_vs_delta(batch_sizes=z["batch_sizes"],
                           seeds=tuple(seed + s for s in range(z["floor_seeds"])),
                           rounds=z["floor_rounds"], clients=50, dim=40,
                           local_rounds=1, lr=1.0)
    sp = ex.floor_vs_sampling(clients=40, sampled=z["sampled"], rounds=z["floor_rounds"],
                              seeds=tuple(seed + s for s in range(z["floor_seeds"])), dim=40,
                              local_rounds=1, lr=1.0)
    s_floor = sp["floor"].mean(0)
    c_samp = float(np.exp(np.mean(np.log(s_floor / sp["ratio"]))))
    dsq, floor = fl["delta_sq"], fl["floor"].mean(0)
    term = fl["lam"] ** 2 * dsq / fl["mu_F"]
    c_floor = float(np.exp(np.mean(np.log(floor / term))))
    fit = fit_loglog(dsq, fl["floor"], seed=seed)
    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(14, 3.8))
    a1.semilogy(T[ok], gap[ok], "o-", ms=3, label="measured F(w̄_T) − F*")
    a1.semilogy(T, c * shape, "--", label=f"bound initial term, c={c:.2g} (normalised)")
    a1.set_xlabel("T (rounds)")
    a1.set_title("Theorem 1(a): linear decay (noise-free)")
    a1.legend(fontsize=8)
    a2.loglog(dsq, floor, "o", label="measured floor")
    a2.loglog(dsq, c_floor * term, "--", label=f"c·λ²δ²/μ_F, c={c_floor:.2g} (fitted)")
    a2.loglog(dsq, fit.predict(dsq), ":", label=f"fit: slope {fit.slope:.2f}")
    a2.set_xlabel("δ² (exact, mini-batch noise)")
    a2.set_title("Theorem 1(a): floor vs δ²")
    a2.legend(fontsize=8)
    a3.loglog(sp["ratio"], s_floor, "o", label="measured floor (δ = 0)")
    a3.loglog(sp["ratio"], c_samp * sp["ratio"], "--", label=f"c·(N/S − 1), c={c_samp:.2g} (fitted)")
    a3.set_xlabel("N/S − 1 (N = 40)")
    a3.set_title("Theorem 1(a): client-sampling term")
    a3.legend(fontsize=8)
    png = _save(fig, out / "pfedme_rate_strongly_convex.png")
    rows = [["decay", int(t), g, c * s] for t, g, s in zip(T, gap, shape)]
    rows += [["floor", d, f, c_floor * m] for d, f, m in zip(dsq, floor, term)]
    rows += [["sampling", r_, f, c_samp * r_] for r_, f in zip(sp["ratio"], s_floor)]
    return [png, write_csv(out / "pfedme_rate_strongly_convex.csv",
                      ["panel", "x", "measured", "theory_curve"], rows)]


def ball(out: pathlib.Path, z: dict, seed: int) -> list[pathlib.Path]:
    b = ex.personalized_ball(lams=z["lams"], seeds=tuple(seed + s for s in range(z["ball_seeds"])),
                             rounds=z["ball_rounds"])
    gap, pred = b["gap"].mean(0), b["predicted"] + b["delta_sq"]
    fit = fit_loglog(b["lam"], b["gap"], seed=seed)
    nc_lams = tuple(l for l in z["lams"] if l > 2 * 2 ** 0.5 * ex.CosineQuadratic(1).L)
    c = ex.personalized_ball(lams=nc_lams, seeds=tuple(seed + s for s in range(z["ball_seeds"])),
                             rounds=z["ball_rounds"], model="cosine")
    fig, ax = plt.subplots(figsize=(5, 3.8))
    ax.loglog(b["lam"], gap, "o-", label=f"quadratic, measured (slope {fit.slope:.2f})")
    ax.loglog(b["lam"], pred, "--", label="σ²_F1/λ² + δ² (constants 1)")
    if len(nc_lams) >= 2:
        cf = fit_loglog(c["lam"], c["gap"], seed=seed, min_points=2)
        ax.loglog(c["lam"], c["gap"].mean(0), "s-", label=f"non-convex (slope {cf.slope:.2f})")
    nc = dict(zip(c["lam"].tolist(), c["gap"].mean(0).tolist()))
    ax.set_xlabel("λ")
    ax.set_ylabel("(1/N)Σ‖θ̃_i − w‖²")
    ax.set_title("Theorems 1(b)/2(b): personalized ball")
    ax.legend(fontsize=8)
    png = _save(fig, out / "pfedme_ball_lambda.png")
    return [png, write_csv(out / "pfedme_ball_lambda.csv",
                      ["lambda", "measured", "predicted", "measured_nonconvex"],
                      [[l, g, p, nc.get(l, "")] for l, g, p in zip(b["lam"], gap, pred)])]


def nonconvex(out: pathlib.Path, z: dict, seed: int) -> list[pathlib.Path]:
    """The data and the fit of the check ``pfedme.nonconvex_rate_T`` (the same experiment,
    :func:`~verification.experiments.pfedme_quadratic.nonconvex_rate_runs`, the same
    horizons, seeds and bootstrap fit): one run per T with η_T ∝ T^{−1/3}."""
    ts = np.array(z["nc_ts"])
    y = ex.nonconvex_rate_runs(ts, range(z["nc_seeds"]), lr0=z["nc_lr0"], seed=seed)
    fit = fit_loglog(ts, y, seed=seed)
    mean = y.mean(0)
    ref = mean[0] * (ts / ts[0]) ** (-2 / 3)
    fig, ax = plt.subplots(figsize=(5.2, 3.9))
    for row in y:
        ax.loglog(ts, row, ".", color="grey", alpha=0.5)
    ax.loglog(ts, mean, "o-", label=f"measured E‖∇F(w_t*)‖², mean of {len(y)} seeds")
    lo, hi = fit.ci
    ax.loglog(ts, fit.predict(ts), ":",
              label=f"fit T^{fit.slope:.2f} (95% CI [{lo:.2f}, {hi:.2f}])")
    ax.loglog(ts, ref, "--", label="claim T^(−2/3), through the first point")
    ax.set_xticks(ts, [str(int(t)) for t in ts])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_xlabel("horizon T (rounds; one run per T, step η_T ∝ T^(−1/3))")
    ax.set_title("Theorem 2(a), non-convex: the data and fit of pfedme.nonconvex_rate_T",
                 fontsize=8)
    ax.legend(fontsize=7)
    png = _save(fig, out / "pfedme_nonconvex_T.png")
    return [png, write_csv(out / "pfedme_nonconvex_T.csv",
                      ["T", "measured_mean", "fitted", "reference_T^-2/3"],
                      [[int(t), m, float(fit.predict(t)), r] for t, m, r in zip(ts, mean, ref)])]


def make(out_dir, *, quick: bool = False, seed: int = 0) -> list[pathlib.Path]:
    """Write the three figure/CSV pairs (see module docstring)."""
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    z = SIZES["quick" if quick else "full"]
    return strongly_convex(out, z, seed) + ball(out, z, seed) + nonconvex(out, z, seed)
