"""PPFE theory — one import for every quantity of Section 5 of the paper.

Emrani, Najafi, Motahari — *Federated Ensemble Learning with Progressive Model
Personalization* (PPFE, arXiv 2602.14244, 2026); docs/formulas.md §C.5.  Split by topic:

* :mod:`pfl_theory.ppfe_covering` — Lemma 4 (log-space covering number of fully connected
  nets), Lemma 5 (composition), Lemma 6 (T-stage ensembles, numeric ε-allocation), Lemma 8
  (McDiarmid with the harmonic mean n̄), the union bound over the cover (eqs. 26–27);
* :mod:`pfl_theory.ppfe_bounds` — Theorem 7 and Corollary 2 calculators (named terms),
  Lemma 9 (with the endpoint correction κ† ≈ 3.134 and the asymptotics), the boosting bound
  exp(−2γ²T), the chain of eq. (14), and :func:`select_stages` (bias–variance choice of T);
* :mod:`pfl_theory.ppfe_lowrank` — low-rank parameter counts and truncated SVD;
* :mod:`pfl_theory.ppfe_boosting` — reweighting (eq. 7), SAMME/AdaBoost coefficients and the
  final ensemble (eq. 8), batched over clients.

Almost all of PPFE's equations are RECONSTRUCTED (see each docstring).
"""

from pfl_theory.ppfe_bounds import (KAPPA_DAGGER, KAPPA_MIN, U_DAGGER, Lemma9Result,
                                    StageSelection, adaboost_bound_chain, boosting_bias_bound,
                                    corollary2_terms, kappa0_from_ingredients, lemma9_asymptotic,
                                    lemma9_minimize, s_t, select_stages, stage_parameter_counts,
                                    theorem7_terms)
from pfl_theory.ppfe_covering import (Lemma6Allocation, alpha_grid, fc_parameter_count,
                                      harmonic_mean_size, lemma4_log_constants,
                                      lemma4_log_covering, lemma5_composition,
                                      lemma6_cover_radius, lemma6_log_cover_size,
                                      lemma6_log_covering, lemma8_deviation,
                                      union_bound_deviation)
from pfl_theory.ppfe_lowrank import low_rank_param_count, low_rank_reduction_factor, truncated_svd

__all__ = [
    "KAPPA_DAGGER", "KAPPA_MIN", "U_DAGGER", "Lemma9Result", "StageSelection",
    "adaboost_bound_chain", "boosting_bias_bound", "corollary2_terms", "kappa0_from_ingredients",
    "lemma9_asymptotic", "lemma9_minimize", "s_t", "select_stages", "stage_parameter_counts",
    "theorem7_terms", "Lemma6Allocation", "alpha_grid", "fc_parameter_count",
    "harmonic_mean_size", "lemma4_log_constants", "lemma4_log_covering", "lemma5_composition",
    "lemma6_cover_radius", "lemma6_log_cover_size", "lemma6_log_covering", "lemma8_deviation",
    "union_bound_deviation", "low_rank_param_count", "low_rank_reduction_factor",
    "truncated_svd",
]
