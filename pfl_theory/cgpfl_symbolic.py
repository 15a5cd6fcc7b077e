"""Sympy forms of CGPFL's Theorem 4.1 (convergence) and its headline rate O(1/√(KNRT)).

Paper: Tang, Guo, Guo, *Personalized Federated Learning with Contextualized Generalization*
(IJCAI 2022), Theorem 4.1; ICLR-2022 version Theorem 1 and appendix A.3.  Spec:
docs/formulas.md §A.7 ([SEED-GARBLED→READ]) and check E.A.9.

Constants of the appendix: C₁ = 32ρ_Ω²/K, C₂ = 24ρ_g²/K, C₃ = 832δ²L_G²/(KNR).  The printed
combined bound is (3/2)C₁α²/(α̂₀²T) + (5/2)√(C₁C₃/T) + 52δ²/(KN); :func:`constant_identities`
shows that (3/2)C₁ = 48ρ_Ω²/K and (5/2)√(C₁C₃/T) = 80√(26ρ_Ω²L_G²δ²/K)/√(KNRT), i.e. the
constants 48 and 80√26 of Theorem 4.1(a).  The numeric :func:`pfl_theory.cgpfl.theorem41_bound`
is tested against :func:`theorem41_expression`.
"""

from __future__ import annotations

import sympy as sp

__all__ = ["SYMBOLS", "appendix_constants", "theorem41_expression", "stepwise_expression",
           "constant_identities", "headline_rate", "rate_exponents", "alpha_hat0_entries"]

alpha, rho, rho_g, L_G, delta, K, N, R, T, Delta, alpha_hat, alpha0 = sp.symbols(
    "alpha rho_Omega rho_g L_G delta K N R T Delta_G alphahat alphahat_0", positive=True)
rho_bar = sp.Symbol("rhobar", positive=True)  # per-context norm bound: rho_Omega^2 = K rhobar^2

SYMBOLS = {"alpha": alpha, "rho_omega": rho, "rho_g": rho_g, "lipschitz_g": L_G,
           "inexactness": delta, "k": K, "n_clients": N, "local_rounds": R, "rounds": T,
           "delta_gap": Delta, "alpha_hat": alpha_hat, "alpha_hat0": alpha0, "rho_bar": rho_bar}


def appendix_constants() -> dict[str, sp.Expr]:
    """C₁, C₂, C₃ of ICLR appendix A.3 (§A.7)."""
    return {"C1": 32 * rho**2 / K, "C2": 24 * rho_g**2 / K,
            "C3": 832 * delta**2 * L_G**2 / (K * N * R)}


def alpha_hat0_entries() -> tuple[sp.Expr, sp.Expr, sp.Expr]:
    """The three entries of α̂₀: C₁α²/(4Δ_G), α√(C₁/C₂), α/√(416 L_G²)."""
    c = appendix_constants()
    return (c["C1"] * alpha**2 / (4 * Delta), alpha * sp.sqrt(c["C1"] / c["C2"]),
            alpha / sp.sqrt(416 * L_G**2))


def stepwise_expression() -> sp.Expr:
    """4Δ_G/(α̂T) + C₁α²/(α̂²T) + C₂/T + C₃α̂²/α² + 52δ²/(KN)."""
    c = appendix_constants()
    return (4 * Delta / (alpha_hat * T) + c["C1"] * alpha**2 / (alpha_hat**2 * T) + c["C2"] / T
            + c["C3"] * alpha_hat**2 / alpha**2 + 52 * delta**2 / (K * N))


def theorem41_expression() -> sp.Expr:
    """Theorem 4.1(a) as printed, with α̂₀ kept as the symbol ``alphahat_0``:
    48α²(ρ_Ω²/K)/(α̂₀²T) + 80√(26(ρ_Ω²/K)L_G²δ²)/√(NKRT) + 52δ²/(KN)."""
    return (48 * alpha**2 * (rho**2 / K) / (alpha0**2 * T)
            + 80 * sp.sqrt(26 * (rho**2 / K) * L_G**2 * delta**2) / sp.sqrt(N * K * R * T)
            + 52 * delta**2 / (K * N))


def constant_identities() -> dict[str, sp.Expr]:
    """Differences that must simplify to 0 (check E.A.9); also the entries of α̂₀ against
    the printed forms 8α²ρ_Ω²/(KΔ_G), √(4/3)αρ_Ω/ρ_g, √(1/(416L_G²))α."""
    c = appendix_constants()
    e1, e2, e3 = alpha_hat0_entries()
    combined = (sp.Rational(3, 2) * c["C1"] * alpha**2 / (alpha0**2 * T)
                + sp.Rational(5, 2) * sp.sqrt(c["C1"] * c["C3"] / T) + 52 * delta**2 / (K * N))
    return {
        "three_halves_C1": sp.simplify(sp.Rational(3, 2) * c["C1"] - 48 * rho**2 / K),
        "five_halves_sqrt_C1C3": sp.simplify(
            sp.Rational(5, 2) * sp.sqrt(c["C1"] * c["C3"] / T)
            - 80 * sp.sqrt(26 * rho**2 * L_G**2 * delta**2 / K) / sp.sqrt(K * N * R * T)),
        "combined_equals_theorem": sp.simplify(combined - theorem41_expression()),
        "alpha_hat0_entry1": sp.simplify(e1 - 8 * alpha**2 * rho**2 / (K * Delta)),
        "alpha_hat0_entry2": sp.simplify(e2 - sp.sqrt(sp.Rational(4, 3)) * alpha * rho / rho_g),
        "alpha_hat0_entry3": sp.simplify(e3 - sp.sqrt(1 / (416 * L_G**2)) * alpha),
    }


def headline_rate() -> sp.Expr:
    """The rate claimed after Theorem 4.1: O(1/√(KNRT))."""
    return 1 / sp.sqrt(K * N * R * T)


def rate_exponents(expr: sp.Expr | None = None) -> dict[str, sp.Expr]:
    """Exponents of K, N, R, T in ``expr`` (default: the variance term of Theorem 4.1(a) with
    ρ_Ω² = Kρ̄², i.e. per-context norm fixed), via s·∂ log(expr)/∂s.  For the default this
    gives −1/2 for each, i.e. the headline rate."""
    if expr is None:
        var = 80 * sp.sqrt(26 * (rho**2 / K) * L_G**2 * delta**2) / sp.sqrt(N * K * R * T)
        expr = var.subs(rho, sp.sqrt(K) * rho_bar)
    return {str(s): sp.simplify(s * sp.diff(sp.log(expr), s)) for s in (K, N, R, T)}
