"""Averaging-family oracles (verification/oracles/averaging.py): each identity check HOLDS,
and one changed step in the method (monkeypatched: a rate ×1.01, a sign, a mean made a sum,
one neighbour fewer) makes it FAIL."""

import pytest

import algorithms.methods.averaging.fedavg as fedavg
import algorithms.methods.averaging.fedprox as fedprox
import algorithms.methods.averaging.finetuned as finetuned
import algorithms.methods.averaging.knnper as knnper
import algorithms.methods.averaging.scaffold as scaffold
from verification.oracles.mutations import scaled_lr, summed

NAMES = ["fedavg", "local", "fedprox", "scaffold", "knnper", "fedavg-ft", "fedbabu"]


@pytest.mark.parametrize("name", NAMES)
def test_the_engine_equals_the_oracle(verdict, name):
    assert verdict(name) == "HOLDS"


MUTATIONS = {
    "fedavg": (fedavg, "weighted_mean", summed),
    "local": (fedavg, "local_sgd", scaled_lr),
    "fedprox": (fedprox, "proximal_sgd",
                lambda f: lambda *a, mu, **k: f(*a, mu=-mu, **k)),
    "scaffold": (scaffold, "weighted_mean", summed),
    "knnper": (knnper, "knn_probabilities",
               lambda f: lambda z, s, l, c, k, *a: f(z, s, l, c, k - 1, *a)),
    "fedavg-ft": (finetuned, "partial_sgd",
                  lambda f: lambda model, params, keys, x, y, lr, *a:
                  f(model, params, keys, x, y, lr * 1.01, *a)),
    "fedbabu": (finetuned, "aggregate", summed),
}


@pytest.mark.parametrize("name", NAMES)
def test_a_changed_step_fails(verdict, monkeypatch, name):
    module, attr, wrap = MUTATIONS[name]
    monkeypatch.setattr(module, attr, wrap(getattr(module, attr)))
    assert verdict(name) == "FAILS"
