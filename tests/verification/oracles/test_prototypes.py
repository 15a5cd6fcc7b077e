"""Prototype-family oracles (verification/oracles/prototypes.py): each identity check HOLDS,
and one changed step in the method (monkeypatched) makes it FAIL."""

import pytest

import algorithms.methods.prototypes.fedpac as fedpac
import algorithms.methods.prototypes.fedproto as fedproto

NAMES = ["fedproto", "fedpac"]


@pytest.mark.parametrize("name", NAMES)
def test_the_engine_equals_the_oracle(verdict, name):
    assert verdict(name) == "HOLDS"


MUTATIONS = {
    # the regulariser's sign
    "fedproto": (fedproto, "prototype_penalty", lambda f: lambda p, k, lam: f(p, k, -lam)),
    # Q without its variance term
    "fedpac": (fedpac, "collaboration_matrix", lambda f: lambda h, v: f(h, 0 * v)),
}


@pytest.mark.parametrize("name", NAMES)
def test_a_changed_step_fails(verdict, monkeypatch, name):
    owner, attr, wrap = MUTATIONS[name]
    monkeypatch.setattr(owner, attr, wrap(getattr(owner, attr)))
    assert verdict(name) == "FAILS"
