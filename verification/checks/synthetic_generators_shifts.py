"""Checks of the planted-cluster and feature-shift generators against their docstrings
(continues :mod:`verification.checks.synthetic_generators`).

* ``synthetic.permuted_labels_moments``: ``synthetic/permuted_labels.py`` (toolkit
  construction): μ_c ~ N(0, separation² I), x = μ_c + noise·N(0, I), y = σ_i(c) with σ_i a
  permutation for a fraction ``permuted`` of the clients; the cluster of each sample is
  recovered from its label through σ_i⁻¹ (exact: it must be one of the client's clusters).
* ``synthetic.feature_shift_moments``: ``synthetic/feature_shift.py`` (FedBN's setting, ICLR
  2021, toolkit transforms): x ← m + c_i(x − m) + σ_i·N(0, 1), log c_i ~ U[−log C, log C],
  σ_i ~ U[0, noise]; run on a pool whose every row is the same zero-mean ±1 pattern, so the
  pre-shift input of every output row is known.

Both are ``inequality`` checks: the largest |z| over the statistics listed must stay within
6 standard errors computed from the spec's own variances.
"""

from __future__ import annotations

import numpy as np

from synthetic import feature_shift, permuted_labels
from verification.core.registry import Context, Outcome, check

TOL_REASON = ("6 standard errors from the spec's own variances: Gaussian sample variance "
              "SE/σ² = sqrt(2/m), uniform mean SE = width/sqrt(12 m), contrast estimate "
              "SE = σ_i/sqrt(Σx²); structural identities count as z = ∞ when broken")


def _z_var(sample, var):
    return (np.mean(np.square(sample)) / var - 1) / np.sqrt(2 / np.size(sample))


def _outcome(ctx: Context, z: dict, broken: str = "") -> Outcome:
    worst = float("inf") if broken else max(abs(float(v)) for v in z.values())
    return Outcome(measured=worst, theoretical=0.0, holds=worst <= ctx.tolerance,
                   detail=(broken + "; " if broken else "")
                   + ", ".join(f"{k} {float(v):.2f}" for k, v in z.items()),
                   extra={k: float(v) for k, v in z.items()})


PERMUTED = dict(num_clusters=10, classes_per_client=5, dim=20, size_range=(60, 150),
                separation=4.0, noise=0.5, permuted=0.5)


@check("synthetic.permuted_labels_moments", paper="toolkit construction (planted clusters, "
       "permuted labels; synthetic/permuted_labels.py)",
       reference="μ_c ~ N(0, s² I), x = μ_c + noise·N(0, I), y = σ_i(c)", kind="inequality",
       tolerance=6.0, tolerance_reason=TOL_REASON,
       quick={"num_clients": 20}, full={"num_clients": 200})
def permuted_labels_moments(ctx: Context) -> Outcome:
    """z of the cluster means' variance vs separation², of x − μ_c vs noise², of the
    number of permuted clients vs round(permuted·N) (exact); labels → clusters exactly."""
    n = ctx.params["num_clients"]
    means, clusters, sigmas, xs, ys = permuted_labels._draw(n, seed=ctx.seed, **{
        k: PERMUTED[k] for k in ("num_clusters", "classes_per_client", "dim", "size_range",
                                 "separation", "noise", "permuted")})
    broken, resid = "", []
    for cl, sig, x, y in zip(clusters, sigmas, xs, ys):
        c = np.argsort(sig)[y]  # σ_i⁻¹(y)
        if not np.all(np.isin(c, cl)) or not PERMUTED["size_range"][0] <= len(y) \
                <= PERMUTED["size_range"][1]:
            broken = "a label outside the client's clusters or a size outside size_range"
        resid.append(x - means[c])
    n_perm = sum(not np.array_equal(s, np.arange(len(s))) for s in sigmas)
    if abs(n_perm - round(PERMUTED["permuted"] * n)) > 0:
        broken = f"{n_perm} permuted clients, spec {round(PERMUTED['permuted'] * n)}"
    z = {"means": _z_var(means, PERMUTED["separation"] ** 2),
         "noise": _z_var(np.concatenate(resid), PERMUTED["noise"] ** 2)}
    return _outcome(ctx, z, broken)


SHIFT = dict(rotation=0.0, contrast=2.0, noise=0.5)


@check("synthetic.feature_shift_moments", paper="FedBN (ICLR 2021) setting, toolkit transforms "
       "(synthetic/feature_shift.py)",
       reference="x ← m + c_i(x − m) + σ_i·N(0,1), log c_i ~ U[±log C], σ_i ~ U[0, noise]",
       kind="inequality", tolerance=6.0, tolerance_reason=TOL_REASON,
       quick={"num_clients": 200, "rows": 4000}, full={"num_clients": 1000, "rows": 40000})
def feature_shift_moments(ctx: Context) -> Outcome:
    """z of: mean σ_i/noise vs 1/2; mean log c_i vs 0 and its variance vs (log C)²/3; each
    client's contrast re-estimated from its rows vs its recorded c_i (largest |z|); the
    residual after the contrast vs σ_i² (pooled, standardized by σ_i)."""
    n, rows, d = ctx.params["num_clients"], ctx.params["rows"], 8
    pattern = np.tile([-1.0, 1.0], d // 2)
    x = np.tile(pattern, (rows, 1))
    y = np.arange(rows) % 2
    part, shifts = feature_shift.feature_shift_partition(x, y, num_clients=n, seed=ctx.seed,
                                                         **SHIFT)
    log_cmax = np.log(SHIFT["contrast"])
    sig = np.array([s.noise for s in shifts])
    logc = np.log([s.contrast for s in shifts])
    z_c, std = [], []
    for xi, s in zip(part.xs, shifts):
        xi = xi.astype(np.float64)
        c_hat = np.sum(xi * pattern) / (xi.shape[0] * d)
        z_c.append((c_hat - s.contrast) / (s.noise / np.sqrt(xi.shape[0] * d)))
        std.append((xi - s.contrast * pattern) / s.noise)
    z = {"noise_mean": (sig.mean() / SHIFT["noise"] - 0.5) / np.sqrt(1 / (12 * n)),
         "log_contrast_mean": logc.mean() / (2 * log_cmax / np.sqrt(12 * n)),
         # (U[-a, a])² has variance 4a⁴/45 = 0.8·(a²/3)²: relative SE sqrt(0.8/m)
         "log_contrast_var": _z_var(logc, log_cmax ** 2 / 3) * np.sqrt(2 / 0.8),
         "contrast_fit": max(z_c, key=abs),
         "noise_fit": _z_var(np.concatenate(std), 1.0)}
    return _outcome(ctx, z)
