"""The minimax-rate reference check of ℓ2-personalization (verification/checks/minimax_l2.py):
the closed-form minimiser, the rate check holding, and an estimator stuck at the global model
failing it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from verification.checks import minimax_l2 as M
from verification.core.registry import Verdict, load_all, run_check


def _data(seed=0, m=5, n=7, d=3):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(m, n, d))
    y = rng.normal(size=(m, n))
    return x, y


def test_closed_form_is_the_joint_minimiser():
    # the stationarity system of the whole objective, written out as one (m+1)d linear system
    x, y = _data()
    m, n, d = x.shape
    lam = 0.7
    big = np.zeros(((m + 1) * d, (m + 1) * d))
    rhs = np.zeros((m + 1) * d)
    for i in range(m):
        s = slice(i * d, (i + 1) * d)
        big[s, s] = x[i].T @ x[i] / n + lam * np.eye(d)
        big[s, m * d:] = -lam * np.eye(d)
        big[m * d:, s] = -lam * np.eye(d)
        rhs[s] = x[i].T @ y[i] / n
    big[m * d:, m * d:] = m * lam * np.eye(d)
    full = np.linalg.solve(big, rhs)[: m * d].reshape(m, d)
    np.testing.assert_allclose(M.l2_personalized(x, y, lam), full, rtol=1e-10, atol=1e-12)


def test_lambda_limits_are_local_and_pooled_least_squares():
    x, y = _data(1)
    local = np.stack([np.linalg.lstsq(a, b, rcond=None)[0] for a, b in zip(x, y)])
    np.testing.assert_allclose(M.l2_personalized(x, y, 1e-9), local, rtol=1e-6, atol=1e-7)
    pooled = np.linalg.lstsq(x.reshape(-1, 3), y.reshape(-1), rcond=None)[0]
    np.testing.assert_allclose(M.l2_personalized(x, y, 1e9), np.tile(pooled, (5, 1)),
                               rtol=1e-6, atol=1e-7)


@pytest.fixture(scope="module")
def chk():
    return load_all()["minimax.l2_personalization_rate_n"]


def test_the_rate_holds_and_an_estimator_stuck_at_the_global_model_fails(chk):
    res = run_check(chk, size="quick")
    assert res.verdict is Verdict.HOLDS, res.detail
    # the grid crosses the regime change n = σ²d/R²
    cross = chk.quick["noise_var"] * chk.quick["dim"] / max(res.extra["R2"])
    assert min(chk.quick["sizes"]) < cross < max(chk.quick["sizes"])
    stuck = dataclasses.replace(chk, quick={**chk.quick, "lambdas": (1e6,)})
    assert run_check(stuck, size="quick").verdict is Verdict.FAILS
