"""Risk certificates: numbers that do say something where a paper's bound is VACUOUS.

A bound above the trivial bound of its quantity says nothing; the reader's next question is
how much *is* knowable at that sample size.  Two standard certificates answer it, both on
the same trained model(s) as the bound, both valid with probability ≥ 1 − δ:

* **held-out test-set bound** (Langford, *Tutorial on practical prediction theory for
  classification*, JMLR 2005, Theorem 3.3; for losses in [0, 1] and independent — not
  necessarily identically distributed — samples by Hoeffding 1963, Theorem 1):
  L ≤ kl⁻¹(L̂_test, ln(1/δ)/n_test), with kl(q‖p) the Bernoulli relative entropy and
  kl⁻¹(q, c) = max{p ≥ q : kl(q‖p) ≤ c} (:func:`kl_inverse_upper`); the mirror
  L ≥ kl⁻¹_lower gives lower certificates (:func:`kl_inverse_lower`);
* **PAC-Bayes-kl bound** with a Gaussian posterior Q = N(w, σ²I) around the trained weights
  and a data-dependent prior P = N(w_prior, σ²I) trained on a split S_prior of the training
  data (Maurer, *A note on the PAC-Bayesian theorem*, 2004; Seeger 2002; the construction of
  non-vacuous neural-network certificates of Dziugaite & Roy 2017 and Pérez-Ortiz,
  Rivasplata, Shawe-Taylor & Szepesvári, *Tighter risk certificates for neural networks*,
  JMLR 2021, §2–§5): on the n samples S_bound = S \\ S_prior,
  kl(L̂(Q)‖L(Q)) ≤ (KL(Q‖P) + ln(2√n/δ))/n, with KL = ‖w − w_prior‖²/(2σ²), and L̂(Q)
  itself bounded from m Monte-Carlo draws of Q by L̂(Q) ≤ kl⁻¹(L̂_MC, ln(2/δ′)/m) (Langford &
  Caruana 2001, the sample-convergence bound).  It certifies the *stochastic* predictor Q.

Every function works in float64; a certificate is returned as a :class:`Certificate`
(``value``, ``name``, ``delta``), the record results.json stores beside a VACUOUS result.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = ["Certificate", "kl_bernoulli", "kl_inverse_upper", "kl_inverse_lower",
           "test_set_upper", "test_set_lower", "pac_bayes_kl", "gaussian_kl_same_sigma",
           "not_applicable"]

#: bisection steps of the kl inversions: 2^-80 of [0, 1] is below float64 resolution
_STEPS = 80


@dataclass(frozen=True)
class Certificate:
    """A certified number: ``value`` (None where none applies), what it is (``name``), and
    its failure probability ``delta`` (None where none applies)."""

    value: float | None
    name: str
    delta: float | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def not_applicable(reason: str) -> Certificate:
    """A VACUOUS bound whose quantity is no risk or gap (an optimisation bound of one run,
    a complexity term): no certificate, and why."""
    return Certificate(None, f"n/a: {reason}", None)


def kl_bernoulli(q: float, p: float) -> float:
    """kl(q‖p) = q ln(q/p) + (1 − q) ln((1 − q)/(1 − p)) for q, p ∈ [0, 1] (0 ln 0 = 0)."""
    q, p = float(q), float(p)
    if not (0.0 <= q <= 1.0 and 0.0 <= p <= 1.0):
        raise ValueError(f"kl needs q, p in [0, 1], got q={q!r}, p={p!r}")
    out = 0.0
    for a, b in ((q, p), (1.0 - q, 1.0 - p)):
        if a > 0.0:
            if b <= 0.0:
                return math.inf
            out += a * math.log(a / b)
    return out


def _check(q: float, c: float) -> tuple[float, float]:
    q, c = float(q), float(c)
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"kl inverse needs an empirical value in [0, 1], got {q!r}")
    if not (c >= 0.0 and math.isfinite(c)):
        raise ValueError(f"kl inverse needs a finite budget c >= 0, got {c!r}")
    return q, c


def kl_inverse_upper(q: float, c: float) -> float:
    """max{p ∈ [q, 1] : kl(q‖p) ≤ c} by bisection (kl(q‖·) increases on [q, 1])."""
    q, c = _check(q, c)
    lo, hi = q, 1.0
    if kl_bernoulli(q, hi) <= c:
        return 1.0
    for _ in range(_STEPS):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if kl_bernoulli(q, mid) <= c else (lo, mid)
    return lo


def kl_inverse_lower(q: float, c: float) -> float:
    """min{p ∈ [0, q] : kl(q‖p) ≤ c} by bisection (kl(q‖·) decreases on [0, q])."""
    q, c = _check(q, c)
    lo, hi = 0.0, q
    if kl_bernoulli(q, lo) <= c:
        return 0.0
    for _ in range(_STEPS):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if kl_bernoulli(q, mid) <= c else (mid, hi)
    return hi


def _unit_losses(losses: Any, scale: float) -> tuple[np.ndarray, int]:
    x = np.asarray(losses, dtype=float).ravel() / float(scale)
    if x.size == 0 or not np.all(np.isfinite(x)) or np.any(x < 0):
        raise ValueError("a certificate needs finite, non-negative losses")
    above = int(np.sum(x > 1.0))
    return np.minimum(x, 1.0), above


def test_set_upper(losses: Any, delta: float, *, scale: float = 1.0) -> tuple[float, int]:
    """Langford's test-set bound on the mean risk, losses in [0, ``scale``]: ``scale`` ×
    kl⁻¹(mean(losses/scale), ln(1/δ)/n).  Returns (bound, number of losses above ``scale``,
    clipped — the bounded-loss assumption fails on those)."""
    x, above = _unit_losses(losses, scale)
    return float(scale) * kl_inverse_upper(x.mean(), math.log(1.0 / delta) / x.size), above


def test_set_lower(losses: Any, delta: float, *, scale: float = 1.0) -> tuple[float, int]:
    """The mirror lower bound: ``scale`` × kl⁻¹_lower(mean, ln(1/δ)/n)."""
    x, above = _unit_losses(losses, scale)
    return float(scale) * kl_inverse_lower(x.mean(), math.log(1.0 / delta) / x.size), above


def gaussian_kl_same_sigma(w_post: Any, w_prior: Any, sigma: float) -> float:
    """KL(N(w_post, σ²I) ‖ N(w_prior, σ²I)) = ‖w_post − w_prior‖² / (2σ²)."""
    diff = np.asarray(w_post, dtype=float).ravel() - np.asarray(w_prior, dtype=float).ravel()
    return float(diff @ diff) / (2.0 * float(sigma) ** 2)


def pac_bayes_kl(mc_risk: float, *, n_mc: int, kl: float, n: int, delta: float,
                 delta_mc: float) -> float:
    """L(Q) ≤ kl⁻¹(kl⁻¹(L̂_MC, ln(2/δ′)/m), (KL + ln(2√n/δ))/n): the Monte-Carlo estimate
    ``mc_risk`` of L̂(Q) on the n bound samples from ``n_mc`` = m draws of Q, then the
    PAC-Bayes-kl inequality (module docstring); valid with probability ≥ 1 − δ − δ′."""
    if n < 1 or n_mc < 1:
        raise ValueError(f"need n >= 1 bound samples and n_mc >= 1 draws, got {n}, {n_mc}")
    emp = kl_inverse_upper(mc_risk, math.log(2.0 / delta_mc) / n_mc)
    return kl_inverse_upper(emp, (kl + math.log(2.0 * math.sqrt(n) / delta)) / n)


def excess_certificate(model_losses: Any, refit_losses: Any, delta: float, *, scale: float,
                       what: str) -> Certificate:
    """Held-out certificate of an excess risk L(ŵ) − L(w*) in a well-specified model, losses
    in [0, ``scale``] (the bounded-loss assumption of the bound it sits beside): Langford's
    upper bound on L(ŵ) from ``model_losses`` minus a lower bound on L(w*) from
    ``refit_losses`` — the losses of the least-squares fit to the same held-out sample, whose
    mean is ≤ that of w*, so kl⁻¹_lower of it (increasing in its argument) is ≤ kl⁻¹_lower
    of w*'s mean ≤ L(w*) — each at δ/2; every held-out loss above ``scale`` is said."""
    upper, above = test_set_upper(model_losses, delta / 2, scale=scale)
    lower, above_refit = test_set_lower(refit_losses, delta / 2, scale=scale)
    n = np.asarray(model_losses).size
    note = (f"; {above + above_refit} held-out losses above the loss range {scale:.3g} "
            f"(clipped: the bounded-loss assumption fails there)" if above + above_refit
            else f"; losses scaled by the loss range {scale:.3g}")
    return Certificate(upper - lower, f"held-out kl bound on {what} (Langford test-set bound, "
                       f"{n} fresh samples{note})", delta)
