"""PPFE's shared + personal linear-regression generator (eqs. 15–16).

Emrani, Najafi, Motahari — *Federated Ensemble Learning with Progressive Model
Personalization* (PPFE, arXiv 2602.14244, 2026), Section 6.1; docs/formulas.md §C.6.

Model (formulas RECONSTRUCTED but forced by the prose, §C.6)::

    x_{i,j} ~ N(0, Σ_i),   y_{i,j} = <w_i, x_{i,j}> + ε_{i,j},   ε ~ N(0, σ_ε²)   (eq. 15)
    w_i = (1 − α_i) w_g + α_i w_{l,i},  w_g ~ N(0, I_d) once,  w_{l,i} ~ N(0, s_i² I_d)  (eq. 16)

Symbol → argument: d = ``dim``, n = ``n_train`` (per client, equal sizes), N =
``num_clients``, α = ``alpha`` (a number in [0, 1] or ``"uniform"`` for α_i ~ U(0, 1), the
heterogeneous setting of Fig. 3b — interval inferred), σ_ε² = ``noise_var``, Σ_i =
diag(U(``cov_low``, ``cov_high``)^d), s_i = ``local_scale`` (scalar or length-N).

Reading choices (not in the paper): w_g ~ N(0, I_d) and w_{l,i} ~ N(0, s_i² I_d) (rather than
s_i multiplying a covariance); Σ_i diagonal.  **Toolkit defaults, not the paper's values**
(all UNRECOVERED there): d = 50, n = 40, σ_ε² = 0.25, Σ_i entries U(0.5, 1.5), s_i = 1,
n_test = 500.

Consequences used by tests/checks: α = 0 ⇒ all w_i equal; α = 1 ⇒ w_i independent of w_g;
E‖w_i − w_j‖² = 2 α² s² d (equal s); Bayes MSE = σ_ε²; population MSE of an estimate ŵ_i is
σ_ε² + (ŵ_i − w_i)ᵀ Σ_i (ŵ_i − w_i).  Draws use one ``numpy.random.default_rng(seed)`` in a
fixed order, so the same seed gives the same federation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pfl_theory.validation import finite_array, in_range, nonnegative, positive, positive_int

__all__ = ["LinearFederation", "make_linear_federation", "ridge", "test_mse",
           "population_mse"]


@dataclass(frozen=True)
class LinearFederation:
    """One draw of the generator; arrays are float64, clients along axis 0.

    ``x_train [N, n, d]``, ``y_train [N, n]``, ``x_test [N, n_test, d]``, ``y_test [N, n_test]``,
    ``w [N, d]`` (true client models), ``w_global [d]``, ``w_local [N, d]``, ``alpha [N]``,
    ``cov_diag [N, d]`` (diagonal of Σ_i), ``noise_var`` (σ_ε²)."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    w: np.ndarray
    w_global: np.ndarray
    w_local: np.ndarray
    alpha: np.ndarray
    cov_diag: np.ndarray
    noise_var: float

    @property
    def num_clients(self) -> int:
        return int(self.w.shape[0])

    @property
    def dim(self) -> int:
        return int(self.w.shape[1])

    @property
    def bayes_mse(self) -> float:
        """Bayes risk E[(y − <w_i, x>)²] = σ_ε² (eq. 15)."""
        return float(self.noise_var)


