"""The oracle-form methods (pfl_theory.oracle_methods) equal the batched engine in float64.

This is what makes a worst case computed on the oracle form a statement about the engine:
random quadratic clients (full batch by construction, verification.worst_case.
quadratic_clients), full participation, uniform mean (equal client sizes), 1e-12 relative
agreement after several rounds (float64 rounding of a few hundred operations is ~1e-14).
Each test also runs a mutated oracle step and requires the comparison to fail.
"""

from __future__ import annotations

import numpy as np
import pytest

from algorithms.methods.averaging.fedavg import FedAvg
from algorithms.methods.regularized.perfedavg import PerFedAvg
from algorithms.methods.regularized.pfedme import PFedMe
from pfl_theory import oracle_methods as om
from verification.worst_case import quadratic_clients as qc

TOL = 1e-12   # relative: float64, a few hundred operations per round, 3 rounds
ROUNDS = 3


def _instance(seed=0, n=3, d=4):
    clients = qc.random_quadratics(n, d, mu=0.1, L=1.0, seed=seed)
    fed, model = qc.federation(clients)
    w0 = np.random.default_rng(seed + 1).normal(size=d)
    return clients, fed, model, w0


def _oracle(step, w0):
    ws = [w0]
    for _ in range(ROUNDS):
        ws.append(step(ws[-1]))
    return np.stack(ws)


def _rel(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


def _pfedme_pair(inner_steps, exact_in_oracle):
    clients, fed, model, w0 = _instance()
    lam, lr, R, beta, eta_p = 15.0, 0.05, 2, 1.5, 1.0 / (1.0 + 15.0)
    alg = PFedMe(lam=lam, lr=lr, personal_lr=eta_p, inner_steps=inner_steps, local_rounds=R,
                 batch_size=2, beta=beta, clients_per_round=len(clients))
    engine = qc.engine_trajectory(alg, fed, model, w0, ROUNDS)
    inner = None if exact_in_oracle else (inner_steps, eta_p)
    oracle = _oracle(lambda w: om.pfedme_round(clients, w, lam=lam, lr=lr, local_rounds=R,
                                               beta=beta, inner=inner), w0)
    return engine, oracle


def test_pfedme_inexact_prox_equals_engine():
    engine, oracle = _pfedme_pair(3, exact_in_oracle=False)
    assert _rel(oracle, engine) < TOL


def test_pfedme_exact_prox_equals_engine_with_converged_inner_solve():
    # the inner problem has condition number (L+λ)/(μ+λ) = 16/15.1: 20 steps with
    # η_p = 1/(1+λ) contract by (1 − 15.1/16)^20 ≈ 1e-25, far below float64 rounding
    engine, oracle = _pfedme_pair(20, exact_in_oracle=True)
    assert _rel(oracle, engine) < TOL


def test_fedavg_equals_engine():
    clients, fed, model, w0 = _instance(seed=3)
    alg = FedAvg(lr=0.3, local_rounds=4, batch_size=2, clients_per_round=len(clients))
    engine = qc.engine_trajectory(alg, fed, model, w0, ROUNDS)
    oracle = _oracle(lambda w: om.fedavg_round(clients, w, lr=0.3, local_steps=4), w0)
    assert _rel(oracle, engine) < TOL


def test_perfedavg_fo_equals_engine():
    clients, fed, model, w0 = _instance(seed=5)
    alg = PerFedAvg(lr=0.3, inner_lr=0.2, variant="fo", local_rounds=3, batch_size=2,
                    clients_per_round=len(clients))
    engine = qc.engine_trajectory(alg, fed, model, w0, ROUNDS)
    oracle = _oracle(lambda w: om.perfedavg_fo_round(clients, w, alpha=0.2, beta=0.3,
                                                     local_steps=3), w0)
    assert _rel(oracle, engine) < TOL


@pytest.mark.parametrize("mutant", ["inner_sign", "envelope_step", "warm_start"])
def test_a_mutated_oracle_step_is_caught(monkeypatch, mutant):
    """Each mutation changes one step of the oracle form; the engine comparison must fail."""
    if mutant == "inner_sign":        # λ(w − θ) instead of λ(θ − w) in the inner gradient
        def bad(f, w, theta, *, lam, personal_lr, steps):
            for _ in range(steps):
                theta = theta - personal_lr * (f.grad(theta) + lam * (w - theta))
            return theta
        monkeypatch.setattr(om, "inexact_prox", bad)
        exact = False
    elif mutant == "envelope_step":   # prox with step 1/(2λ) instead of 1/λ
        monkeypatch.setattr(om, "envelope_prox", lambda f, w, lam: f.prox(w, 0.5 / lam))
        exact = True
    else:                             # inner solve restarted at w_r instead of warm-started
        orig = om.inexact_prox
        monkeypatch.setattr(om, "inexact_prox",
                            lambda f, w, theta, **kw: orig(f, w, w, **kw))
        exact = False
    engine, oracle = _pfedme_pair(3 if not exact else 20, exact_in_oracle=exact)
    assert _rel(oracle, engine) > 1e-6


def test_fedavg_mutated_local_step_is_caught(monkeypatch):
    clients, fed, model, w0 = _instance(seed=3)
    alg = FedAvg(lr=0.3, local_rounds=4, batch_size=2, clients_per_round=len(clients))
    engine = qc.engine_trajectory(alg, fed, model, w0, ROUNDS)
    monkeypatch.setattr(om, "fedavg_local",
                        lambda f, w, *, lr, local_steps: w - lr * local_steps * f.grad(w))
    oracle = _oracle(lambda w: om.fedavg_round(clients, w, lr=0.3, local_steps=4), w0)
    assert _rel(oracle, engine) > 1e-6


def _cgpfl_pair(**kw):
    from verification.worst_case import cgpfl as W

    s = W.CGPFLSetting(contexts=2, per_context=3, rounds=ROUNDS, local_rounds=2, lam=3.0,
                       mu=0.1, alpha=0.7, beta=1.0, **kw)
    clients, omega0 = W.instance(s, seed=2)
    return (np.array(W.engine_trajectory(s, clients, omega0)),
            np.array(W.trajectory(clients, omega0, s)))


def test_cgpfl_fixed_assignment_equals_engine():
    # the engine's k-means keeps the assignment (contexts 50 apart; it raises otherwise),
    # its converged inner solve stands in for the exact prox
    engine, oracle = _cgpfl_pair()
    assert _rel(oracle, engine) < TOL


@pytest.mark.parametrize("mutant", ["scale_lambda", "no_alpha_mixing"])
def test_cgpfl_mutated_oracle_step_is_caught(monkeypatch, mutant):
    if mutant == "scale_lambda":      # pFedMe's c = λ in place of the paper's c = 2/N
        orig = om.cgpfl_local
        monkeypatch.setattr(om, "cgpfl_local",
                            lambda f, w, *, lam, lr, scale, local_rounds:
                            orig(f, w, lam=lam, lr=lr, scale=lam, local_rounds=local_rounds))
    else:                             # ω_k⁺ = mean of the uploads, α ignored
        orig = om.cgpfl_round
        monkeypatch.setattr(om, "cgpfl_round",
                            lambda *a, alpha, **k: orig(*a, alpha=1.0, **k))
    engine, oracle = _cgpfl_pair()
    assert _rel(oracle, engine) > 1e-6
