"""The engine-equals-oracle-form identity checks: they hold, and a changed step in the engine
(algorithms/) or in the oracle form (pfl_theory/oracle_methods.py) makes them FAIL."""

from __future__ import annotations

import pytest

import algorithms.methods.clustered.cgpfl
import algorithms.methods.averaging.fedavg
import algorithms.methods.regularized.pfedme
from pfl_theory import oracle_methods as om
from verification.core.registry import Verdict, load_all, run_check

IDS = ["pfedme", "fedavg", "perfedavg", "cgpfl"]


def _verdict(name, size="quick"):
    return run_check(load_all()[f"{name}.engine_equals_oracle_form"], size=size, seed=0).verdict


@pytest.mark.parametrize("name", IDS)
def test_the_engine_equals_the_oracle_form(name):
    assert _verdict(name) is Verdict.HOLDS


def _scaled_sgd(real, factor):
    return lambda model, params, x, y, lr, **k: real(model, params, x, y, lr * factor, **k)


def _scaled_prox(real, factor):
    return lambda *a, lam, **k: real(*a, lam=lam * factor, **k)


@pytest.mark.parametrize("name,module,attr,wrap", [
    ("fedavg", algorithms.methods.averaging.fedavg, "local_sgd", lambda f: _scaled_sgd(f, 1.01)),
    ("pfedme", algorithms.methods.regularized.pfedme, "prox_steps", lambda f: _scaled_prox(f, 1.01)),
    ("cgpfl", algorithms.methods.clustered.cgpfl, "prox_steps", lambda f: _scaled_prox(f, 2.0)),
])
def test_a_changed_engine_step_fails(monkeypatch, name, module, attr, wrap):
    # 1% on the local step or on λ of the inner problem: far above the 1e-12 tolerance
    monkeypatch.setattr(module, attr, wrap(getattr(module, attr)))
    assert _verdict(name) is Verdict.FAILS


def test_a_changed_oracle_step_fails(monkeypatch):
    real = om.perfedavg_fo_local
    monkeypatch.setattr(om, "perfedavg_fo_local",
                        lambda f, w, *, alpha, beta, local_steps:
                        real(f, w, alpha=beta, beta=alpha, local_steps=local_steps))
    assert _verdict("perfedavg") is Verdict.FAILS