def make_linear_federation(*, num_clients: int, dim: int = 50, n_train: int = 40,
                           n_test: int = 500, alpha: float | str = 0.5,
                           noise_var: float = 0.25, cov_low: float = 0.5,
                           cov_high: float = 1.5, local_scale: float | np.ndarray = 1.0,
                           mixing: str = "convex", seed: int = 0) -> LinearFederation:
    """Draw a federation from eqs. (15)–(16) of PPFE (docs/formulas.md §C.6).

    ``alpha``: personalization ratio in [0, 1] shared by all clients, or ``"uniform"`` for
    α_i ~ U(0, 1) per client.  ``local_scale``: s_i (scalar or ``[N]``).  ``mixing``:
    ``"convex"`` (eq. 16 as reconstructed, w_i = (1−α)w_g + αw_{l,i}; Var w_i = (1−α)² + α²s²,
    U-shaped in α) or ``"variance_preserving"`` (w_i = √(1−α) w_g + √α w_{l,i}; Var w_i =
    (1−α) + αs², = 1 for s = 1: every client's marginal model distribution is the same for
    all α, which is what a Local curve flat in α (PPFE Fig. 3b) requires; same limits α = 0
    identical, α = 1 independent).  Defaults are toolkit
    defaults (module docstring).  Draw order: α_i (if uniform), w_g, w_{l,i}, Σ_i, train x,
    train ε, test x, test ε.
    """
    n_clients = positive_int("num_clients", num_clients)
    d = positive_int("dim", dim)
    n = positive_int("n_train", n_train)
    m = positive_int("n_test", n_test)
    sigma2 = nonnegative("noise_var", noise_var)
    lo = positive("cov_low", cov_low)
    hi = positive("cov_high", cov_high)
    if hi < lo:
        raise ValueError(f"cov_high must be >= cov_low, got {cov_high!r} < {cov_low!r}")
    scale = finite_array("local_scale", local_scale)
    if scale.ndim == 0:
        scale = np.full(n_clients, float(scale))
    if scale.shape != (n_clients,) or np.any(scale < 0):
        raise ValueError(f"local_scale must be >= 0, scalar or shape ({n_clients},), "
                         f"got shape {scale.shape}")
    if mixing not in ("convex", "variance_preserving"):
        raise ValueError(f"mixing must be 'convex' or 'variance_preserving', got {mixing!r}")
    rng = np.random.default_rng(seed)
    if isinstance(alpha, str):
        if alpha != "uniform":
            raise ValueError(f"alpha must be a number in [0, 1] or 'uniform', got {alpha!r}")
        alphas = rng.uniform(0.0, 1.0, size=n_clients)
    else:
        alphas = np.full(n_clients, in_range("alpha", alpha, 0.0, 1.0))
    w_global = rng.standard_normal(d)
    w_local = scale[:, None] * rng.standard_normal((n_clients, d))
    cg, cl = (1.0 - alphas, alphas) if mixing == "convex" else (np.sqrt(1.0 - alphas),
                                                                 np.sqrt(alphas))
    w = cg[:, None] * w_global[None, :] + cl[:, None] * w_local
    cov_diag = rng.uniform(lo, hi, size=(n_clients, d))

    def draw(count: int) -> tuple[np.ndarray, np.ndarray]:
        x = rng.standard_normal((n_clients, count, d)) * np.sqrt(cov_diag)[:, None, :]
        eps = np.sqrt(sigma2) * rng.standard_normal((n_clients, count))
        return x, np.einsum("ncd,nd->nc", x, w) + eps

    x_train, y_train = draw(n)
    x_test, y_test = draw(m)
    return LinearFederation(x_train, y_train, x_test, y_test, w, w_global, w_local, alphas,
                            cov_diag, sigma2)


def ridge(x: np.ndarray, y: np.ndarray, lam: float | np.ndarray) -> np.ndarray:
    """Closed-form ridge ŵ = (XᵀX + λ I)^{-1} Xᵀ y, batched over leading axes.

    ``x [..., m, d]``, ``y [..., m]``, ``lam`` ≥ 0 scalar or broadcastable to the batch shape
    ``[...]`` (unnormalised penalty: the minimiser of ‖Xw − y‖² + λ‖w‖²).  λ = 0 needs XᵀX
    invertible.  Returns ``[..., d]``.  Reference: docs/formulas.md §E.C10.
    """
    x = finite_array("x", x)
    y = finite_array("y", y)
    if x.ndim < 2 or y.shape != x.shape[:-1]:
        raise ValueError(f"x must be [..., m, d] and y [..., m]; got {x.shape} and {y.shape}")
    lam_arr = finite_array("lam", lam)
    if np.any(lam_arr < 0):
        raise ValueError("lam must be >= 0")
    d = x.shape[-1]
    gram = np.swapaxes(x, -1, -2) @ x
    gram = gram + lam_arr[..., None, None] * np.eye(d)
    rhs = np.einsum("...md,...m->...d", x, y)
    return np.linalg.solve(gram, rhs[..., None])[..., 0]


def test_mse(fed: LinearFederation, w_hat: np.ndarray) -> np.ndarray:
    """Per-client empirical test MSE (1/m) Σ_j (y_ij − <ŵ_i, x_ij>)²; ``w_hat [N, d]`` or ``[d]``."""
    w_hat = np.broadcast_to(finite_array("w_hat", w_hat), fed.w.shape)
    pred = np.einsum("ncd,nd->nc", fed.x_test, w_hat)
    return np.mean((fed.y_test - pred) ** 2, axis=1)


test_mse.__test__ = False  # not a pytest test despite the name


def population_mse(fed: LinearFederation, w_hat: np.ndarray) -> np.ndarray:
    """Per-client population MSE σ_ε² + (ŵ_i − w_i)ᵀ Σ_i (ŵ_i − w_i) (exact, [DERIVED])."""
    w_hat = np.broadcast_to(finite_array("w_hat", w_hat), fed.w.shape)
    diff = w_hat - fed.w
    return fed.noise_var + np.sum(fed.cov_diag * diff ** 2, axis=1)
