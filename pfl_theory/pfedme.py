"""pFedMe theory: Lemma 1 (δ²), Lemma 2 (diversity of F_i), Theorems 1–2, Corollaries 1–2.

Paper: C. T. Dinh, N. H. Tran, T. D. Nguyen, *Personalized Federated Learning with Moreau
Envelopes*, NeurIPS 2020 (arXiv 2006.08848). Formulas restated in docs/formulas.md §B.5–§B.6
(SEED-GARBLED→READ: read from a garbled extraction, readings stated there).

Conventions and decisions
* Hidden constants of O(·)/Õ(·) are set to **1**; polylog factors of Õ are dropped. The
  bounds are therefore shapes (how terms scale), not certified numbers.
* Proposition 1 supplies L_F = λ and μ_F = λμ/(λ+μ), κ_F = L_F/μ_F (:mod:`pfl_theory.moreau`).
* The Theorem 1/2 (a) terms are written **once** as sympy expressions (:func:`theorem1a_symbolic`,
  :func:`theorem2a_symbolic`); the numeric functions are ``sympy.lambdify``-ed from them, so
  the symbolic rate derivations in :mod:`pfl_theory.rates` and the numbers cannot drift.
  Numeric functions broadcast over numpy arrays (parameter grids).
* Uncertain readings (docs/formulas.md §B.6) are keyword parameters: Theorem 2(a) third term's
  exponent of R (``r_exponent``, default 1/3 as laid out in the seed); Corollary 1(i)'s β
  (``reading``, default ``"sqrt(N/T)"``, alternative ``"sqrt(N)/T"``).
* A theorem's hypotheses (β ≥ 1, T ≥ 2/(η̂₁μ_F), λ ≥ √(8L²+1), S ≤ N) raise ``ValueError``
  unless ``check_conditions=False``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np
import sympy as sp

from pfl_theory.validation import finite_array, nonnegative, positive, positive_int
from pfl_theory.validation import guard_public_functions

# Positive symbols shared with pfl_theory.rates (same name + assumptions => equal symbols).
SYMBOLS = {name: sp.Symbol(name, positive=True) for name in (
    "T", "R", "N", "S", "beta", "lambda", "mu", "delta_sq", "sigma_sq", "Delta_0", "Delta_F",
    "r_exp")}
_T, _R, _N, _S, _beta, _lam, _mu, _dsq, _ssq, _D0, _DF, _rexp = SYMBOLS.values()
R_EXPONENT_DEFAULT = sp.Rational(1, 3)
COROLLARY1_READINGS = ("sqrt(N/T)", "sqrt(N)/T")


@dataclass(frozen=True)
class BoundTerms:
    """Named terms of a bound (hidden constants = 1) and their sum ``total``."""

    terms: Mapping[str, Any]
    total: Any
    reference: str

    def __getitem__(self, name: str) -> Any:
        return self.terms[name]


def _bound(terms: dict[str, Any], reference: str) -> BoundTerms:
    """Pack terms; with array arguments every term is broadcast to the common shape."""
    if any(np.ndim(v) for v in terms.values()):
        terms = dict(zip(terms, np.broadcast_arrays(*(np.asarray(v, dtype=np.float64)
                                                        for v in terms.values()))))
    else:
        terms = {k: float(v) for k, v in terms.items()}
    return BoundTerms(MappingProxyType(terms), sum(terms.values()), reference)


def _arr(name: str, value: Any, *, minimum: float = 0.0, strict: bool = True,
         integer: bool = False) -> Any:
    """Validate a scalar or array argument; returns float or float64 array."""
    a = finite_array(name, value)
    bad = (a <= minimum) if strict else (a < minimum)
    if np.any(bad):
        raise ValueError(f"{name} must be {'>' if strict else '>='} {minimum}, got {value!r}")
    if integer and np.any(a != np.round(a)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    return float(a) if a.ndim == 0 else a


# ---------------------------------------------------------------------------- Lemma 1
def lemma1_delta_sq(*, lam: float, gamma_f_sq: float, batch_size: int, nu: float,
                    mu: float | None = None, L: float | None = None) -> float:
    """Lemma 1 of pFedMe (docs/formulas.md §B.5): the δ² bounding E‖θ̃ − θ̂‖².

    δ² = 2/(λ+μ)² · (γ_f²/|D| + ν)   under A1(a) (pass ``mu``),
    δ² = 2/(λ−L)² · (γ_f²/|D| + ν)   under A1(b), requires λ > L (pass ``L``).

    Symbols: λ → ``lam``, γ_f² → ``gamma_f_sq`` (A2 variance of one sample's gradient),
    |D| → ``batch_size``, ν → ``nu`` (inner accuracy of eq. 8), μ → ``mu``, L → ``L``.
    Exactly one of ``mu`` / ``L`` selects the case."""
    lam = positive("lam", lam)
    noise = nonnegative("gamma_f_sq", gamma_f_sq) / positive_int("batch_size", batch_size)
    nu = nonnegative("nu", nu)
    if (mu is None) == (L is None):
        raise ValueError("pass exactly one of mu (case A1(a)) or L (case A1(b))")
    if mu is not None:
        denom = lam + nonnegative("mu", mu)
    else:
        L = nonnegative("L", L)
        if lam <= L:
            raise ValueError(f"Lemma 1 (non-convex case) needs lam > L: lam={lam}, L={L}")
        denom = lam - L
    value = 2.0 * (noise + nu) / denom / denom  # no under/overflow of denom² alone
    if not math.isfinite(value):
        raise ValueError(f"delta² = 2(gamma_f²/|D| + nu)/denominator² leaves float64 "
                         f"(denominator {denom!r})")
    return value


# ---------------------------------------------------------------------------- Lemma 2
def gradient_diversity(grads: Any) -> float:
    """(1/N) Σᵢ ‖gᵢ − ḡ‖² for per-client gradients ``grads`` [N, d] (LHS of Lemma 2, A3)."""
    g = finite_array("grads", grads, ndim=2)
    if g.shape[0] == 0 or g.shape[1] == 0:
        raise ValueError(f"grads must hold at least one client and one coordinate, got shape "
                         f"{g.shape}")
    return float(((g - g.mean(0)) ** 2).sum(1).mean())


def sigma_F1_sq(grads_at_opt: Any) -> float:
    """σ²_{F,1} := (1/N) Σᵢ ‖∇F_i(w*)‖² (Lemma 2(a), docs/formulas.md §B.5); ``grads_at_opt`` [N, d]
    are the envelope gradients λ(w* − θ̂_i(w*)) at the minimiser w* of F."""
    g = finite_array("grads_at_opt", grads_at_opt, ndim=2)
    return float((g ** 2).sum(1).mean())


def lemma2a_bound(*, lam: float, F_gap: float, sigma_F1_sq: float) -> float:
    """Lemma 2(a) RHS (A1(a)): 4 L_F (F(w) − F(w*)) + 2 σ²_{F,1}, with L_F = λ (Prop. 1).

    Symbols: λ → ``lam``, F(w) − F(w*) → ``F_gap`` (≥ 0), σ²_{F,1} → ``sigma_F1_sq``."""
    return (4 * positive("lam", lam) * nonnegative("F_gap", F_gap)
            + 2 * nonnegative("sigma_F1_sq", sigma_F1_sq))


def _lemma2b_check(lam: float, L: float) -> tuple[float, float]:
    lam, L = positive("lam", lam), nonnegative("L", L)
    if lam <= 2 * math.sqrt(2) * L:
        raise ValueError(f"Lemma 2(b) needs lam > 2*sqrt(2)*L = {2 * math.sqrt(2) * L:.6g}, "
                         f"got lam={lam}")
    return lam, L


def sigma_F2_sq(*, lam: float, L: float, sigma_f_sq: float) -> float:
    """σ²_{F,2} := 2λ²/(λ² − 8L²) · σ_f² (Lemma 2(b), docs/formulas.md §B.5, numerator assignment
    read from the layout); requires λ > 2√2 L. σ_f² → ``sigma_f_sq`` (A3 diversity)."""
    lam, L = _lemma2b_check(lam, L)
    return 2 * lam ** 2 / (lam ** 2 - 8 * L ** 2) * nonnegative("sigma_f_sq", sigma_f_sq)


def lemma2b_bound(*, lam: float, L: float, grad_F_norm_sq: float, sigma_f_sq: float) -> float:
    """Lemma 2(b) RHS (A1(b), λ > 2√2L): 8L²/(λ² − 8L²) ‖∇F(w)‖² + σ²_{F,2}.

    Symbols: λ → ``lam``, L → ``L``, ‖∇F(w)‖² → ``grad_F_norm_sq``, σ_f² → ``sigma_f_sq``."""
    lam, L = _lemma2b_check(lam, L)
    return (8 * L ** 2 / (lam ** 2 - 8 * L ** 2) * nonnegative("grad_F_norm_sq", grad_F_norm_sq)
            + sigma_F2_sq(lam=lam, L=L, sigma_f_sq=sigma_f_sq))


# -------------------------------------------------------------- symbolic theorem terms
def theorem1a_symbolic() -> dict[str, sp.Expr]:
    """Theorem 1(a) terms (docs/formulas.md §B.6) in sympy, with L_F = λ, μ_F = λμ/(λ+μ):
    initial Δ₀μ_F e^{−η̂₁μ_F T/2}; sampling (N/S−1)σ²_{F,1}/(μ_F T N);
    drift (Rσ²_{F,1} + δ²λ²)κ_F/(R(Tβμ_F)²); neighbourhood λ²δ²/μ_F."""
    mu_F = _lam * _mu / (_lam + _mu)
    kappa_F = _lam / mu_F
    eta1 = 1 / (6 * _lam * (3 + 128 * kappa_F / _beta))
    return {
        "initial": _D0 * mu_F * sp.exp(-eta1 * mu_F * _T / 2),
        "sampling": (_N / _S - 1) * _ssq / (mu_F * _T * _N),
        "drift": (_R * _ssq + _dsq * _lam ** 2) * kappa_F / (_R * (_T * _beta * mu_F) ** 2),
        "neighbourhood": _lam ** 2 * _dsq / mu_F,
    }


def theorem2a_symbolic(r_exponent: Any = None) -> dict[str, sp.Expr]:
    """Theorem 2(a) terms (docs/formulas.md §B.6) in sympy, with L_F = λ, η̂₂ = 1/(75 L_F λ²):
    initial Δ_F/(η̂₂T); sampling (Δ_F L_F σ²_{F,2})^{1/2}(N/S−1)^{1/2}/√(TN);
    drift Δ_F^{2/3}(Rσ²_{F,2} + λ²δ²)^{1/3}/(β^{4/3} R^{r} T^{2/3}) with r = ``r_exponent``
    (UNCERTAIN reading; seed layout gives 1/3; ``None`` keeps the symbol ``r_exp``);
    neighbourhood λ²δ²."""
    r_exponent = _rexp if r_exponent is None else sp.nsimplify(r_exponent)
    eta2 = 1 / (75 * _lam * _lam ** 2)
    third = sp.Rational(1, 3)
    return {
        "initial": _DF / (eta2 * _T),
        "sampling": sp.sqrt(_DF * _lam * _ssq) * sp.sqrt(_N / _S - 1) / sp.sqrt(_T * _N),
        "drift": _DF ** (2 * third) * (_R * _ssq + _lam ** 2 * _dsq) ** third
        / (_beta ** (4 * third) * _R ** r_exponent * _T ** (2 * third)),
        "neighbourhood": _lam ** 2 * _dsq,
    }


_ARGS1 = (_T, _R, _N, _S, _beta, _lam, _mu, _dsq, _ssq, _D0)
_ARGS2 = (_T, _R, _N, _S, _beta, _lam, _dsq, _ssq, _DF, _rexp)
_THM1 = {k: sp.lambdify(_ARGS1, e, "numpy") for k, e in theorem1a_symbolic().items()}
_THM2 = {k: sp.lambdify(_ARGS2, e, "numpy") for k, e in theorem2a_symbolic().items()}


# ------------------------------------------------------------------ step-size conditions
def eta_hat_1(*, lam: float, mu: float, beta: float) -> float:
    """η̂₁ := 1/(6 L_F (3 + 128 κ_F/β)) (Theorem 1, docs/formulas.md §B.6), L_F = λ,
    κ_F = λ/μ_F = (λ+μ)/μ; requires μ > 0 and β ≥ 1. Local step: η ≤ η̂₁/(βR)."""
    lam, mu = positive("lam", lam), positive("mu", mu)
    b = _arr("beta", beta, minimum=1.0, strict=False)
    return 1.0 / (6 * lam * (3 + 128 * ((lam + mu) / mu) / b))


def eta_hat_2(*, lam: float, L: float) -> float:
    """η̂₂ := 1/(75 L_F λ²) = 1/(75 λ³) (Theorem 2, docs/formulas.md §B.6); requires
    λ ≥ √(8L² + 1). Local step: η ≤ η̂₂/(βR)."""
    lam, L = positive("lam", lam), nonnegative("L", L)
    if lam < math.sqrt(8 * L ** 2 + 1):
        raise ValueError(f"Theorem 2 needs lam >= sqrt(8L^2+1) = {math.sqrt(8 * L**2 + 1):.6g}"
                         f", got lam={lam}")
    return 1.0 / (75 * lam ** 3)


def local_step_bound(*, eta_hat: float, beta: float, R: int) -> float:
    """The local step-size condition η ≤ η̂/(βR) of Theorems 1 and 2 (η̂ = η̂₁ or η̂₂)."""
    return positive("eta_hat", eta_hat) / (
        _arr("beta", beta, minimum=1.0, strict=False) * positive_int("R", R))


def min_rounds_theorem1(*, lam: float, mu: float, beta: float) -> float:
    """Theorem 1's hypothesis T ≥ 2/(η̂₁ μ_F), μ_F = λμ/(λ+μ)."""
    mu_F = lam * mu / (lam + mu) if lam > 0 and mu > 0 else 0.0
    return 2.0 / (eta_hat_1(lam=lam, mu=mu, beta=beta) * mu_F)


def _sizes(T_, R_, N_, S_):
    T_, R_, N_ = (_arr(n, v, minimum=1, strict=False, integer=True)
                  for n, v in (("T", T_), ("R", R_), ("N", N_)))
    S_ = N_ if S_ is None else _arr("S", S_, minimum=1, strict=False, integer=True)
    if np.any(np.asarray(S_) > np.asarray(N_)):
        raise ValueError(f"S must be <= N, got S={S_}, N={N_}")
    return T_, R_, N_, S_


# ---------------------------------------------------------------------- Theorems 1, 2
def theorem1a(*, T: Any, R: Any, N: Any, beta: Any, lam: float, mu: float, delta_sq: float,
              sigma_F1_sq: float, Delta0: float, S: Any = None,
              check_conditions: bool = True) -> BoundTerms:
    """Theorem 1(a) of pFedMe (strongly convex): bound on E[F(w̄_T) − F(w*)].

    Terms (hidden constants 1, polylogs dropped), docs/formulas.md §B.6:
    ``initial`` Δ₀μ_F e^{−η̂₁μ_F T/2}, ``sampling`` (N/S−1)σ²_{F,1}/(μ_F T N),
    ``drift`` (Rσ²_{F,1} + δ²λ²)κ_F/(R(Tβμ_F)²), ``neighbourhood`` λ²δ²/μ_F.
    Symbols: T, R, N, S (default S = N), β → ``beta``, λ → ``lam``, μ → ``mu``,
    δ² → ``delta_sq`` (Lemma 1), σ²_{F,1} → ``sigma_F1_sq``, Δ₀ = ‖w⁰ − w*‖² → ``Delta0``.
    Hypotheses (A1(a), A2; β ≥ 1; T ≥ 2/(η̂₁μ_F)) checked unless ``check_conditions=False``.
    Arguments broadcast (numpy arrays allowed)."""
    T_, R_, N_, S_ = _sizes(T, R, N, S)
    b = _arr("beta", beta, minimum=1.0 if check_conditions else 0.0,
             strict=not check_conditions)
    lam_, mu_ = positive("lam", lam), positive("mu", mu)
    ds, s2, d0 = (nonnegative(n, v) for n, v in
                  (("delta_sq", delta_sq), ("sigma_F1_sq", sigma_F1_sq), ("Delta0", Delta0)))
    if check_conditions:
        t_min = min_rounds_theorem1(lam=lam_, mu=mu_, beta=b)
        if np.any(np.asarray(T_) < t_min):
            raise ValueError(f"Theorem 1 needs T >= 2/(eta_hat_1 mu_F) = {np.min(t_min):.6g}"
                             " (pass check_conditions=False to evaluate anyway)")
    args = (T_, R_, N_, S_, b, lam_, mu_, ds, s2, d0)
    return _bound({k: fn(*args) for k, fn in _THM1.items()}, "pFedMe Theorem 1(a)")


def theorem2a(*, T: Any, R: Any, N: Any, beta: Any, lam: float, L: float, delta_sq: float,
              sigma_F2_sq: float, Delta_F: float, S: Any = None,
              r_exponent: float = 1 / 3, check_conditions: bool = True) -> BoundTerms:
    """Theorem 2(a) of pFedMe (non-convex, smooth): bound on E‖∇F(w_{t*})‖².

    Terms (hidden constants 1), docs/formulas.md §B.6: ``initial`` Δ_F/(η̂₂T) with η̂₂ = 1/(75λ³);
    ``sampling`` (Δ_F L_F σ²_{F,2})^{1/2}(N/S−1)^{1/2}/√(TN);
    ``drift`` Δ_F^{2/3}(Rσ²_{F,2} + λ²δ²)^{1/3}/(β^{4/3} R^{r} T^{2/3});
    ``neighbourhood`` λ²δ².
    Symbols: T, R, N, S (default N), β → ``beta``, λ → ``lam``, L → ``L``, δ² →
    ``delta_sq``, σ²_{F,2} → ``sigma_F2_sq``, Δ_F = F(w⁰) − F* → ``Delta_F``;
    r → ``r_exponent`` (UNCERTAIN reading, default 1/3 as printed; 2/3 is the value that
    makes Corollary 2 follow, see :func:`pfl_theory.rates.corollary2_derivation`).
    Hypotheses (A1(b), A2, A3; β ≥ 1; λ ≥ √(8L²+1)) checked unless ``check_conditions=False``."""
    T_, R_, N_, S_ = _sizes(T, R, N, S)
    b = _arr("beta", beta, minimum=1.0 if check_conditions else 0.0,
             strict=not check_conditions)
    lam_, L_ = positive("lam", lam), nonnegative("L", L)
    if check_conditions:
        eta_hat_2(lam=lam_, L=L_)  # raises if lam < sqrt(8L^2+1)
    ds, s2, dF = (nonnegative(n, v) for n, v in
                  (("delta_sq", delta_sq), ("sigma_F2_sq", sigma_F2_sq), ("Delta_F", Delta_F)))
    r = positive("r_exponent", r_exponent)
    args = (T_, R_, N_, S_, b, lam_, ds, s2, dF, r)
    return _bound({k: fn(*args) for k, fn in _THM2.items()}, "pFedMe Theorem 2(a)")


def theorem1b(*, F_gap: Any, sigma_F1_sq: float, lam: float, delta_sq: float) -> BoundTerms:
    """Theorem 1(b): (1/N)Σ E‖θ̃ᵢ(w_T) − w*‖² ≤ E[F(w̄_T) − F*] + σ²_{F,1}/λ² + δ²
    (terms ``optimality``, ``diversity``, ``approximation``; constants 1). ``F_gap`` may be
    a measured gap or :func:`theorem1a`'s total."""
    return _bound({"optimality": _arr("F_gap", F_gap, strict=False),
                   "diversity": nonnegative("sigma_F1_sq", sigma_F1_sq) / positive("lam", lam) ** 2,
                   "approximation": nonnegative("delta_sq", delta_sq)}, "pFedMe Theorem 1(b)")


def theorem2b(*, grad_norm_sq: Any, sigma_F2_sq: float, lam: float,
              delta_sq: float) -> BoundTerms:
    """Theorem 2(b): (1/N)Σ E‖θ̃ᵢ(w_{t*}) − w_{t*}‖² ≤ E‖∇F(w_{t*})‖² + σ²_{F,2}/λ² + δ²
    (terms ``optimality``, ``diversity``, ``approximation``; constants 1)."""
    return _bound({"optimality": _arr("grad_norm_sq", grad_norm_sq, strict=False),
                   "diversity": nonnegative("sigma_F2_sq", sigma_F2_sq) / positive("lam", lam) ** 2,
                   "approximation": nonnegative("delta_sq", delta_sq)}, "pFedMe Theorem 2(b)")


# ------------------------------------------------------------------------ Corollaries
def corollary1_beta_symbolic(regime: str, reading: str = "sqrt(N/T)") -> sp.Expr:
    """β of Corollary 1 (S = N): regime ``"i"`` (massive clients) — β = √(N/T) (default
    reading, valid when N ≥ T) or β = √N/T (alternative reading, valid when √N ≥ T);
    regime ``"ii"`` — β = NR. Readings: docs/formulas.md §B.6 (UNCERTAIN for (i))."""
    if regime == "ii":
        return _N * _R
    if regime != "i":
        raise ValueError(f"regime must be 'i' or 'ii', got {regime!r}")
    if reading == "sqrt(N/T)":
        return sp.sqrt(_N / _T)
    if reading == "sqrt(N)/T":
        return sp.sqrt(_N) / _T
    raise ValueError(f"reading must be one of {COROLLARY1_READINGS}, got {reading!r}")


def corollary1_beta(*, N: int, T: int, R: int, reading: str = "sqrt(N/T)") -> tuple[float, str]:
    """Corollary 1's β (constants 1) and the regime used: (i) if N ≥ T (default reading;
    √N ≥ T for reading ``"sqrt(N)/T"``), else (ii) β = NR. Returns ``(beta, regime)``."""
    n, t, r = positive_int("N", N), positive_int("T", T), positive_int("R", R)
    if reading not in COROLLARY1_READINGS:
        raise ValueError(f"reading must be one of {COROLLARY1_READINGS}, got {reading!r}")
    massive = n >= t if reading == "sqrt(N/T)" else math.sqrt(n) >= t
    regime = "i" if massive else "ii"
    expr = corollary1_beta_symbolic(regime, reading)
    return float(expr.subs({_N: n, _T: t, _R: r})), regime


def corollary2_choice(*, N: int, R: int) -> tuple[float, float]:
    """Corollary 2 (S = N, constants 1): β = N^{1/2} R^{1/4} and T with T^{1/3} = (NR)^{2/3},
    i.e. T = (NR)². Returns ``(beta, T)``."""
    n, r = positive_int("N", N), positive_int("R", R)
    return n ** 0.5 * r ** 0.25, float((n * r) ** 2)


# every public function above: an arithmetic error of its input is a one-line ValueError
guard_public_functions(globals())
