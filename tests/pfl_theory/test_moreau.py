"""Tests of pfl_theory.moreau: prox, Moreau envelope, envelope gradient, Proposition 1."""

import math
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from pfl_theory import moreau

F64 = torch.float64


def spd(rng, d, lo, hi):
    """Symmetric matrix with eigenvalues in [lo, hi] (both attained), and its eigenvalues."""
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    eig = np.sort(rng.uniform(lo, hi, d))
    eig[0], eig[-1] = lo, hi
    return q @ np.diag(eig) @ q.T, eig


def fd_grad(F, w, h=1e-5):
    w = np.asarray(w, dtype=np.float64)
    return np.array([(F(w + h * e) - F(w - h * e)) / (2 * h) for e in np.eye(w.size)])


# --------------------------------------------------------------------------- golden
def test_quadratic_golden_values():
    # f = ½ Σ a_j θ_j² − Σ θ_j, a = (1, 2, 3), λ = 1, w = 0: θ̂_j = 1/(a_j + 1),
    # F = Σ [½(a_j+1)θ̂_j² − θ̂_j] = −½ Σ 1/(a_j+1) = −13/24, ∇F = −θ̂
    env = moreau.quadratic_envelope(np.diag([1.0, 2, 3]), np.ones(3), np.zeros(3), lam=1.0)
    np.testing.assert_allclose(env.theta_hat, [1 / 2, 1 / 3, 1 / 4], rtol=1e-15)
    assert env.value == pytest.approx(-13 / 24, rel=1e-15)
    np.testing.assert_allclose(env.grad, [-1 / 2, -1 / 3, -1 / 4], rtol=1e-15)
    assert moreau.quadratic_value(np.diag([2.0, 4]), [1.0, 0], [1.0, 1]) == pytest.approx(2.0)
    np.testing.assert_allclose(moreau.envelope_hessian_quadratic(np.diag([1.0, 3]), lam=1.0),
                               np.diag([0.5, 0.75]), rtol=1e-15)


def test_batched_matches_per_client_loop():
    rng = np.random.default_rng(0)
    A = np.stack([spd(rng, 4, 0.5, 3)[0] for _ in range(5)])
    b, w = rng.standard_normal((5, 4)), rng.standard_normal((5, 4))
    env = moreau.quadratic_envelope(A, b, w, lam=2.0)
    for i in range(5):
        theta = np.linalg.solve(A[i] + 2 * np.eye(4), b[i] + 2 * w[i])
        np.testing.assert_allclose(env.theta_hat[i], theta, rtol=1e-12)
        F = 0.5 * theta @ A[i] @ theta - b[i] @ theta + np.sum((theta - w[i]) ** 2)
        assert env.value[i] == pytest.approx(F, rel=1e-12)


# --------------------------------------------------------------- envelope gradient
@pytest.mark.parametrize("lo,hi,lam", [(0.5, 3.0, 2.0), (-1.0, 1.0, 2.5)])
def test_envelope_gradient_quadratic_autograd_and_fd(lo, hi, lam):
    # second case: non-convex quadratic with λ = 2.5 > 2L = 2
    rng = np.random.default_rng(1)
    A, _ = spd(rng, 5, lo, hi)
    b, w0 = rng.standard_normal(5), rng.standard_normal(5)
    w = torch.tensor(w0, requires_grad=True)
    env = moreau.quadratic_envelope(torch.tensor(A), torch.tensor(b), w, lam=lam)
    auto = torch.autograd.grad(env.value, w)[0]
    torch.testing.assert_close(env.grad.detach(), auto, rtol=1e-12, atol=1e-12)
    fd = fd_grad(lambda x: moreau.quadratic_envelope(A, b, x, lam=lam).value, w0)
    np.testing.assert_allclose(env.grad.detach().numpy(), fd, rtol=1e-8, atol=1e-8)  # FD h=1e-5


def _logistic(X, y):
    return lambda th: torch.nn.functional.softplus(-y * torch.einsum("nmd,nd->nm", X, th)).mean(-1)


