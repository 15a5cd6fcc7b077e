"""pfl_theory.constants against independent references: closed forms on known cases,
autograd Hessians, and brute force over dense grids in two dimensions."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pfl_theory import constants as C


def _grid_ball(radius, n_r=400, n_a=1440):
    """Dense polar grid of the disc of ``radius`` (brute-force reference)."""
    rr = np.linspace(0, radius, n_r)[:, None]
    aa = np.linspace(0, 2 * np.pi, n_a, endpoint=False)[None]
    return np.stack([(rr * np.cos(aa)).ravel(), (rr * np.sin(aa)).ravel()], 1)


def test_quadratic_constants_known_spectrum():
    rng = np.random.default_rng(0)
    hs = []
    for eigs in ([0.5, 2.0, 3.0], [1.0, 4.0, 0.7]):
        q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        hs.append(q @ np.diag(eigs) @ q.T)
    c = C.quadratic_constants(np.array(hs))
    assert c.mu == pytest.approx(0.5, rel=1e-12) and c.L == pytest.approx(4.0, rel=1e-12)
    assert c.exact
    nc = C.quadratic_constants(np.diag([-3.0, 1.0]))  # non-convex: mu clipped, L = |-3|
    assert nc.mu == 0.0 and nc.L == pytest.approx(3.0)
    with pytest.raises(ValueError, match="symmetric"):
        C.quadratic_constants(np.array([[1.0, 2.0], [0.0, 1.0]]))


def _mlr_hessian(x, w, b, l2):
    """Exact Hessian of the mean CE + l2/2(‖W‖²+‖b‖²) by torch autograd (float64)."""
    xt, yt = torch.as_tensor(x), torch.as_tensor(np.arange(len(x)) % w.shape[1])

    def f(p):
        W = p[:w.size].reshape(w.shape)
        bb = p[w.size:]
        ce = torch.nn.functional.cross_entropy(xt @ W + bb, yt)
        return ce + 0.5 * l2 * (p ** 2).sum()

    p = torch.as_tensor(np.concatenate([w.ravel(), b]))
    return torch.autograd.functional.hessian(f, p).numpy()


def test_mlr_constants_bracket_autograd_hessians():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(30, 3))
    c = C.mlr_constants([x, 0.5 * x], l2=0.3)
    for scale in (0.0, 1.0, 30.0):
        eig = np.linalg.eigvalsh(_mlr_hessian(x, scale * rng.normal(size=(3, 4)),
                                              scale * rng.normal(size=4), 0.3))
        assert eig.min() >= c.mu - 1e-10  # float64 round-off of the 15x15 Hessian
        assert eig.max() <= c.L + 1e-10
    # far away the cross-entropy curvature vanishes: min eigenvalue -> l2 exactly
    far = np.linalg.eigvalsh(_mlr_hessian(x, 1e3 * rng.normal(size=(3, 4)),
                                          1e3 * rng.normal(size=4), 0.3))
    assert far.min() == pytest.approx(0.3, abs=1e-8)
    assert C.mlr_constants([x], l2=0.3, regularize_bias=False).mu == 0.0


def test_mlr_upper_bound_is_attained_for_two_equiprobable_classes():
    # one sample x̃ = [x, 1], W = 0: H_CE = (diag(p) − ppᵀ) ⊗ x̃x̃ᵀ has top eigenvalue ½‖x̃‖²
    x = np.array([[2.0, -1.0]])
    c = C.mlr_constants([x], l2=0.0)
    top = np.linalg.eigvalsh(_mlr_hessian(x, np.zeros((2, 2)), np.zeros(2), 0.0)).max()
    assert c.L == pytest.approx(0.5 * (4 + 1 + 1), rel=1e-12)
    assert top == pytest.approx(c.L, rel=1e-12)


def test_gradient_variance_quadratic_closed_form():
    # f(θ; x) = ½‖θ − x‖²: per-sample gradient θ − x_j, variance = trace of the covariance
    rng = np.random.default_rng(2)
    x = rng.normal(size=(50, 4)) * np.array([1.0, 2.0, 0.5, 3.0])
    theta = rng.normal(size=4)
    assert C.gradient_variance(theta - x) == pytest.approx(
        np.trace(np.cov(x.T, bias=True)), rel=1e-12)
    g = rng.normal(size=(3, 5, 4))
    assert C.diversity_sup(g) == pytest.approx(
        max(((gp - gp.mean(0)) ** 2).sum(1).mean() for gp in g), rel=1e-12)


@pytest.mark.parametrize("case", ["psd_interior", "psd_boundary", "indefinite", "hard"])
def test_ball_quadratic_min_matches_brute_force(case):
    A, b = {"psd_interior": ([[2.0, 0.3], [0.3, 1.0]], [0.5, -0.2]),
            "psd_boundary": ([[2.0, 0.3], [0.3, 1.0]], [5.0, -4.0]),
            "indefinite": ([[1.0, 0.8], [0.8, -2.0]], [0.3, 0.4]),
            "hard": ([[1.0, 0.0], [0.0, -2.0]], [0.5, 0.0])}[case]
    A, b = np.array(A), np.array(b)
    val, theta = C.ball_quadratic_min(A, b, 1.5)
    pts = _grid_ball(1.5)
    brute = (0.5 * np.einsum("ij,jk,ik->i", pts, A, pts) - pts @ b).min()
    assert np.linalg.norm(theta) <= 1.5 * (1 + 1e-12)
    assert val <= brute + 1e-12  # exact solution is at least as low as any grid point
    assert val == pytest.approx(brute, abs=2e-4)  # grid spacing 1.5/400, 2π/1440


def test_disagreement_exact_and_ascent_against_angle_grid():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(12, 2)) * np.array([2.0, 0.5])
    ang = np.linspace(0, np.pi, 200_000)
    u = np.stack([np.cos(ang), np.sin(ang)], 1)
    brute = 2 * 0.7 * np.abs(x @ u.T).mean(0).max()
    exact, is_exact = C.disagreement_linear(x, radius=0.7)
    assert is_exact and exact == pytest.approx(brute, rel=1e-8)  # angle grid 1.6e-5 rad
    approx, is_exact = C.disagreement_linear(x, radius=0.7, exact_max_n=4)
    assert not is_exact and approx <= exact + 1e-12 and approx == pytest.approx(exact, rel=1e-12)


def test_disagreement_gaussian_closed_form_and_large_sample():
    cov = np.diag([4.0, 1.0, 0.25])
    closed = C.disagreement_gaussian(radius=1.0, cov=cov)
    assert closed == pytest.approx(2 * math.sqrt(2 / math.pi) * 2.0)
    x = np.random.default_rng(4).normal(size=(200_000, 3)) * np.sqrt(np.diag(cov))
    est, _ = C.disagreement_linear(x, radius=1.0)
    assert est == pytest.approx(closed, rel=0.01)  # MC error of E|z| at n=2e5: ~0.2%


def test_discrepancy_and_loss_range_brute_force():
    rng = np.random.default_rng(5)
    w, cov, s2, r = np.array([0.8, -0.4]), np.diag([1.5, 0.6]), 0.3, 1.2
    x = rng.normal(size=(25, 2)) * np.sqrt(np.diag(cov))
    y = x @ w + math.sqrt(s2) * rng.normal(size=25)
    pts = _grid_ball(r)
    pop = 0.5 * (np.einsum("ij,jk,ik->i", pts, cov, pts) - 2 * pts @ cov @ w + w @ cov @ w + s2)
    emp = 0.5 * (((x @ pts.T) - y[:, None]) ** 2).mean(0)
    disc = C.discrepancy_linear_squared(x, y, w=w, cov=cov, noise_var=s2, radius=r)
    assert disc >= np.abs(pop - emp).max() - 1e-12
    assert disc == pytest.approx(np.abs(pop - emp).max(), abs=1e-3)  # grid resolution
    lo, hi = C.loss_range_linear_squared(w=w, cov=cov, noise_var=s2, radius=r)
    assert lo == pytest.approx(pop.min(), abs=1e-4) and hi == pytest.approx(pop.max(), abs=1e-4)
    assert C.smallest_b(hi - lo, 2.0) == pytest.approx((hi - lo) / 2.0)


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="radius"):
        C.disagreement_linear(np.ones((3, 2)), radius=0.0)
    with pytest.raises(ValueError, match="agree"):
        C.discrepancy_linear_squared(np.ones((3, 2)), np.ones(4), w=np.ones(2),
                                     cov=np.eye(2), noise_var=0.1, radius=1.0)
    with pytest.raises(ValueError, match="l2"):
        C.mlr_constants([np.ones((3, 2))], l2=-1.0)
