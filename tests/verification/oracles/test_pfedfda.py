"""pFedFDA oracle (verification/oracles/pfedfda.py): the identity check HOLDS, and a changed
step in the method (monkeypatched) makes it FAIL."""

import pytest

import algorithms.methods.prototypes.pfedfda as pfedfda


def test_the_engine_equals_the_oracle(verdict):
    assert verdict("pfedfda") == "HOLDS"


@pytest.mark.parametrize("attr,wrap", [
    # β and 1 − β swapped in the interpolation of the local and global statistics
    ("interpolate", lambda f: lambda beta, *a: f(1 - beta, *a)),
    # the Gaussian head's log-prior with a flipped sign
    ("log_priors", lambda f: lambda counts: -f(counts)),
])
def test_a_changed_step_fails(verdict, monkeypatch, attr, wrap):
    monkeypatch.setattr(pfedfda, attr, wrap(getattr(pfedfda, attr)))
    assert verdict("pfedfda") == "FAILS"