def test_envelope_gradient_logistic_fd_and_unrolled_autograd():
    g = torch.Generator().manual_seed(3)
    X = torch.randn(1, 25, 3, generator=g, dtype=F64)
    y = torch.where(torch.rand(1, 25, generator=g, dtype=F64) < 0.5, -1.0, 1.0).to(F64)
    f, lam = _logistic(X, y), 1.5
    w0 = torch.randn(1, 3, generator=g, dtype=F64)
    env = moreau.prox(f, w0, lam=lam, tol=1e-21)  # L-BFGS floor for O(1) losses ~1e-23
    assert env.converged and float(env.grad_norm_sq.max()) <= 1e-21
    fd = fd_grad(lambda x: float(moreau.prox(f, torch.tensor(x)[None], lam=lam,
                                             tol=1e-21).value[0]), w0[0].numpy())
    np.testing.assert_allclose(env.grad[0].numpy(), fd, rtol=1e-7, atol=1e-9)  # FD h=1e-5
    # independent route: autograd through 300 unrolled GD steps of the inner problem
    w = w0.clone().requires_grad_(True)
    theta = w.clone()
    for _ in range(300):  # step 1/(λ + L_f) with L_f ≤ max‖x‖²/4 < 3: contraction ≤ 0.7
        gr = torch.autograd.grad(f(theta).sum() + 0.5 * lam * ((theta - w) ** 2).sum(),
                                 theta, create_graph=True)[0]
        theta = theta - gr / (lam + 3.0)
    F = f(theta).sum() + 0.5 * lam * ((theta - w) ** 2).sum()
    auto = torch.autograd.grad(F, w)[0]
    torch.testing.assert_close(env.grad, auto, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("method", ["lbfgs", "gd"])
def test_iterative_prox_matches_closed_form_batched(method):
    rng = np.random.default_rng(4)
    A = torch.tensor(np.stack([spd(rng, 4, -0.5, 2.0)[0] for _ in range(6)]))
    b, w = torch.tensor(rng.standard_normal((6, 4))), torch.tensor(rng.standard_normal((6, 4)))
    f = lambda th: 0.5 * torch.einsum("nd,nde,ne->n", th, A, th) - (b * th).sum(-1)
    env = moreau.prox(f, w, lam=3.0, tol=1e-22, method=method, step=1 / 5.0)
    exact = moreau.quadratic_envelope(A, b, w, lam=3.0)
    torch.testing.assert_close(env.theta_hat, exact.theta_hat, rtol=0, atol=1e-10)
    torch.testing.assert_close(env.value, exact.value, rtol=1e-12, atol=1e-12)
    # unbatched form: w of shape [d], f returns a scalar
    one = moreau.prox(lambda th: 0.5 * th @ A[0] @ th - b[0] @ th, w[0], lam=3.0, tol=1e-22)
    torch.testing.assert_close(one.theta_hat, exact.theta_hat[0], rtol=0, atol=1e-10)


def test_gd_stops_at_first_iterate_meeting_tolerance():
    f = lambda th: 0.5 * (th ** 2).sum(-1)
    # h = ½‖θ‖² + ½‖θ − w‖², ∇h = 2θ − w; from θ0 = w with step 1/4: θ_k = w(1 + 2^-k)/2
    w = torch.tensor([[4.0, 0.0]], dtype=F64)
    env = moreau.prox(f, w, lam=1.0, tol=1.0, method="gd", step=0.25)
    # ‖∇h(θ_k)‖² = (4·2^-k)² ≤ 1  ⇔  k ≥ 2
    assert env.iterations == 2 and float(env.grad_norm_sq) == pytest.approx(1.0)


def test_dtype_device_follow_inputs():
    A = torch.eye(3, dtype=torch.float32)
    env = moreau.quadratic_envelope(A, torch.ones(3), torch.zeros(3), lam=1.0)
    assert env.theta_hat.dtype == torch.float32 and env.value.dtype == torch.float32
    out = moreau.prox(lambda th: (th ** 2).sum(-1), torch.zeros(2, 3), lam=1.0, tol=1e-10)
    assert out.theta_hat.dtype == torch.float32


# ------------------------------------------------------------------- Proposition 1
@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), lam=st.floats(0.05, 200.0),
       mu=st.floats(0.01, 5.0), spread=st.floats(1.0, 50.0))
def test_prop1_eigenvalue_bounds(seed, lam, mu, spread):
    rng = np.random.default_rng(seed)
    L = mu * spread
    A, eig = spd(rng, 5, mu, L)
    ev = np.linalg.eigvalsh(moreau.envelope_hessian_quadratic(A, lam=lam))
    expected = np.sort([lam * a / (lam + a) for a in eig])  # scalar formula, independent
    np.testing.assert_allclose(ev, expected, rtol=1e-9, atol=1e-12)
    c = moreau.moreau_constants(lam=lam, mu=mu, L=L)
    assert c.L_F == lam and c.mu_F == pytest.approx(lam * mu / (lam + mu))
    assert ev.min() >= c.mu_F * (1 - 1e-9) and ev.max() <= lam * L / (lam + L) * (1 + 1e-9)
    assert lam * L / (lam + L) < c.L_F and c.kappa_F == pytest.approx(c.L_F / c.mu_F)


