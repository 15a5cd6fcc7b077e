"""Averaging-family oracles (verification/oracles/averaging.py): each identity check HOLDS,
and one changed step in the method (monkeypatched: a rate ×1.01, a sign, a mean made a sum,
one neighbour fewer) makes it FAIL."""

import pytest

import algorithms.methods.averaging.fedavg as fedavg
import algorithms.methods.averaging.fedprox as fedprox
import algorithms.methods.averaging.finetuned as finetuned
import algorithms.methods.averaging.knnper as knnper
import algorithms.methods.averaging.scaffold as scaffold

NAMES = ["fedavg", "local", "fedprox", "scaffold", "knnper", "fedavg-ft", "fedbabu"]


@pytest.mark.parametrize("name", NAMES)
def test_the_engine_equals_the_oracle(verdict, name):
    assert verdict(name) == "HOLDS"


def _lr(real, factor=1.01):
    return lambda model, params, x, y, lr, *a, **k: real(model, params, x, y, lr * factor, *a, **k)


def _summed(real):
    """A mean over the P uploads turned into their sum."""
    def wrapped(params, *a, **k):
        out = real(params, *a, **k)
        n = next(iter(params.values())).shape[0]
        return {key: v * n for key, v in out.items()}
    return wrapped


MUTATIONS = {
    "fedavg": (fedavg, "weighted_mean", _summed),
    "local": (fedavg, "local_sgd", _lr),
    "fedprox": (fedprox, "proximal_sgd",
                lambda f: lambda *a, mu, **k: f(*a, mu=-mu, **k)),
    "scaffold": (scaffold, "weighted_mean", _summed),
    "knnper": (knnper, "knn_probabilities",
               lambda f: lambda z, s, l, c, k, *a: f(z, s, l, c, k - 1, *a)),
    "fedavg-ft": (finetuned, "partial_sgd",
                  lambda f: lambda model, params, keys, x, y, lr, *a:
                  f(model, params, keys, x, y, lr * 1.01, *a)),
    "fedbabu": (finetuned, "aggregate", _summed),
}


@pytest.mark.parametrize("name", NAMES)
def test_a_changed_step_fails(verdict, monkeypatch, name):
    module, attr, wrap = MUTATIONS[name]
    monkeypatch.setattr(module, attr, wrap(getattr(module, attr)))
    assert verdict(name) == "FAILS"
