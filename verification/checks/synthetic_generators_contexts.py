"""Checks of the planted-context generators (``synthetic/contexts.py``, built for CGPFL,
IJCAI 2022) against their docstrings (continues :mod:`verification.checks.synthetic_generators`).

``synthetic.contexts_planted_moments`` (inequality, 6 standard errors from the spec's own
variances, structural identities as z = ∞ when broken):

* classification: labels re-derived exactly as argmax(x W_i + b_i) from the returned client
  models; W_k, b_k entries vs separation²; W_i − W_k vs τ²; within-client feature variance of
  coordinate j (1-based) vs j^{-1.2} (the docstring's (j+1)^{-1.2} with j 0-based); balanced
  assignment (every context ⌊N/K₀⌋ or ⌈N/K₀⌉ clients); the spread of the client feature
  averages across 400 small clients vs β + 1/d + (Σ_j j^{-1.2})/(d² n_i);
* regression: y − ⟨w_i, x⟩ vs noise², w_i − c_k vs τ², c_k vs separation²;
* planted model vectors: the smallest centre distance equals ``separation`` (an identity),
  θ_i − c_k vs noise² per coordinate.

The feature law's B_i ~ N(0, β) is read here as the code does (β a variance: sd √β), which
differs from ``synthetic/fedprox.py`` (β a standard deviation) — reported, not changed.
"""

from __future__ import annotations

import numpy as np

from synthetic import contexts
from verification.core.registry import Context, Outcome, check
from verification.checks.synthetic_generators_shifts import TOL_REASON, _outcome, _z_var

CLASSIF = dict(k0=6, dim=10, num_classes=10, separation=2.0, tau=0.3, size_range=(50, 100))
SPREAD_CLIENTS = 400
REGRESS = dict(k0=6, dim=30, separation=2.0, tau=0.3, noise=0.5, size_range=(50, 100))


@check("synthetic.contexts_planted_moments", paper="CGPFL (IJCAI 2022) premise; toolkit "
       "generators synthetic/contexts.py",
       reference="W_k ~ N(0, s²), W_i = W_k + τZ, x ~ N(v_i, diag(j^{-1.2})), "
                 "y = argmax(xW_i + b_i); w_i = c_k + τZ, y = <w_i, x> + noise·ε",
       kind="inequality", tolerance=6.0, tolerance_reason=TOL_REASON,
       quick={"num_clients": 24}, full={"num_clients": 240})
def contexts_planted_moments(ctx: Context) -> Outcome:
    """Largest |z| over the statistics in the module doc; ∞ if an identity breaks."""
    n = ctx.params["num_clients"]
    cl = contexts.classification_contexts(n, seed=ctx.seed, **CLASSIF)
    broken = ""
    sizes = np.bincount(cl.assignment, minlength=CLASSIF["k0"])
    if sizes.min() < n // CLASSIF["k0"] or sizes.max() > -(-n // CLASSIF["k0"]):
        broken = f"unbalanced contexts {sizes.tolist()}"
    dev_w, within, dof = [], 0.0, 0
    for x, y, a, (w_i, b_i) in zip(cl.xs, cl.ys, cl.assignment, cl.client_models):
        if not np.array_equal(y, np.argmax(x @ w_i + b_i, axis=1)):
            broken = "a label is not argmax(x W_i + b_i)"
        w_k, b_k = cl.context_models[a]
        dev_w += [(w_i - w_k).ravel(), b_i - b_k]
        within = within + ((x - x.mean(0)) ** 2).sum(0)
        dof += len(x) - 1
    sig = np.arange(1, CLASSIF["dim"] + 1, dtype=float) ** -1.2
    z_feat = (within / dof / sig - 1) / np.sqrt(2 / dof)
    ctx_w = np.concatenate([np.concatenate([w.ravel(), b]) for w, b in cl.context_models])
    # B_i spread: many small clients, β = 2 (variance 2 as the code reads it; sd 2 would be 4)
    wide = contexts.classification_contexts(SPREAD_CLIENTS, seed=ctx.seed, **{
        **CLASSIF, "beta": 2.0, "size_range": (5, 10)})
    avg = np.array([x.mean() for x in wide.xs])
    n_w = np.array([len(x) for x in wide.xs])
    spread_var = 2.0 + 1 / CLASSIF["dim"] + np.mean(sig.sum() / (CLASSIF["dim"] ** 2 * n_w))
    rg = contexts.regression_contexts(n, seed=ctx.seed, **REGRESS)
    resid = np.concatenate([y - x @ w for x, y, w in zip(rg.xs, rg.ys, rg.client_models)])
    dev_r = np.concatenate([w - rg.context_models[a]
                            for w, a in zip(rg.client_models, rg.assignment)])
    # planted_model_vectors (the CGPFL checks' clients): the smallest distance between two
    # contexts' centres is exactly ``separation`` (read with noise 0: the vectors are the
    # centres), and θ_i − c_k has variance noise² per coordinate (issue 41: read by no check)
    sep, noise, dim_p = 3.0, 0.5, 5
    exact, lab = contexts.planted_model_vectors(n, 4, dim_p, separation=sep, noise=0.0,
                                                seed=ctx.seed)
    centres = np.array([exact[lab == c][0] for c in range(4)])
    gaps = np.sqrt(((centres[:, None] - centres[None]) ** 2).sum(-1))[np.triu_indices(4, 1)]
    if abs(gaps.min() - sep) > 1e-12 * sep:   # a rescaling by one float64 division
        broken = f"planted centres' smallest distance {gaps.min():.6g} != separation {sep}"
    noisy, lab2 = contexts.planted_model_vectors(max(n, 200), 4, dim_p, separation=sep,
                                                 noise=noise, seed=ctx.seed)
    exact2, _ = contexts.planted_model_vectors(max(n, 200), 4, dim_p, separation=sep,
                                               noise=0.0, seed=ctx.seed)
    z = {"planted_within_spread": _z_var((noisy - exact2).ravel(), noise ** 2),
         "class_context_models": _z_var(ctx_w, CLASSIF["separation"] ** 2),
         "class_client_deviation": _z_var(np.concatenate(dev_w), CLASSIF["tau"] ** 2),
         "class_features": z_feat[np.argmax(np.abs(z_feat))],
         "class_mean_spread": (avg.var(ddof=1) / spread_var - 1) / np.sqrt(2 / (len(avg) - 1)),
         "reg_noise": _z_var(resid, REGRESS["noise"] ** 2),
         "reg_client_deviation": _z_var(dev_r, REGRESS["tau"] ** 2),
         "reg_centres": _z_var(np.concatenate(rg.context_models), REGRESS["separation"] ** 2)}
    return _outcome(ctx, z, broken)