def test_prop1_nonconvex_lambda_2L_threshold():
    rng = np.random.default_rng(5)
    L = 1.0
    A, _ = spd(rng, 4, -L, L)
    for lam in (1.2, 1.5, 1.9, 2.1, 3.0, 8.0):
        ev = np.linalg.eigvalsh(moreau.envelope_hessian_quadratic(A, lam=lam))
        assert (np.abs(ev).max() <= lam) == (lam >= 2 * L)
        # the most negative eigenvalue is −λL/(λ−L) (a = −L), by hand
        assert ev.min() == pytest.approx(-lam * L / (lam - L), rel=1e-10)
    assert moreau.moreau_constants(lam=2.5, L=1.0, convex=False) == moreau.MoreauConstants(
        2.5, 0.0, math.inf)


# ------------------------------------------------------------------- envelope sanity
def test_envelope_below_f_and_converges_as_lambda_grows():
    rng = np.random.default_rng(6)
    A, _ = spd(rng, 4, 0.5, 4.0)
    b, w = rng.standard_normal(4), 2 * rng.standard_normal(4)
    f_w = 0.5 * w @ A @ w - b @ w
    lams = 10.0 ** np.arange(-2, 7)
    F = np.array([moreau.quadratic_envelope(A, b, w, lam=l).value for l in lams])
    assert np.all(F <= f_w) and np.all(np.diff(F) >= 0)
    grad_sq = np.sum((A @ w - b) ** 2)
    assert lams[-1] * (f_w - F[-1]) == pytest.approx(grad_sq / 2, rel=1e-4)  # O(‖A‖/λ)


def test_min_envelope_equals_min_f_convex():
    rng = np.random.default_rng(7)
    A, _ = spd(rng, 4, 0.3, 3.0)
    b = rng.standard_normal(4)
    res = minimize(lambda x: float(moreau.quadratic_envelope(A, b, x, lam=0.7).value),
                   np.ones(4), jac=lambda x: moreau.quadratic_envelope(A, b, x, lam=0.7).grad,
                   method="BFGS", options={"gtol": 1e-11})
    f_min = -0.5 * b @ np.linalg.solve(A, b)
    assert res.fun == pytest.approx(f_min, rel=1e-10)
    np.testing.assert_allclose(res.x, np.linalg.solve(A, b), rtol=1e-6)


# ------------------------------------------------------------------------ validation
def test_validation_errors():
    A = np.diag([1.0, -2.0])
    with pytest.raises(ValueError, match="lam"):
        moreau.quadratic_prox(A, np.zeros(2), np.zeros(2), lam=0.0)
    with pytest.raises(ValueError, match="positive definite"):
        moreau.quadratic_prox(A, np.zeros(2), np.zeros(2), lam=2.0)  # λ ≤ L
    with pytest.raises(ValueError, match="symmetric"):
        moreau.quadratic_prox([[1.0, 1.0], [0.0, 1.0]], np.zeros(2), np.zeros(2), lam=1.0)
    with pytest.raises(ValueError, match="shape"):
        moreau.quadratic_prox(np.ones(3), np.zeros(3), np.zeros(3), lam=1.0)
    with pytest.raises(ValueError, match="NaN"):
        moreau.quadratic_prox(np.eye(2), [np.nan, 0], np.zeros(2), lam=1.0)
    with pytest.raises(ValueError, match="2L"):
        moreau.moreau_constants(lam=2.0, L=1.0, convex=False)
    with pytest.raises(ValueError, match="needs its smoothness"):
        moreau.moreau_constants(lam=2.0, convex=False)
    with pytest.raises(ValueError, match="mu"):
        moreau.moreau_constants(lam=2.0, mu=-1.0)
    with pytest.raises(ValueError, match="mu > 0"):
        moreau.moreau_constants(lam=3.0, mu=1.0, L=1.0, convex=False)
    f = lambda th: (th ** 2).sum(-1)
    w = torch.zeros(2, 3, dtype=F64)
    with pytest.raises(ValueError, match="method"):
        moreau.prox(f, w, lam=1.0, method="newton")
    with pytest.raises(ValueError, match="step"):
        moreau.prox(f, w, lam=1.0, method="gd")
    with pytest.raises(ValueError, match="torch tensor"):
        moreau.prox(f, np.zeros((2, 3)), lam=1.0)
    with pytest.raises(ValueError, match="one loss per client"):
        moreau.prox(lambda th: (th ** 2).sum(), w, lam=1.0)
    with pytest.raises(ValueError, match="tol"):
        moreau.prox(f, w, lam=1.0, tol=0.0)


def test_not_converged_warns():
    f = lambda th: torch.cosh(th).sum(-1)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        env = moreau.prox(f, torch.full((1, 2), 5.0, dtype=F64), lam=1.0, method="gd",
                          step=1e-3, max_iter=3, tol=1e-20)
    assert not env.converged and any(issubclass(r.category, RuntimeWarning) for r in rec)
