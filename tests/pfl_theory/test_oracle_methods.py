"""pfl_theory/oracle_methods.py on numpy quadratics against the closed forms of moreau.py
(the engine comparison is tests/verification/worst_case/test_engine_agreement.py)."""

from __future__ import annotations

import numpy as np
import pytest

from pfl_theory import moreau
from pfl_theory import oracle_methods as om


def _client(seed=0, d=4):
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    return om.QuadraticOracle((q * np.linspace(0.1, 1.0, d)) @ q.T, rng.normal(size=d))


def test_envelope_value_and_gradient_equal_the_closed_form():
    f, w, lam = _client(), np.arange(4.0), 3.0
    env = moreau.quadratic_envelope(f.A, f.b, w, lam=lam)
    assert np.allclose(om.envelope_prox(f, w, lam), env.theta_hat, rtol=1e-13, atol=1e-13)
    assert np.allclose(om.envelope_grad(f, w, lam), env.grad, rtol=1e-13, atol=1e-13)
    assert om.envelope_value(f, w, lam) == pytest.approx(float(env.value), rel=1e-13)


def test_inexact_prox_converges_to_the_exact_prox():
    f, w, lam = _client(1), np.ones(4), 2.0
    approx = om.inexact_prox(f, w, w, lam=lam, personal_lr=2 / (2 * lam + 1.1), steps=200)
    assert np.allclose(approx, om.envelope_prox(f, w, lam), atol=1e-12)


def test_exact_prox_pfedme_with_one_local_round_and_beta_one_is_envelope_gradient_descent():
    clients, w, lam, lr = [_client(s) for s in range(3)], np.ones(4), 2.0, 0.1
    grad = om.average([om.envelope_grad(f, w, lam) for f in clients])
    out = om.pfedme_round(clients, w, lam=lam, lr=lr, local_rounds=1, beta=1.0)
    assert np.allclose(out, w - lr * grad, atol=1e-14)


def test_average_of_nothing_is_an_error():
    with pytest.raises(ValueError):
        om.average([])


def test_cgpfl_one_context_one_local_round_is_envelope_gradient_descent():
    # K = 1, R = 1, α = 1: ω⁺ = ω − βc(ω − θ̂) = ω − (βc/λ)·mean ∇F_i (pFedMe eq. 6)
    clients, w, lam, beta, c = [_client(s) for s in range(3)], np.ones(4), 2.0, 0.3, 0.5
    grad = om.average([om.envelope_grad(f, w, lam) for f in clients])
    (out,) = om.cgpfl_round(clients, [w], [0, 0, 0], lam=lam, lr=beta, scale=c,
                            local_rounds=1, alpha=1.0)
    assert np.allclose(out, w - beta * c / lam * grad, atol=1e-14)
    g = om.cgpfl_context_grad(clients, [0, 0, 0], 0, w, lam=lam, scale=c)
    assert np.allclose(g, c / lam * grad, atol=1e-14)


def test_cgpfl_context_value_is_the_potential_of_its_gradient():
    # central differences of G_k = (c/λ)·mean F_i reproduce ∇G_k (quadratic: exact to rounding)
    clients, lam, c, w = [_client(s) for s in range(2)], 3.0, 0.5, np.arange(4.0) / 3
    h, e = 1e-5, np.eye(4)
    fd = np.array([(om.cgpfl_context_value(clients, [0, 0], 0, w + h * e[j], lam=lam, scale=c)
                    - om.cgpfl_context_value(clients, [0, 0], 0, w - h * e[j], lam=lam,
                                             scale=c)) / (2 * h) for j in range(4)])
    assert np.allclose(fd, om.cgpfl_context_grad(clients, [0, 0], 0, w, lam=lam, scale=c),
                       atol=1e-8)


def test_cgpfl_contexts_only_see_their_own_clients_and_an_empty_context_is_an_error():
    clients, w = [_client(s) for s in range(4)], np.ones(4)
    both = om.cgpfl_round(clients, [w, 2 * w], [0, 1, 0, 1], lam=2.0, lr=0.1, scale=0.5,
                          local_rounds=2, alpha=0.5)
    alone = om.cgpfl_round(clients[1::2], [2 * w], [0, 0], lam=2.0, lr=0.1, scale=0.5,
                           local_rounds=2, alpha=0.5)
    assert np.allclose(both[1], alone[0], atol=1e-15)
    with pytest.raises(ValueError, match="context 1 has no client"):
        om.cgpfl_context_grad(clients, [0, 0, 0, 0], 1, w, lam=2.0, scale=0.5)
