"""The rate transcription checks (pfedme.transcription_headline_rates,
cgpfl.transcription_headline_rate, pfedme.transcription_corollary_rates,
pfedme.transcription_power_exponents): each HOLDS on the real pfl_theory.rates and FAILS
when a rate, a β, an exponent or a verdict of the derivations is changed."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import sympy as sp

from pfl_theory import rates
from verification.core.registry import Verdict, load_all, run_check
from verification.mutation.generated import applied, mutants_of, patched

CHECK_OF = {
    "headline_rate": ("pfedme.transcription_headline_rates", "cgpfl.transcription_headline_rate"),
    "power_exponents": ("pfedme.transcription_power_exponents",
                        "pfedme.transcription_corollary_rates"),
    "corollary1_derivation": ("pfedme.transcription_corollary_rates",),
    "corollary2_derivation": ("pfedme.transcription_corollary_rates",),
    "corollary_derivations": ("pfedme.transcription_corollary_rates",),
}
#: mutants that provably leave the value unchanged, with the reason
EQUIVALENT = {
    "rates.power_exponents:log2": "power_exponents takes sympy's log (the mutant rebinds only "
                                  "math/np.log), and an exponent is a ratio of logs anyway",
    "rates.power_exponents:log10": "as log2",
    "rates.headline_rate:T<->R": "every headline rate is symmetric in T, R, N",
    "rates.headline_rate:T<->N": "every headline rate is symmetric in T, R, N",
    "rates.headline_rate:R<->N": "every headline rate is symmetric in T, R, N",
}
CHECKS = load_all()


def _verdicts(check_ids) -> list[Verdict]:
    with np.errstate(all="ignore"):
        return [run_check(CHECKS[c], size="quick", seed=0).verdict for c in check_ids]


def test_every_public_rates_function_is_covered():
    from verification.mutation.generated import formula_functions
    assert {f for m, f in formula_functions() if m == "pfl_theory.rates"} == set(CHECK_OF)


@pytest.mark.parametrize("check_id", sorted({c for cs in CHECK_OF.values() for c in cs}))
def test_check_holds(check_id):
    for seed in (0, 3):
        r = run_check(CHECKS[check_id], size="quick", seed=seed)
        assert r.verdict is Verdict.HOLDS, r.detail
        assert r.measured <= 1e-14


MUTANTS = [m for f in ("headline_rate", "power_exponents") for m in mutants_of("pfl_theory.rates", f)]


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_generated_mutant_changes_a_verdict(mutant):
    # the other functions return sympy objects and take strings/sympy numbers: no generated
    # mutant of theirs is exercised (their own tests are below)
    with applied(mutant) as tracker:
        verdicts = _verdicts(CHECK_OF[mutant.function])
    if tracker.invalid:                  # rejected by the function's input validation:
        assert not (all(v is Verdict.HOLDS for v in verdicts))   # the check errors, it does not pass silently
        return
    if tracker.hits == 0:                # never applied (argument absent or not a positive
        assert all(v is Verdict.HOLDS for v in verdicts)   # scalar ≠ 1, or no float in the result): nothing may change
        return
    if mutant.name in EQUIVALENT:
        assert all(v is Verdict.HOLDS for v in verdicts), EQUIVALENT[mutant.name]
    else:
        assert any(v is not Verdict.HOLDS for v in verdicts)


def _wrong(name, change):
    original = getattr(rates, name)
    return patched("pfl_theory.rates", name, lambda *a, **k: change(original(*a, **k)))


@pytest.mark.parametrize("name", ["corollary1_derivation", "corollary2_derivation"])
@pytest.mark.parametrize("change", [
    lambda d: dataclasses.replace(d, beta=d.beta * 2),
    lambda d: dataclasses.replace(d, rate=sp.sqrt(d.rate)),
    lambda d: dataclasses.replace(d, exponents={**d.exponents, "R": d.exponents["R"] - 1}),
    lambda d: dataclasses.replace(d, claimed={**d.claimed, "T": d.claimed["T"] / 2}),
    lambda d: dataclasses.replace(d, follows=not d.follows)],
    ids=["beta", "rate", "exponent", "claimed", "follows"])
def test_a_wrong_derivation_field_fails(name, change):
    with _wrong(name, change):
        assert _verdicts(["pfedme.transcription_corollary_rates"]) == [Verdict.FAILS]


def test_a_wrong_coupled_exponent_of_corollary2_fails():
    with _wrong("corollary2_derivation", lambda d: dataclasses.replace(
            d, coupled={**d.coupled, "R": sp.Rational(-2)})):
        assert _verdicts(["pfedme.transcription_corollary_rates"]) == [Verdict.FAILS]


def test_a_missing_reading_in_corollary_derivations_fails():
    with _wrong("corollary_derivations", lambda ds: [d for d in ds if "2/3" not in d.reading]):
        assert _verdicts(["pfedme.transcription_corollary_rates"]) == [Verdict.FAILS]


def test_power_exponents_off_by_a_half_fails():
    with _wrong("power_exponents", lambda out: {**out, "N": out["N"] + sp.Rational(1, 2)}):
        assert _verdicts(["pfedme.transcription_power_exponents"]) == [Verdict.FAILS]
