"""Checks of the synthetic generators (synthetic/) against their specifications.

A wrong constant in a generator (a noise scale ×2, Σ_jj = j^{-1.2} read as j^{-0.6}, α and
β swapped, a Dirichlet concentration ×2) changes the data silently; these checks compare the
generated data with what the specification implies, through the generators' module
attributes (so a patched generator is the one checked):

* ``synthetic.fedprox_reference_replay`` (identity): Synthetic(α, β) of FedProx (Li et al.,
  MLSys 2020; pFedMe §5) replayed from the reference order in ``synthetic/fedprox.py``'s
  module doc with numpy's own ``RandomState`` draws (``multivariate_normal`` itself, not the
  module's SVD shortcut), features and labels compared;
* ``synthetic.fedprox_feature_moments`` (inequality): within-client feature variances
  against Σ_jj = j^{-1.2}, the spread of the client feature means around B_i against 1, and
  the spread of the B_i across clients against β² (closed forms of the same spec);
* ``synthetic.dirichlet_share_variance`` (inequality): ``dirichlet_partition``'s per-class
  client shares against Var = (1/N)(1 − 1/N)/(Nα + 1) (its docstring; Dirichlet moments)
  plus the multinomial term;
* ``synthetic.ppfe_linear_moments`` (inequality): PPFE's linear generator (eqs. 15-16 as
  reconstructed in ``synthetic/linear.py``): residual, feature, model and covariance-entry
  moments against σ_ε², Σ_i, 1, s², (lo+hi)/2, and the mixing identity of eq. (16) exactly;
* ``synthetic.label_skew_counts`` (inequality): ``label_skew_partition``'s count rules
  exactly, its size law U{lo..hi} and uniform label choice at 6 standard errors.

Further generators: :mod:`verification.checks.synthetic_generators_shifts` (permuted labels,
feature shift) and :mod:`verification.checks.synthetic_generators_contexts` (planted contexts).

Not every spec parameter is visible in the data: in Synthetic(α, β) the per-client shifts
mean_W and mean_b add the same amount to every class score, so α never changes a label
in distribution; only the reference replay (a different random stream) sees α.
"""

from __future__ import annotations

import numpy as np

from synthetic import fedprox, partition
from synthetic import linear as synthetic_linear
from verification.core.registry import Context, Outcome, check

PAPER = "FedProx Synthetic(α, β) (Li et al., MLSys 2020), used by pFedMe (NeurIPS 2020) §5"


def _replay(alpha, beta, *, num_clients, dim, num_classes, size_multiplier, seed, cap):
    """The reference script's draw order (fedprox module doc, steps 1-7, non-iid)."""
    rng = np.random.RandomState(seed)
    sizes = (rng.lognormal(4, 2, num_clients).astype(int) + 50) * size_multiplier
    sizes = np.minimum(sizes, cap)
    mean_w = rng.normal(0, alpha, num_clients)
    b_feat = rng.normal(0, beta, num_clients)
    sigma = np.diag(np.power(np.arange(1, dim + 1), -1.2))
    mean_x = np.array([rng.normal(b_feat[i], 1, dim) for i in range(num_clients)])
    for i in range(num_clients):
        w = rng.normal(mean_w[i], 1, (dim, num_classes))
        b = rng.normal(mean_w[i], 1, num_classes)
        x = rng.multivariate_normal(mean_x[i], sigma, int(sizes[i]))
        yield x, np.argmax(x @ w + b, axis=1)


REPLAY = dict(alpha=0.5, beta=1.0, num_clients=12, dim=8, num_classes=5, size_multiplier=5)


@check("synthetic.fedprox_reference_replay", paper=PAPER,
       reference="FedProx §5.1 generate_synthetic, its draw order (sizes, model and feature "
                 "means, per-client W, b, x)",
       kind="identity", tolerance=1e-9,
       tolerance_reason="same random draws; numpy multivariate_normal (SVD per client) vs the "
                        "module's shared SVD differ by round-off ~1e-15 per feature",
       quick={"cap": 40}, full={"cap": 400})
