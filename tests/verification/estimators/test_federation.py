"""verification.estimators.federation against independent references (closed forms, brute force)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from algorithms.engine.models import MLR, QuadraticMean
from pfl_theory import moreau
from pfl_theory.constants import mlr_constants
from verification.estimators import federation as est
from verification.experiments import pfedme_quadratic as ex

F64 = torch.float64


@pytest.fixture(scope="module")
def quad():
    fed = ex.quadratic_federation(num_clients=4, dim=3, noise=1.0, samples=20, seed=0)
    x, y = est.client_data(fed)
    return fed, QuadraticMean(3), x, y


def test_client_data_shapes_and_unequal_sizes(quad):
    fed, _, x, y = quad
    assert x.shape == (4, 10, 3) and y.shape == (4, 10)
    assert torch.equal(x[1], fed.train.x[fed.train.offsets[1]:fed.train.offsets[1] + 10])
    bad = ex.quadratic_federation(num_clients=2, dim=2, sizes=[10, 12], seed=0)
    with pytest.raises(ValueError, match="equal client sizes"):
        est.client_data(bad)


def test_quadratic_hessian_gamma_and_smoothness(quad):
    _, model, x, y = quad
    h = est.client_hessians(model, {"theta": torch.zeros(4, 3, dtype=F64)}, x, y)
    np.testing.assert_allclose(h, np.broadcast_to(np.eye(3), (4, 3, 3)), atol=1e-14)
    # γ_f² of ½‖θ − x‖²: max_i mean_j ‖x_ij − x̄_i‖² (closed form, θ-free)
    closed = max(float(((xi - xi.mean(0)) ** 2).sum(1).mean()) for xi in x)
    pts = [{"theta": torch.full((1, 3), v, dtype=F64)} for v in (0.0, 5.0)]
    assert est.gamma_f_sq(model, x, y, pts) == pytest.approx(closed, rel=1e-12)
    assert est.sampled_smoothness(model, x, y, pts[:1]) == pytest.approx(1.0, rel=1e-10)


def test_sampled_smoothness_mlr_below_the_bound_and_close_at_zero():
    rng = np.random.default_rng(1)
    x = torch.as_tensor(rng.normal(size=(2, 15, 3)))
    y = torch.as_tensor(rng.integers(0, 2, size=(2, 15)))
    model = MLR(3, 2)
    bound = mlr_constants([xi.numpy() for xi in x], l2=0.0).L
    w = model.init(1, seed=0, dtype=F64)
    w0 = {k: torch.zeros_like(v) for k, v in w.items()}
    est_l = est.sampled_smoothness(model, x, y, [w, w0], iterations=200)
    exact0 = max(np.linalg.eigvalsh(h).max() for h in est.client_hessians(
        model, {k: v.expand(2, *v.shape[1:]) for k, v in w0.items()}, x, y))
    assert est_l <= bound + 1e-12
    assert est_l >= exact0 * (1 - 1e-8)  # power iteration converged at w = 0 (gap ratio < 1)
    # two classes at W = 0: p = (½, ½) everywhere, so the bound ½λ_max(X̃ᵀX̃/n) is attained
    assert exact0 == pytest.approx(bound, rel=1e-10)


def test_envelope_and_minimum_match_quadratic_closed_form(quad):
    _, model, x, y = quad
    lam = 0.7
    means = x.mean(1)
    w = {"theta": torch.tensor([[0.3, -1.0, 2.0]], dtype=F64)}
    env = est.envelope(model, x, y, w, lam=lam)
    eye = torch.eye(3, dtype=F64).expand(4, 3, 3)
    ref = moreau.quadratic_envelope(eye, means, w["theta"].expand(4, 3), lam=lam)
    # f_i = ½θᵀθ − x̄_iᵀθ + ½ mean_j ‖x_ij‖²: quadratic_value with A = I, b = x̄_i + a constant
    const = 0.5 * (x ** 2).sum(-1).mean(1)
    torch.testing.assert_close(env.value, ref.value + const, rtol=0, atol=1e-10)
    torch.testing.assert_close(env.grad, ref.grad, rtol=0, atol=1e-9)
    f_star, w_star = est.envelope_minimum(model, x, y, w, lam=lam)
    mu_f = lam / (1 + lam)
    half_var = 0.5 * ((x - means[:, None]) ** 2).sum(-1).mean(1)  # F_i = μ_F/2‖w − x̄_i‖² + v_i/2
    closed = float((0.5 * mu_f * ((means - means.mean(0)) ** 2).sum(1) + half_var).mean())
    assert f_star == pytest.approx(closed, abs=1e-10)  # L-BFGS to round-off on a quadratic
    torch.testing.assert_close(w_star["theta"][0], means.mean(0), rtol=0, atol=1e-6)


def test_per_sample_gradients_match_autograd_one_by_one():
    rng = np.random.default_rng(2)
    x = torch.as_tensor(rng.normal(size=(6, 4)))
    y = torch.as_tensor(rng.integers(0, 3, size=6))
    model = MLR(4, 3, l2=0.1)
    w = model.init(1, seed=3, dtype=F64)
    g = est.per_sample_gradients(model, w, x, y)
    for j in range(6):
        ref, _ = model.autograd_grad(w, x[j:j + 1][None], y[j:j + 1][None])
        torch.testing.assert_close(g[j], est.flat_params(ref)[0], rtol=0, atol=1e-12)
    assert math.isfinite(float(g.sum()))


def test_sampled_smoothness_dnn_against_exact_hessians():
    """DNN: the power-iteration estimate at sampled points is ‖∇²f_i(w)‖₂ at those points
    (brute force: all eigenvalues of the autograd Hessian), hence a lower estimate of L."""
    from algorithms.engine.models import DNN

    rng = np.random.default_rng(5)
    x = torch.as_tensor(rng.normal(size=(2, 12, 3)))
    y = torch.as_tensor(rng.integers(0, 3, size=(2, 12)))
    model = DNN(3, 3, hidden=4)
    pts = [model.init(1, seed=s, dtype=F64) for s in (0, 1)]
    estimate = est.sampled_smoothness(model, x, y, pts, iterations=300)
    exact = max(np.abs(np.linalg.eigvalsh(h)).max() for w in pts for h in est.client_hessians(
        model, {k: v.expand(2, *v.shape[1:]) for k, v in w.items()}, x, y))
    assert estimate <= exact * (1 + 1e-10)  # ‖Hv‖ ≤ ‖H‖ for unit v
    assert estimate >= exact * 0.99  # 300 power steps: converged unless |top two| nearly tie
