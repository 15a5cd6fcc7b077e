"""Every VACUOUS bound of the quick suite carries a certificate (issue 33): for a risk or gap,
a number below the trivial bound that holds against what the certificate never saw (the exact
population excess, or the measured gap) — and fails it when the kl inverse is made too small;
for an optimisation bound or a complexity term, a stated reason why none applies."""

from __future__ import annotations

import pytest

from verification.checks import bounds_ppfe_linear as lin
from verification.core.registry import Verdict, load_all, run_check
from verification.estimators import certificates

RISK = ("cgpfl.bound_thm42_gap", "ppfe.bound_theorem7_union", "ppfe.bound_theorem7_calculator",
        "ppfe.bound_corollary2_clients", "plgu.bound_theorem1_gap", "plgu.bound_theorem2_gap",
        "plgu.bound_theorem3_gap")
NOT_A_RISK = ("cgpfl.bound_thm41_final", "cgpfl.bound_thm41_stepwise",
              "plgu.bound_term4_linear")


@pytest.mark.parametrize("check_id", RISK)
def test_a_vacuous_risk_bound_has_an_informative_certificate_that_holds(check_id):
    res = run_check(load_all()[check_id], size="quick")
    assert res.verdict is Verdict.VACUOUS
    cert = res.to_dict()["certificate"]
    assert cert["delta"] == pytest.approx(0.05) and cert["name"]
    assert res.measured <= cert["value"] < res.trivial <= res.theoretical


@pytest.mark.parametrize("check_id", NOT_A_RISK)
def test_a_vacuous_bound_of_no_risk_says_why_it_has_no_certificate(check_id):
    res = run_check(load_all()[check_id], size="quick")
    assert res.verdict is Verdict.VACUOUS
    cert = res.to_dict()["certificate"]
    assert cert["value"] is None and cert["name"].startswith("n/a: ")


def test_the_excess_certificate_fails_when_the_kl_inverse_is_too_small(monkeypatch):
    lin._linear_ppfe.cache_clear()
    # the lower inverse where the upper one belongs: a certificate that is too small
    monkeypatch.setattr(certificates, "kl_inverse_upper", certificates.kl_inverse_lower)
    try:
        res = run_check(load_all()["ppfe.bound_theorem7_union"], size="quick")
        per_point = res.extra["certificates_per_point"]
        assert any(c["value"] < m for c, m in zip(per_point, res.extra["grid"]["measured"]))
    finally:
        lin._linear_ppfe.cache_clear()
