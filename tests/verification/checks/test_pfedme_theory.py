"""pfedme.prop1_constants (verification/checks/pfedme_theory.py): every Moreau constant is
computed a second time and read (issue 41: κ_F was read by no check)."""

from __future__ import annotations

import dataclasses

import pytest

from pfl_theory import moreau
from verification.core.registry import Verdict, load_all, run_check


def _run():
    return run_check(load_all()["pfedme.prop1_constants"], size="quick", seed=0)


def test_prop1_constants_hold():
    assert _run().verdict is Verdict.HOLDS


@pytest.mark.parametrize("field,wrong", [
    ("kappa_F", lambda c, lam, mu: 1.0 + mu / lam),      # κ_F inverted
    ("mu_F", lambda c, lam, mu: c.mu_F * 0.999),         # μ_F 0.1% low: one-sidedly safe
    ("L_F", lambda c, lam, mu: 2 * lam)])                # L_F doubled: one-sidedly safe
def test_a_wrong_constant_fails(monkeypatch, field, wrong):
    original = moreau.moreau_constants

    def mutated(*, lam, mu=0.0, L=None, convex=True):
        c = original(lam=lam, mu=mu, L=L, convex=convex)
        return dataclasses.replace(c, **{field: wrong(c, lam, mu)})
    monkeypatch.setattr(moreau, "moreau_constants", mutated)
    assert _run().verdict is Verdict.FAILS
