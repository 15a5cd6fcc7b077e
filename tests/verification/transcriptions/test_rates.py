"""The rate transcription (verification/transcriptions/rates.py): the numerically read
exponents and the corollary findings stated in docs/formulas.md §B.6 — independent of
pfl_theory."""

from __future__ import annotations

from fractions import Fraction

import pytest
import sympy as sp

from verification.transcriptions import rates as tx


def test_headline_values():
    assert tx.headline("pfedme.linear_speedup", T=2, R=5, N=10) == pytest.approx(0.01)
    assert tx.headline("pfedme.quadratic_speedup", T=2, R=5, N=10) == pytest.approx(1e-4)
    assert tx.headline("pfedme.nonconvex", T=10, R=10, N=10) == pytest.approx(0.01)
    assert tx.headline("cgpfl.generalized", T=2, R=2, N=2, K=2) == pytest.approx(0.25)


def test_growth_exponent_reads_powers_sums_and_roots():
    T, R = tx.T, tx.R
    assert tx.growth_exponent(3 * T ** sp.Rational(-5, 3), T) == Fraction(-5, 3)
    assert tx.growth_exponent(1 / T + 1 / T ** 2, T) == Fraction(-1)
    assert tx.growth_exponent((R + 7) ** sp.Rational(1, 3) / R, R) == Fraction(-2, 3)
    # terms whose exponents differ by 1/24 are told apart
    assert tx.growth_exponent(R ** sp.Rational(-1, 2) + R ** sp.Rational(-13, 24), R) \
        == Fraction(-1, 2)


@pytest.mark.parametrize("expr", [sp.exp(-tx.T), sp.log(tx.T) / tx.T])
def test_growth_exponent_refuses_non_powers(expr):
    with pytest.raises(ValueError):
        tx.growth_exponent(expr, tx.T)


def test_corollary1_findings():
    # (ii) β = NR gives exactly 1/(TRN)²; printed (i) √(N/T) gives T⁻¹N⁻¹ with no R;
    # the variant √(NR/T) gives 1/(TRN) (docs/formulas.md §B.6)
    ii = tx.corollary1("(ii) NR")
    assert ii["exponents"] == {"T": -2, "R": -2, "N": -2} and ii["follows"]
    i = tx.corollary1("(i) sqrt(N/T)")
    assert i["exponents"] == {"T": -1, "R": 0, "N": -1} and not i["follows"]
    assert tx.corollary1("(i) sqrt(N)/T")["exponents"] == {"T": 0, "R": 0, "N": -1}
    assert tx.corollary1("(i) variant sqrt(NR/T)")["follows"]


def test_corollary2_findings():
    # printed R^{1/3}: N⁻² R^{-5/3} after T = (NR)², not (NR)⁻²; R^{2/3} or β ∝ √(NR) fix it
    printed = tx.corollary2("1/3")
    assert printed["coupled"] == {"R": Fraction(-5, 3), "N": -2} and not printed["follows"]
    assert printed["claimed_coupled"] == {"R": -2, "N": -2}
    assert tx.corollary2(sp.Rational(2, 3))["follows"]
    assert tx.corollary2("1/3", "variant N^(1/2) R^(1/2)")["follows"]
