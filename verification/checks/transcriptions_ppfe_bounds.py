"""PPFE (Emrani, Najafi, Motahari, arXiv 2602.14244) bound calculators against a second,
independent writing of the reconstructed formulas (:mod:`verification.transcriptions.
ppfe_bounds`, sympy): every public function of :mod:`pfl_theory.ppfe_bounds` at a fixed set
of random points, docs/formulas.md §C.5.3, C.5.4, C.5.10–C.5.12.

Points as in :mod:`verification.checks.transcriptions_plgu` (log-uniform, scalar arguments
≠ 1 and distinct, δ and γ_w inside (0, 1)); ``pfl_theory.ppfe_bounds`` is called through the
module attribute, so a patched function (the mutation run) is the one compared.
"""

from __future__ import annotations

import numpy as np

from pfl_theory import ppfe_bounds as P
from verification.core.registry import Context, Outcome, check
from verification.transcriptions import ppfe_bounds as T
from verification.transcriptions.agreement import (TOL, TOL_REASON, identity_outcome,
                                                   log_uniform, relative_difference)

PAPER = "PPFE (arXiv 2602.14244)"
#: the common @check arguments (literal ids stay readable by ``pflt verify --only``)
_IDENTITY = {"paper": PAPER, "kind": "identity", "reconstructed": True, "tolerance": TOL,
             "tolerance_reason": TOL_REASON, "quick": {"points": 8}, "full": {"points": 64}}
LAMBERT_REASON = ("Lambert-W root (scipy, float64) vs brentq root of u − ½ log u = log κ: "
                  "both ≲ 1e-15 relative; 1e-12 leaves ~1000×")
_LAMBERT = {**_IDENTITY, "tolerance_reason": LAMBERT_REASON}


def _rng(ctx: Context, key: int) -> np.random.Generator:
    return np.random.default_rng([ctx.seed, 26, 100 + key])


def _compare(ctx: Context, key: int, draw, ours, theirs, what: str) -> Outcome:
    rng = _rng(ctx, key)
    errs = []
    for i in range(ctx.params["points"]):
        args, kwargs = draw(rng, i)
        errs.append(relative_difference(ours(*args, **kwargs), theirs(*args, **kwargs)))
    return identity_outcome(errs, ctx.tolerance, what)


def _stage_widths(rng: np.random.Generator) -> list[list[int]]:
    """T ≤ L stages of a depth-L net: common input width, per-stage hidden widths ≥ 2."""
    depth = int(rng.integers(2, 6))
    stages = int(rng.integers(2, depth + 1))
    d0, out = int(rng.integers(3, 30)), int(rng.integers(1, 4))
    return [[d0] + [int(v) for v in rng.integers(2, 40, size=depth - 1)] + [out]
            for _ in range(stages)]


def _sizes(rng: np.random.Generator) -> list[int]:
    return [int(v) for v in rng.integers(5, 400, size=int(rng.integers(2, 30)))]


@check("ppfe.transcription_theorem7", **_IDENTITY,
       reference="Theorem 7 (eq. 24), §C.5.3: shared over N n̄, personalized over n̄, √(T/n̄), "
                 "confidence; parameter counts per stage")
def theorem7(ctx: Context) -> Outcome:
    """Theorem 7's four terms and total (with and without the depth factor) and the per-stage
    shared/personalized parameter counts equal their independent transcription."""
    def draw(rng, i):
        return (_stage_widths(rng),), {"sizes": _sizes(rng), "delta": log_uniform(rng, 0.005, 0.3),
                                       "depth_factor": bool(i % 2 == 0)}

    def ours(widths, **kw):
        return {"terms": P.theorem7_terms(widths, **kw), "counts": P.stage_parameter_counts(widths)}

    def theirs(widths, **kw):
        return {"terms": T.theorem7_terms(widths, **kw), "counts": T.stage_parameter_counts(widths)}
    return _compare(ctx, 1, draw, ours, theirs, "Theorem 7 and the stage parameter counts")


@check("ppfe.transcription_corollary2", **_IDENTITY,
       reference="Corollary 2 (eqs. 29–30), §C.5.4, with S_T(γ_w) = Σ_{t=1}^{T−1} t γ_w^{2t}")
def corollary2(ctx: Context) -> Outcome:
    """Corollary 2's terms and total, and S_T(γ_w) (closed form, and T(T−1)/2 at γ_w = 1),
    equal their independent transcription."""
    def draw(rng, i):
        return (), {"width": log_uniform(rng, 8.0, 100.0), "depth": int(rng.integers(2, 4)),
                    "num_stages": int(rng.integers(4, 9)), "n": log_uniform(rng, 20.0, 1000.0),
                    "num_clients": int(rng.integers(3, 300)),
                    "gamma_w": 1.0 if i == 1 else log_uniform(rng, 0.2, 0.95),
                    "delta": log_uniform(rng, 0.005, 0.3)}

    def ours(**kw):
        return {"terms": P.corollary2_terms(**kw), "s_t": P.s_t(kw["num_stages"], kw["gamma_w"])}

    def theirs(**kw):
        return {"terms": T.corollary2_terms(**kw), "s_t": T.s_t(kw["num_stages"], kw["gamma_w"])}
    return _compare(ctx, 2, draw, ours, theirs, "Corollary 2 and S_T")


