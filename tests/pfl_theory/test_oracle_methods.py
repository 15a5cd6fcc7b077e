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
