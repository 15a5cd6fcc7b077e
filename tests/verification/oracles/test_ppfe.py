"""PPFE oracle (verification/oracles/ppfe.py): the identity check HOLDS over a stage
transition, and one changed step in the method (monkeypatched) makes it FAIL."""

import pytest

import algorithms.methods.ppfe.ppfe as ppfe
from verification.oracles.mutations import summed


def test_the_engine_equals_the_oracle(verdict):
    assert verdict("ppfe") == "HOLDS"


@pytest.mark.parametrize("attr,wrap", [
    # eq. 7's inverse temperature β × 1.01 (the reweighting)
    ("next_weights", lambda f: lambda split, w, s, beta: f(split, w, s, beta * 1.01)),
    # the body mean made a sum
    ("aggregate", summed),
    # the head/body learning rate × 1.01
    ("fedrep_update", lambda f: lambda *a, lr, body_lr, **k: f(*a, lr=lr * 1.01,
                                                                body_lr=body_lr, **k)),
])
def test_a_changed_step_fails(verdict, monkeypatch, attr, wrap):
    monkeypatch.setattr(ppfe, attr, wrap(getattr(ppfe, attr)))
    assert verdict("ppfe") == "FAILS"