@check("ppfe.transcription_lemma9", **_LAMBERT,
       reference="Lemma 9 (eq. 28), §C.5.10, with the endpoint correction κ† ≈ 3.134")
def lemma9(ctx: Context) -> Outcome:
    """Lemma 9's minimiser, minimum, u*, κ and the interior/endpoint case equal the
    transcription's (larger root u₂ = −½ W₋₁(−2/κ²)); b spans both cases."""
    def draw(rng, i):
        return (log_uniform(rng, 0.3, 3.0), log_uniform(rng, 1e-6, 20.0),
                log_uniform(rng, 0.3, 3.0)), {}
    return _compare(ctx, 3, draw, lambda *a: P.lemma9_minimize(*a), T.lemma9_minimize, "Lemma 9")


@check("ppfe.transcription_lemma9_asymptotic", **_IDENTITY,
       reference="Lemma 9 (§C.5.10), two-term asymptotics as b → 0")
def lemma9_asymptotic(ctx: Context) -> Outcome:
    """u₂ ≈ log κ + ½ log log κ, x* ≈ √b/(2a√u₂), φ* ≈ √(b u₂)(1 + 1/(2u₂)) equal the
    transcription's at κ > e."""
    def draw(rng, i):
        return (log_uniform(rng, 0.3, 3.0), log_uniform(rng, 1e-8, 1e-2),
                log_uniform(rng, 0.3, 3.0)), {}
    return _compare(ctx, 4, draw, lambda *a: P.lemma9_asymptotic(*a), T.lemma9_asymptotic,
                    "the Lemma 9 asymptotics")


@check("ppfe.transcription_adaboost_chain", **_IDENTITY,
       reference="Theorem 2 (eq. 14), §C.5.11: Π 2√(ε_t(1−ε_t)) ≤ e^{−2Σ(½−ε_t)²} ≤ e^{−2γ²T}")
def adaboost_chain(ctx: Context) -> Outcome:
    """The three members of eq. (14) for every prefix of random weighted errors, and the
    bias bound e^{−2γ²T} at random (γ, T), equal their independent transcription."""
    def draw(rng, i):
        errors = [float(v) for v in rng.uniform(0.05, 0.48, size=int(rng.integers(2, 9)))]
        return (errors, log_uniform(rng, 0.02, 0.45), log_uniform(rng, 1.5, 60.0)), {}

    def ours(errors, gamma, stages):
        return {"chain": P.adaboost_bound_chain(errors),
                "bias": P.boosting_bias_bound(gamma, stages)}

    def theirs(errors, gamma, stages):
        return {"chain": T.adaboost_bound_chain(errors),
                "bias": T.boosting_bias_bound(gamma, stages)}
    return _compare(ctx, 5, draw, ours, theirs, "eq. (14) and e^{−2γ²T}")


@check("ppfe.transcription_kappa0", **_IDENTITY,
       reference="§C.5.12 [DERIVED from Lemma 6 + Lemma 8]: κ₀ = B √(log(⌈A/ε_α⌉ + 1)/2)")
def kappa0(ctx: Context) -> Outcome:
    """κ₀ from the loss bound, coefficient bound and coefficient-grid radius equals the
    transcription's."""
    def draw(rng, i):
        return (), {"loss_bound": log_uniform(rng, 1.5, 5.0),
                    "coef_bound": log_uniform(rng, 6.0, 20.0),
                    "eps_alpha": log_uniform(rng, 0.001, 0.3)}
    return _compare(ctx, 6, draw, lambda **k: P.kappa0_from_ingredients(**k),
                    T.kappa0_from_ingredients, "κ₀")


@check("ppfe.transcription_stage_edge", **_IDENTITY,
       reference="eq. (13) edge min_t(½ − ε_t); SAMME (1 − 1/C − ε_t)·C/(2(C − 1)) for C > 2")
def stage_edge(ctx: Context) -> Outcome:
    """The weak-learning edge from random stage errors (C = 2..10 classes) equals the
    transcription's."""
    def draw(rng, i):
        classes = 2 if i < 2 else int(rng.integers(3, 11))
        errors = [float(v) for v in rng.uniform(0.02, 1 - 1 / classes - 0.02,
                                                size=int(rng.integers(2, 7)))]
        return (errors,), {"num_classes": classes}
    return _compare(ctx, 7, draw, lambda *a, **k: P.stage_edge(*a, **k), T.stage_edge,
                    "the stage edge")


@check("ppfe.transcription_select_stages", **_LAMBERT,
       reference="§C.5.12: argmin_T e^{−2γ²T} + κ₀√(T/n) (brute force) and the Lemma-9 "
                 "continuous optimum")
def select_stages(ctx: Context) -> Outcome:
    """The chosen T equals the brute-force integer minimiser of the curve, and the curve,
    b', κ, the interior flag and the continuous T* equal the transcription's."""
    def draw(rng, i):
        return (), {"gamma": log_uniform(rng, 0.02, 0.45), "kappa0": log_uniform(rng, 0.1, 3.0),
                    "n": log_uniform(rng, 20.0, 1e4), "t_max": int(rng.integers(5, 61))}
    return _compare(ctx, 8, draw, lambda **k: P.select_stages(**k), T.select_stages,
                    "the choice of T")