def fedprox_reference_replay(ctx: Context) -> Outcome:
    """Max |x - x_ref| over features (labels must agree exactly; a disagreeing label or size
    counts as an infinite error)."""
    cap = ctx.params["cap"]
    xs, ys = fedprox.generate(**REPLAY, seed=ctx.seed, max_client_size=cap)
    err, bad_labels = 0.0, 0
    ref = list(_replay(**REPLAY, seed=ctx.seed, cap=cap))
    if len(ref) != len(xs):
        err = float("inf")
    for (x, y), (xr, yr) in zip(zip(xs, ys), ref):
        if x.shape != xr.shape:
            err = float("inf")
            continue
        err = max(err, float(np.max(np.abs(x - xr))))
        bad_labels += int(np.sum(y != yr))
    if bad_labels:
        err = float("inf")
    return Outcome(measured=err, theoretical=0.0, holds=err <= ctx.tolerance,
                   detail=f"max |x - x_ref| = {err:.2e}, {bad_labels} labels differ")


MOMENTS = dict(alpha=0.5, beta=1.0, dim=10, num_classes=5, size_multiplier=5)


@check("synthetic.fedprox_feature_moments", paper=PAPER,
       reference="FedProx §5.1: x ~ N(v_i, Σ), Σ_jj = j^{-1.2}, v_i ~ N(B_i, 1), B_i ~ N(0, β)",
       kind="inequality", tolerance=6.0,
       tolerance_reason="6 standard errors of each sample variance, computed from the spec's "
                        "own Gaussian variance: SE(s²)/σ² = sqrt(2/dof)",
       quick={"num_clients": 300, "cap": 40}, full={"num_clients": 2000, "cap": 200})
def fedprox_feature_moments(ctx: Context) -> Outcome:
    """Largest |ŝ²/σ² - 1| / SE over: the dim within-client variances (σ² = j^{-1.2}), the
    spread of client means around their own average (σ² = 1 + mean_j Σ_jj/n_i), and the
    spread of the client averages across clients (σ² = β² + 1/d + Σ_j Σ_jj/(d² n_i))."""
    n_cl, cap, d = ctx.params["num_clients"], ctx.params["cap"], MOMENTS["dim"]
    xs, _ = fedprox.generate(**MOMENTS, num_clients=n_cl, seed=ctx.seed, max_client_size=cap)
    sig = np.power(np.arange(1, d + 1), -1.2)
    n = np.array([len(x) for x in xs], dtype=float)
    means = np.array([x.mean(axis=0) for x in xs])
    within = sum(((x - m) ** 2).sum(axis=0) for x, m in zip(xs, means))
    dof_w = n.sum() - n_cl
    z_within = (within / dof_w / sig - 1) / np.sqrt(2 / dof_w)
    avg = means.mean(axis=1)  # ≈ B_i + mean_j noise
    spread = ((means - avg[:, None]) ** 2).sum() / (n_cl * (d - 1))
    spread_var = 1 + np.mean(sig.mean() / n)  # v_ij - v̄_i plus sampling noise of x̄_ij
    z_spread = (spread / spread_var - 1) / np.sqrt(2 / (n_cl * (d - 1)))
    across_var = MOMENTS["beta"] ** 2 + 1 / d + np.mean(sig.sum() / (d * d * n))
    across = avg.var(ddof=1)
    z_across = (across / across_var - 1) / np.sqrt(2 / (n_cl - 1))
    z = np.concatenate([z_within, [z_spread, z_across]])
    worst = float(np.max(np.abs(z)))
    return Outcome(measured=worst, theoretical=0.0, holds=worst <= ctx.tolerance,
                   detail=f"max |z| = {worst:.2f} (within-client {np.max(np.abs(z_within)):.2f}, "
                          f"mean spread {z_spread:.2f}, across clients {z_across:.2f})",
                   extra={"z_within": z_within.tolist(), "z_spread": float(z_spread),
                          "z_across": float(z_across)})


