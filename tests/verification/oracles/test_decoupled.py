"""Decoupled-family oracles (verification/oracles/decoupled.py): each identity check HOLDS,
and one changed step in the method (monkeypatched) makes it FAIL."""

import pytest

import algorithms.methods.decoupled.fedala as fedala
import algorithms.methods.decoupled.fedbn as fedbn
import algorithms.methods.decoupled.fedrep as fedrep
import algorithms.methods.decoupled.fedrod as fedrod
from verification.oracles.mutations import summed

NAMES = ["fedrep", "fedper", "lgfedavg", "fedala", "fedbn", "fedrod"]


@pytest.mark.parametrize("name", NAMES)
def test_the_engine_equals_the_oracle(verdict, name):
    assert verdict(name) == "HOLDS"


MUTATIONS = {
    "fedrep": (fedrep, "fedrep_update", lambda f: lambda *a, lr, **k: f(*a, lr=lr * 1.01, **k)),
    "fedper": (fedrep, "partial_sgd",
               lambda f: lambda model, p, keys, x, y, lr, *a: f(model, p, keys, x, y, lr * 1.01,
                                                                *a)),
    "lgfedavg": (fedrep, "aggregate", summed),
    "fedala": (fedala, "ala_mix", lambda f: lambda g, loc, w: f(g, loc, {k: v * 1.01
                                                                         for k, v in w.items()})),
    "fedbn": (fedbn, "aggregate", summed),
    "fedrod": (fedrod, "log_prior_shift", lambda f: lambda counts: -f(counts).clamp(min=-1e30)),
}


@pytest.mark.parametrize("name", NAMES)
def test_a_changed_step_fails(verdict, monkeypatch, name):
    owner, attr, wrap = MUTATIONS[name]
    monkeypatch.setattr(owner, attr, wrap(getattr(owner, attr)))
    assert verdict(name) == "FAILS"
