"""Soft-collaboration oracles (verification/oracles/clustered_soft.py): each identity check
HOLDS, and one changed step in the method (monkeypatched) makes it FAIL."""

import pytest

import algorithms.methods.clustered.fedamp as fedamp
import algorithms.methods.clustered.fedem as fedem
import algorithms.methods.clustered.fedfomo as fedfomo

NAMES = ["fedamp", "fedfomo", "fedem"]


@pytest.mark.parametrize("name", NAMES)
def test_the_engine_equals_the_oracle(verdict, name):
    assert verdict(name) == "HOLDS"


MUTATIONS = {
    # α of the attention ×1.01
    "fedamp": (fedamp, "attention_weights",
               lambda f: lambda *a, alpha, **k: f(*a, alpha=alpha * 1.01, **k)),
    # normalised weights that sum to 1.01
    "fedfomo": (fedfomo, "first_order_weights", lambda f: lambda *a: f(*a) * 1.01),
    # the q-weighted component gradient ×1.01 (a rate)
    "fedem": (fedem, "weighted_grad",
              lambda f: lambda *a: {k: v * 1.01 for k, v in f(*a).items()}),
}


@pytest.mark.parametrize("name", NAMES)
def test_a_changed_step_fails(verdict, monkeypatch, name):
    owner, attr, wrap = MUTATIONS[name]
    monkeypatch.setattr(owner, attr, wrap(getattr(owner, attr)))
    assert verdict(name) == "FAILS"