@check("synthetic.dirichlet_share_variance", paper="Dirichlet label skew (Hsu et al. 2019; "
       "NIID-Bench, Li et al., ICDE 2022)",
       reference="per-class Dirichlet shares p_k ~ Dir(α·1_N): Var p_ik = (1/N)(1-1/N)/(Nα+1)",
       kind="inequality", tolerance=6.0,
       tolerance_reason="6 standard errors of the mean over independent classes of the "
                        "per-class mean squared share deviation (SE from the classes' spread)",
       quick={"classes": 200, "per_class": 100}, full={"classes": 1000, "per_class": 400})
def dirichlet_share_variance(ctx: Context) -> Outcome:
    """|V̂ - V| / SE with V = Var(p)(1 - 1/n_k) + (1/N)(1 - 1/N)/n_k the variance of a
    client's share s_ik = c_ik/n_k of class k (Dirichlet plus multinomial), V̂ the mean of
    (s_ik - 1/N)² (mean known: 1/N), and means per class checked to sum to 1 exactly."""
    k, per, n_cl, alpha = ctx.params["classes"], ctx.params["per_class"], 10, 1.0
    y = np.repeat(np.arange(k), per)
    part = partition.dirichlet_partition(np.zeros((len(y), 1)), y, num_clients=n_cl,
                                         alpha=alpha, seed=ctx.seed, min_size=0)
    counts = np.array([np.bincount(yi, minlength=k) for yi in part.ys])  # [N, K]
    if not np.all(counts.sum(axis=0) == per):
        return Outcome(measured=float("inf"), theoretical=0.0, holds=False,
                       detail="class counts do not sum to the pool's")
    shares = counts / per
    var_p = (1 / n_cl) * (1 - 1 / n_cl) / (n_cl * alpha + 1)
    theory = var_p * (1 - 1 / per) + (1 / n_cl) * (1 - 1 / n_cl) / per
    per_class = ((shares - 1 / n_cl) ** 2).mean(axis=0)
    se = per_class.std(ddof=1) / np.sqrt(k)
    z = float(abs(per_class.mean() - theory) / se)
    return Outcome(measured=z, theoretical=0.0, holds=z <= ctx.tolerance,
                   detail=f"mean squared share deviation {per_class.mean():.5f} vs "
                          f"{theory:.5f} (SE {se:.5f})")


LINEAR = dict(num_clients=20, dim=50, n_test=50, alpha=0.3, noise_var=0.25, cov_low=0.5,
              cov_high=1.5, local_scale=2.0)


@check("synthetic.ppfe_linear_moments", paper="PPFE (arXiv 2602.14244, 2026)",
       reference="eqs. (15)-(16) as reconstructed (toolkit reading): y = <w_i, x> + ε, "
                 "w_i = (1-α) w_g + α w_l,i",
       kind="inequality", tolerance=6.0,
       tolerance_reason="6 standard errors from the spec's own variances: sample variance of "
                        "Gaussians SE/σ² = sqrt(2/dof), uniform mean SE = (hi-lo)/sqrt(12 m); "
                        "the mixing identity to 1e-12 (float64 round-off) counts as z = 0 or ∞",
       quick={"n_train": 40}, full={"n_train": 400})
def ppfe_linear_moments(ctx: Context) -> Outcome:
    """Largest z over: residual y - <w_i, x> variance vs σ_ε², x_ij²/Σ_i,jj mean vs 1 (for
    the entries of Σ below and above their midpoint separately),
    w_g variance vs 1, w_l variance vs s², mean of Σ_i's entries vs (lo+hi)/2; the eq. (16)
    identity w = (1-α) w_g + α w_l is checked exactly (infinite z if broken)."""
    fed = synthetic_linear.make_linear_federation(**LINEAR, n_train=ctx.params["n_train"],
                                                  seed=ctx.seed)
    a = LINEAR["alpha"]
    mix_err = float(np.max(np.abs(fed.w - ((1 - a) * fed.w_global + a * fed.w_local))))
    x = np.concatenate([fed.x_train, fed.x_test], axis=1)
    y = np.concatenate([fed.y_train, fed.y_test], axis=1)
    resid = y - np.einsum("ncd,nd->nc", x, fed.w)

    def z_var(sample, var):
        return (np.mean(sample ** 2) / var - 1) / np.sqrt(2 / sample.size)

    lo, hi = LINEAR["cov_low"], LINEAR["cov_high"]
    std = np.moveaxis(x / np.sqrt(fed.cov_diag)[:, None, :], 1, 0)  # [n, N, d]
    small = fed.cov_diag < (lo + hi) / 2
    z = {"noise": z_var(resid, LINEAR["noise_var"]),
         # split by Σ entry: x read with Σ for its root keeps the mean of x²/Σ at E[Σ] = 1
         "features_small_cov": z_var(std[:, small], 1.0),
         "features_large_cov": z_var(std[:, ~small], 1.0),
         "w_global": z_var(fed.w_global, 1.0),
         "w_local": z_var(fed.w_local, LINEAR["local_scale"] ** 2),
         "cov_mean": (fed.cov_diag.mean() - (lo + hi) / 2)
         / ((hi - lo) / np.sqrt(12 * fed.cov_diag.size))}
    worst = max(abs(float(v)) for v in z.values()) if mix_err <= 1e-12 else float("inf")
    return Outcome(measured=worst, theoretical=0.0, holds=worst <= ctx.tolerance,
                   detail=", ".join(f"{k} {float(v):.2f}" for k, v in z.items())
                   + f"; mixing identity error {mix_err:.1e}",
                   extra={k: float(v) for k, v in z.items()})


