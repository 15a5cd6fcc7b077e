"""verification/worst_case/analysis.py: the exponent comparison behind the bound_thm1 checks."""

from __future__ import annotations

import math

import pytest

from verification.worst_case.analysis import theorem1_exponents


def test_closed_form_exponent_is_four_times_the_bounds_at_the_admissible_step():
    # μ = L: ρ₀ = (1 − β(1 − (1 − ημ_F)^R))² ≈ (1 − η̂₁μ_F)², exponent ≈ 2η̂₁μ_F, while the
    # bound's is η̂₁μ_F/2: ratio → 4 as the step shrinks (4.09 at these parameters)
    lam, mu, beta, R = 0.25, 1.0, 1600.0, 1
    from pfl_theory import pfedme
    eta = pfedme.local_step_bound(eta_hat=pfedme.eta_hat_1(lam=lam, mu=mu, beta=beta),
                                  beta=beta, R=R)
    e = theorem1_exponents(lam=lam, mu=mu, L=mu, beta=beta, lr=eta, R=R)
    assert e["how"] == "closed form"
    assert e["ratio"] == pytest.approx(4.09, abs=0.01)
    assert e["worst_exponent"] == pytest.approx(-math.log(e["rho0"]))


def test_pep_exponent_agrees_with_the_closed_form_when_mu_approaches_L():
    pytest.importorskip("PEPit")
    kw = dict(lam=1.0, beta=384.0, lr=5.4e-5, R=2)
    closed = theorem1_exponents(mu=0.5, L=0.5, **kw)
    pep = theorem1_exponents(mu=0.5, L=0.5 * (1 + 1e-3), **kw)
    assert pep["how"] == "PEP"
    assert pep["rho0"] == pytest.approx(closed["rho0"], rel=1e-6)
