"""Tests of verification/experiments/pfedme_quadratic.py (pFedMe §E.B6–9 experiments on
quadratic clients).  Golden values are computed independently here (closed forms, scalar
loops, autograd)."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, strategies as st

from pfl_theory import moreau
from verification.experiments import pfedme_quadratic as ex

F64 = torch.float64


# ------------------------------------------------------------------ quadratic clients
def test_quadratic_federation_noise_free_and_sizes():
    fed = ex.quadratic_federation(num_clients=4, dim=3, samples=10, noise=0.0, seed=1)
    assert fed.train.counts.tolist() == [5] * 4 and fed.dtype == F64
    x = fed.train.x.view(4, 5, 3)
    assert torch.equal(x, x[:, :1].expand_as(x))  # every sample equals the client centre
    assert torch.allclose(ex.client_variances(fed), torch.zeros(4, dtype=F64))
    fed2 = ex.quadratic_federation(num_clients=2, sizes=[4, 8])
    assert fed2.train.counts.tolist() == [2, 4]


def test_envelope_gap_matches_moreau_quadratic_envelope():
    g = torch.Generator().manual_seed(0)
    means = torch.randn(6, 4, generator=g, dtype=F64)
    lam = 2.5
    eye = torch.eye(4, dtype=F64).expand(6, 4, 4)

    def F(w):  # f_i = ½θᵀθ − x̄ᵢᵀθ differs from ½‖θ − x̄ᵢ‖² by a constant
        return moreau.quadratic_envelope(eye, means, w.expand(6, 4), lam=lam).value.mean()

    w = torch.randn(4, generator=g, dtype=F64)
    want = F(w) - F(means.mean(0))
    assert torch.isclose(ex.quadratic_envelope_gap(w, means, lam), want, rtol=1e-12)


def test_averaged_iterates_scalar_loop():
    ws = torch.tensor([[1.0], [2.0], [4.0], [-1.0]], dtype=F64)
    eta, mu = 0.3, 0.5
    a = 1 - eta * mu / 2
    for T in range(1, 5):
        alpha = [a ** -(t + 1) for t in range(T)]
        want = sum(al * float(ws[t, 0]) for t, al in enumerate(alpha)) / sum(alpha)
        assert math.isclose(float(ex.averaged_iterates(ws, eta, mu)[T - 1, 0]), want,
                            rel_tol=1e-12)
    with pytest.raises(ValueError):
        ex.averaged_iterates(ws, 10.0, 1.0)


def test_exact_prox_one_step_personalized_model():
    fed = ex.quadratic_federation(num_clients=3, dim=2, noise=0.0, seed=2)
    lam = 4.0
    alg = ex.exact_prox_pfedme(lam=lam, lr=0.1, clients_per_round=3)
    w0 = torch.tensor([1.0, -2.0], dtype=F64)
    out = ex.global_trajectory(alg, fed, rounds=1, seed=0, w0=w0, record=("personalized",))
    centres = fed.train.x.view(3, -1, 2)[:, 0]
    assert torch.allclose(out["personalized"][1], (centres + lam * w0) / (1 + lam), atol=1e-14)


def test_strongly_convex_run_noise_free_contraction():
    lam, lr, R, beta = 4.0, 0.05, 3, 1.5
    r = ex.strongly_convex_run(lam=lam, lr=lr, local_rounds=R, beta=beta, rounds=8,
                               clients=4, dim=3)
    mu_f = lam / (1 + lam)
    q = 1 - beta * (1 - (1 - lr * mu_f) ** R)  # exact per-round factor on w − w*
    ratios = r["last_gap"][1:] / r["last_gap"][:-1]
    assert np.allclose(ratios, q ** 2, rtol=1e-9)
    assert math.isclose(r["q"], q) and r["delta_sq"] == 0.0


def test_floor_delta_sq_scales_inverse_batch():
    f = ex.floor_vs_delta(batch_sizes=(1, 4), seeds=(0,), rounds=4, clients=3, dim=2)
    assert math.isclose(f["delta_sq"][0] / f["delta_sq"][1], 4.0, rel_tol=1e-12)
    assert f["floor"].shape == (1, 2) and np.all(f["floor"] > 0)


def test_floor_vs_sampling_zero_at_full_participation():
    f = ex.floor_vs_sampling(clients=6, sampled=(2, 6), seeds=(0,), rounds=6, dim=2,
                             local_rounds=1, lr=1.0)
    assert np.allclose(f["ratio"], [2.0, 0.0])
    assert f["floor"][0, 1] < 1e-25 < f["floor"][0, 0]  # S = N: no sampling noise at w*


def test_personalized_ball_prediction_closed_form():
    b = ex.personalized_ball(lams=(10.0, 100.0), rounds=2, clients=4, dim=3)
    fed = ex.quadratic_federation(num_clients=4, dim=3, noise=1.0, seed=0)
    xbar = fed.train.x.view(4, -1, 3).mean(1)
    spread = float(((xbar - xbar.mean(0)) ** 2).sum(1).mean())
    for lam, p in zip((10.0, 100.0), b["predicted"]):
        assert math.isclose(p, spread / (1 + lam) ** 2, rel_tol=1e-10)
    assert b["gap"].shape == (1, 2) and b["gap"][0, 0] > b["gap"][0, 1]


# ---------------------------------------------------------------------- non-convex
@given(w=st.floats(-3, 3), xbar=st.floats(-3, 3), lam=st.sampled_from([4.0, 15.0]))
def test_cosine_prox_is_global_minimiser_1d(w, xbar, lam):
    model = ex.CosineQuadratic(1)
    th = float(model.prox(torch.tensor([[xbar]], dtype=F64), torch.tensor([[w]], dtype=F64),
                          lam=lam)[0, 0])
    grid = np.linspace(-8, 8, 160001)
    obj = 0.5 * (grid - xbar) ** 2 + np.cos(2 * grid) + lam / 2 * (grid - w) ** 2
    assert abs(th - grid[np.argmin(obj)]) < 1e-3


def test_cosine_prox_stationary_autograd_and_loss():
    model = ex.CosineQuadratic(3, a=0.5, omega=3.0)
    assert model.L == 1 + 0.5 * 9
    g = torch.Generator().manual_seed(4)
    means, w = torch.randn(5, 3, generator=g, dtype=F64), torch.randn(5, 3, generator=g, dtype=F64)
    th = model.prox(means, w, lam=10.0).requires_grad_(True)
    h = (0.5 * (th - means) ** 2 + 0.5 * torch.cos(3 * th) + 5.0 * (th - w) ** 2).sum()
    (grad,) = torch.autograd.grad(h, th)
    assert grad.abs().max() < 1e-12
    x = torch.randn(2, 4, 3, generator=g, dtype=F64)
    p = {"theta": torch.randn(2, 3, generator=g, dtype=F64)}
    want = [0.5 * ((p["theta"][i] - x[i]) ** 2).sum(1).mean() + 0.5 * torch.cos(3 * p["theta"][i]).sum()
            for i in range(2)]
    assert torch.allclose(model.per_client_loss(p, x, None), torch.stack(want), atol=1e-14)
    with pytest.raises(ValueError):
        model.prox(means, w, lam=1.0)


def test_nonconvex_run_expected_is_prefix_mean():
    r = ex.nonconvex_run(rounds=16, clients=3, dim=2)
    assert list(r["T"]) == [4, 8, 16]
    for T, e in zip(r["T"], r["expected_grad_sq"]):
        assert math.isclose(e, r["grad_sq"][:T].mean(), rel_tol=1e-12)
    assert np.all(np.isfinite(r["grad_sq"])) and r["grad_sq"][-1] < r["grad_sq"][0]