@check("synthetic.label_skew_counts", paper="pFedMe (NeurIPS 2020) §5 MNIST label skew; "
       "synthetic/partition.py label_skew_partition",
       reference="c distinct labels per client (uniform), n_i ~ U{lo..hi}, n_i//c per label "
                 "(+1 for n_i mod c of them), no sample used twice",
       kind="inequality", tolerance=6.0,
       tolerance_reason="6 standard errors: mean size SE = sqrt(((hi-lo+1)²-1)/12 / N); label "
                        "frequency SE = sqrt(p(1-p)/N) with p = c/C; the count rules exact "
                        "(z = ∞ when broken)",
       quick={"num_clients": 400}, full={"num_clients": 4000})
def label_skew_counts(ctx: Context) -> Outcome:
    """Largest |z| of the mean client size, of the share of sizes divisible by c and of each
    label's frequency among clients."""
    n, n_labels, c, lo, hi = ctx.params["num_clients"], 10, 3, 5, 40
    y = np.repeat(np.arange(n_labels), n * hi)
    part = partition.label_skew_partition(np.arange(len(y))[:, None], y, num_clients=n,
                                          classes_per_client=c, size_range=(lo, hi),
                                          seed=ctx.seed)
    broken = ""
    sizes = np.array([len(yi) for yi in part.ys])
    used = np.concatenate([xi[:, 0] for xi in part.xs])
    if len(np.unique(used)) != len(used) or np.any(y[used.astype(int)] != np.concatenate(part.ys)):
        broken = "a sample used twice or relabelled"
    held = np.zeros(n_labels)
    for yi, s in zip(part.ys, sizes):
        labs, counts = np.unique(yi, return_counts=True)
        held[labs] += 1
        if len(labs) != c or counts.min() != s // c or counts.max() > s // c + 1 \
                or counts.sum() != s:
            broken = f"a client with labels {labs.tolist()} counts {counts.tolist()}"
    p = c / n_labels
    z_size = (sizes.mean() - (lo + hi) / 2) / np.sqrt(((hi - lo + 1) ** 2 - 1) / 12 / n)
    z_lab = (held / n - p) / np.sqrt(p * (1 - p) / n)
    # the share of sizes divisible by c: a remainder rule that loses the n_i mod c extra
    # samples makes every size a multiple of c
    p_div = np.mean(np.arange(lo, hi + 1) % c == 0)
    z_div = (np.mean(sizes % c == 0) - p_div) / np.sqrt(p_div * (1 - p_div) / n)
    z = max([z_size, z_div, *z_lab], key=abs) if not broken else float("inf")
    return Outcome(measured=abs(float(z)), theoretical=0.0, holds=abs(z) <= ctx.tolerance,
                   detail=broken or f"mean size z {z_size:.2f}, divisible-by-c z {z_div:.2f}, "
                                    f"label frequency max |z| "
                                    f"{np.max(np.abs(z_lab)):.2f}")
