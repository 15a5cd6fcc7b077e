"""The registry of implemented formulas, and the formula reference rendered from it.

Every formula the toolkit implements is one :class:`Formula`: the paper, the equation /
theorem it restates, its provenance (legible in the paper, read from a garbled copy,
derived, taken from the authors' code, or reconstructed), the reading chosen where the
paper is ambiguous or in error, and the dotted names of the functions that implement it.
Sections use the ids that source files cite as ``docs/formulas.md §X.Y``;
:func:`render_markdown` writes that document (``pflt formulas --write``), and the tests
regenerate it, compare it with the committed file, import every implementing name and
check that every ``§X.Y`` cited in the repository exists here.

Papers: CGPFL (Tang, Guo, Guo, IJCAI 2022, arXiv 2106.13044; ICLR-2022 version with the
appendix), pFedMe (Dinh, Tran, Nguyen, NeurIPS 2020, arXiv 2006.08848), PPFE (Emrani,
Najafi, Motahari, arXiv 2602.14244, 2026), PLGU (Qu et al., CVPR 2023).
"""

from __future__ import annotations

from dataclasses import dataclass

CGPFL = "CGPFL (Tang, Guo, Guo, IJCAI 2022)"
PFEDME = "pFedMe (Dinh, Tran, Nguyen, NeurIPS 2020)"
PPFE = "PPFE (Emrani, Najafi, Motahari, arXiv 2602.14244)"
PLGU = "PLGU (Qu et al., CVPR 2023)"

PROVENANCE = {
    "SEED": "legible in the paper (possibly re-typeset)",
    "SEED-GARBLED→READ": "present in the paper, restored from a scrambled extraction",
    "CODE": "taken from the authors' public repository",
    "DERIVED": "not printed; follows in a line or two from printed definitions",
    "RECONSTRUCTED": "absent from every available copy; rebuilt from the prose and standard "
                     "results — not verbatim",
    "ERRATUM?": "the printed formula looks inconsistent; the reading used is stated",
}


@dataclass(frozen=True)
class Formula:
    """One implemented formula: where it comes from and which code implements it."""

    section: str
    name: str
    paper: str
    equation: str
    provenance: str
    reading: str
    implementations: tuple[str, ...]


# (section id, title); sub-items of §E are the numbered checks a toolkit can run.
SECTIONS: tuple[tuple[str, str], ...] = (
    ("A", "CGPFL — contextualized / clustered generalization"),
    ("A.0", "Versions and equation numbering (IJCAI eqs. 1–11 = ICLR eqs. 1–12)"),
    ("A.1", "Setting and notation"),
    ("A.2", "Bi-level objective (eq. 2)"),
    ("A.3", "Clustering matrices P, Q, J (eq. 3)"),
    ("A.4", "Lemma 1 (norm non-expansion)"),
    ("A.5", "Algorithm 1 (CGPFL) with every update rule"),
    ("A.6", "Assumptions, Proposition 1 and the averaged iterate"),
    ("A.7", "Theorem 4.1 / Theorem 1 (convergence)"),
    ("A.8", "Generalization (Definitions 2–3, Theorem 4.2 / Theorem 2)"),
    ("A.9", "CGPFL-Heur: choosing K (IJCAI eq. 11 / ICLR eq. 12)"),
    ("A.10", "Experimental settings and tables"),
    ("A.11", "Known inconsistencies (CGPFL)"),
    ("B", "pFedMe — personalized FL with Moreau envelopes"),
    ("B.1", "Problems (eqs. 1–5)"),
    ("B.2", "Assumptions"),
    ("B.3", "Proposition 1 (Moreau envelope properties)"),
    ("B.4", "Algorithm 1 (pFedMe) and implementation details of the public code"),
    ("B.5", "Lemma 1 (δ control) and Lemma 2 (diversity of F_i)"),
    ("B.6", "Convergence theorems (Theorems 1–2, Corollaries 1–2)"),
    ("B.7", "Experiments and Table 1"),
    ("C", "PPFE — progressive personalized federated ensembles"),
    ("C.1", "Setting (Section 3)"),
    ("C.2", "Objectives (eqs. 3–6) and low-rank reduction"),
    ("C.3", "Boosting: reweighting (eq. 7), coefficients, final ensemble (eq. 8)"),
    ("C.4", "Algorithm 1 (PPFE)"),
    ("C.5", "Theory"),
    ("C.5.1", "Generalization gap (eq. 9 informal, eq. 23 formal)"),
    ("C.5.2", "Abstract bound (eq. 1 = eq. 10)"),
    ("C.5.3", "Theorem 1 (informal, eq. 11) = Theorem 7 (formal, eq. 24)"),
    ("C.5.4", "Corollary 1 (informal, eq. 12) = Corollary 2 (formal, eqs. 29–30)"),
    ("C.5.5", "Definition 1 and Lemma 3 (uniform convergence via covers)"),
    ("C.5.6", "Lemma 4 (covering number of fully-connected networks)"),
    ("C.5.7", "Lemma 5 (compositional cover)"),
    ("C.5.8", "Lemma 6 (covering number of T-stage ensembles, eqs. 21–22)"),
    ("C.5.9", "Lemma 8 (McDiarmid with the harmonic mean) and the union bound (eqs. 26–27)"),
    ("C.5.10", "Lemma 9 (one-dimensional minimisation)"),
    ("C.5.11", "Theorem 2 (AdaBoost training error, eq. 14)"),
    ("C.5.12", "Bias–variance choice of the number of stages T"),
    ("C.6", "Synthetic linear-regression experiment (eqs. 15–16)"),
    ("C.7", "Real-data settings and tables"),
    ("D", "PLGU — personalize locally, generalize universally"),
    ("D.1", "Problem (eq. 1)"),
    ("D.2", "SAM and LWSAM (eqs. 2–5)"),
    ("D.3", "Algorithm 1 — the local PLGU routine"),
    ("D.4", "Personalization score (eqs. 6 and 10)"),
    ("D.5", "PLGU-LF (scheme I): Algorithm 2 and objective (eq. 7)"),
    ("D.6", "PLGU-GRep (scheme II, on FedRep): eqs. 8–13, Algorithm 3"),
    ("D.7", "PLGU-GHN (scheme II, on pFedHN): eqs. 22–26, Algorithm 4"),
    ("D.8", "Generalization results (Theorems 1–3, Lemmas 1–10)"),
    ("D.9", "Metrics, defaults, tables"),
    ("E", "Checks a toolkit can run numerically (run by `pflt verify`)"),
    ("E.A", "CGPFL checks"),
    ("E.A1", "Lower level = k-means / N; cluster means minimise it"),
    ("E.A2", "Local gradient ∇_ω G = (2/N)(ω − θ)"),
    ("E.A3", "Matrix invariants of P, J, Q"),
    ("E.A4", "Lemma 1: ‖XP‖ ≤ ‖X‖, ‖YQ‖ ≤ ‖Y‖"),
    ("E.A5", "Zero cross-term (ICLR eq. 19)"),
    ("E.A6", "Transition-matrix diagnostics over rounds"),
    ("E.A7", "Global-update identity (ICLR eq. 6)"),
    ("E.A8", "Convergence slope of Theorem 4.1"),
    ("E.A9", "Theorem 4.1 constants (sympy)"),
    ("E.A10", "Personalized gap vs λ"),
    ("E.A11", "Generalization pieces (smoothness step; monotonicity in K)"),
    ("E.A12", "e(K) heuristic recovers a planted K₀"),
    ("E.B", "pFedMe checks"),
    ("E.B1", "Envelope gradient ∇F = λ(w − θ̂(w))"),
    ("E.B2", "Proposition 1 constants"),
    ("E.B3", "Envelope sanity (F ≤ f, F ↑ f as λ → ∞)"),
    ("E.B4", "Lemma 1 (δ²) by Monte Carlo"),
    ("E.B5", "Lemma 2 diversity inequalities"),
    ("E.B6", "Algorithm reductions"),
    ("E.B7", "Strongly convex rate (Theorem 1)"),
    ("E.B8", "Non-convex rate (Theorem 2 / Corollary 2)"),
    ("E.B9", "Personalized ball (Theorems 1b/2b)"),
    ("E.C", "PPFE checks"),
    ("E.C1", "Reweighting (eq. 7)"),
    ("E.C2", "Theorem 2 (AdaBoost) chain of inequalities"),
    ("E.C3", "Lemma 8 by Monte Carlo"),
    ("E.C4", "Lemma 4 perturbation bound"),
    ("E.C5", "Lemma 5 composition"),
    ("E.C6", "Lemma 6 product cover"),
    ("E.C7", "Lemma 9 minimiser"),
    ("E.C8", "Choosing T"),
    ("E.C9", "Theorem 7 / Corollary 2 calculators"),
    ("E.C10", "Synthetic linear generator (eqs. 15–16)"),
    ("E.C11", "Low rank (Eckart–Young)"),
    ("E.D", "PLGU checks"),
    ("E.D1", "Perturbation norm ‖ε̃‖_p = ρ (1/p exponent)"),
    ("E.D2", "Layer scaling of the perturbation"),
    ("E.D3", "First-order ascent"),
    ("E.D4", "Personalization scores and top-D selection"),
    ("E.D5", "Reductions (ρ = 0, D = L)"),
    ("E.D6", "Metric invariants (lowest 5% ≤ average ≤ top 5%)"),
    ("E.D7", "Bound calculators (Theorems 1–3)"),
    ("E.D8", "Rademacher sanity (Lemma 2, depth 1)"),
    ("F", "What remains uncertain (summary)"),
)

_M = "pfl_theory.moreau."
_P = "pfl_theory.pfedme."
_C = "pfl_theory.cgpfl."
_PB = "pfl_theory.ppfe_bounds."
_PC = "pfl_theory.ppfe_covering."
_PL = "pfl_theory.plgu."

FORMULAS: tuple[Formula, ...] = (
    # ---- A. CGPFL ----------------------------------------------------------------------
    Formula("A.2", "Lower level of the bi-level objective = k-means objective / N", CGPFL,
            "eq. (2) with p_{k,j} = 1/|C_k|, q_k = |C_k|/N", "DERIVED",
            "q_k p_{k,j} = 1/N, so the lower level is (1/N) Σ_j ‖θ_j − ω_{k(j)}‖²; for a fixed "
            "partition the minimiser is the cluster mean.",
            (_C + "lower_level_objective", _C + "cluster_means")),
    Formula("A.3", "Clustering matrices P^t, J^t and the transition Q^t", CGPFL,
            "eq. (3); ICLR eq. (16)", "SEED",
            "J^t is the assignment indicator (so J^t P^t = I_K); Q^t := J^t P^{t+1} is the only "
            "candidate and is column-stochastic, but P^t Q^t = P^{t+1} holds only for "
            "coarsenings (§A.11) — used as a diagnostic, not an identity.",
            ("pfl_theory.cgpfl_matrices.assignment_matrix",
             "pfl_theory.cgpfl_matrices.indicator_matrix",
             "pfl_theory.cgpfl_matrices.transition_matrix",
             "algorithms.methods.clustered.cgpfl.assignment_matrix", "algorithms.methods.clustered.cgpfl.transition")),
    Formula("A.5", "Local generalized-model step ∇_{ω_i} G = (2/N)(ω̃_i − θ̃_i)", CGPFL,
            "Algorithm 1 step 2; ICLR appendix", "SEED",
            "The paper's scale c = 2/N is local_step='paper'; the default local_step='pfedme' "
            "uses c = λ (β = pFedMe's η), because with c = 2/N the generalized models barely move "
            "(β·2/N = 2.5·10⁻⁴ at N = 40); K = 1 reduces exactly to pFedMe when β·c = η·λ.",
            (_C + "local_model_gradient", "algorithms.methods.clustered.cgpfl.CGPFL")),
    Formula("A.5", "Global aggregation Ω^{t+1} = (1 − α)Ω^t + α Ω_{I,R} P^{t+1}", CGPFL,
            "Algorithm 1 step 4; ICLR eq. (6)", "SEED",
            "Clustering by k-means++ on the uploaded ω̃_{i,R} (best of restarts, seeded by the "
            "run seed every round); new clusters are matched to old ones (Hungarian) before "
            "the α-mixing.",
            ("pfl_theory.cgpfl_matrices.global_aggregation", "pfl_theory.kmeans.kmeans",
             "pfl_theory.kmeans.match_clusters", "pfl_theory.kmeans.align_result",
             "pfl_theory.kmeans.lloyd", "pfl_theory.kmeans.inertia", "algorithms.methods.clustered.cgpfl.project")),
    Formula("A.5", "CGPFL with a fixed assignment over a first-order oracle (Q^t = I)", CGPFL,
            "Algorithm 1 steps 2 and 4; ICLR appendix A.3 (Ω^{t+1} = Ω^t − α̂H_IP)", "DERIVED",
            "Exact personalized solutions θ̂_i = prox_{f_i/λ}; ∇G_k = mean_{i∈C_k} c(ω_k − θ̂_i) "
            "(the proof's H_IP, so that the update is a step α̂ = Rαβ on G_k at R = 1) is the "
            "gradient of G_k = (c/λ)·mean F_i (Moreau envelopes); the engine records "
            "(2K/N)Σ_{i∈C_k}(ω_k − θ̃_i), K|C_k| times larger.",
            ("pfl_theory.oracle_methods.cgpfl_local", "pfl_theory.oracle_methods.cgpfl_round",
             "pfl_theory.oracle_methods.cgpfl_context_grad",
             "pfl_theory.oracle_methods.cgpfl_context_value")),
    Formula("A.7", "Zero cross-term Σ_k [v(Q − I_K)]_k = 0", CGPFL, "ICLR eq. (19)", "SEED",
            "Holds for any row-stochastic Q.", ("pfl_theory.cgpfl_matrices.zero_cross_term",)),
    Formula("A.7", "Theorem 4.1 (convergence of the generalized models) and α̂₀", CGPFL,
            "Theorem 4.1 (IJCAI) = Theorem 1 (ICLR); ICLR appendix A.3", "SEED-GARBLED→READ",
            "√(4/3) covers only 4/3 in the second entry of α̂₀ (the form consistent with C₁, C₂); "
            "the βR factor dropped in ICLR eq. (13) is kept; ρ_Ω², ρ_g² squared; hidden "
            "O-constants 1 beyond the printed 48, 80√26, 52.",
            (_C + "theorem41_bound", _C + "alpha_hat0", _C + "theorem41_stepwise",
             _C + "beta_max", "pfl_theory.cgpfl_symbolic.theorem41_expression",
             "pfl_theory.cgpfl_symbolic.appendix_constants",
             "pfl_theory.cgpfl_symbolic.constant_identities",
             "pfl_theory.cgpfl_symbolic.alpha_hat0_entries",
             "pfl_theory.cgpfl_symbolic.stepwise_expression",
             "pfl_theory.cgpfl_symbolic.headline_rate",
             "pfl_theory.cgpfl_symbolic.rate_exponents")),
    Formula("A.8", "Theorem 4.2 (generalization) and cost(Θ, Ω; K)", CGPFL,
            "Theorem 4.2 (IJCAI) = Theorem 2 (ICLR); Definitions 2–3", "SEED",
            "ĥ*_i uses (λ/2)‖θ − ω‖² as in the proof (§A.11), IJCAI order of terms.",
            (_C + "theorem42_bound", _C + "cost", _C + "complexity_term",
             _C + "weighted_discrepancy")),
    Formula("A.9", "CGPFL-Heur: K̂ = argmin_K e(K)", CGPFL, "IJCAI eq. (11) / ICLR eq. (12)",
            "SEED",
            "K searched in 1..N/2, chosen once (round select_round) and frozen; ties go to the "
            "smallest K; μ stands in for λ + L/2.",
            (_C + "e_of_k", _C + "select_k", "algorithms.methods.clustered.cgpfl.CGPFLHeur",
             "pfl_theory.cgpfl_selection.cluster_path",
             "pfl_theory.cgpfl_selection.normalise_models")),
    Formula("A.9", "X-means BIC over the clustering path (alternative selector of K)", CGPFL,
            "not in the paper (Pelleg & Moore, ICML 2000), compared with e(K)", "DERIVED",
            "Spherical Gaussian mixture with one shared variance; scale-free, needs no μ; used "
            "only on the selection benchmark, never by CGPFL-Heur.",
            ("pfl_theory.cgpfl_selection.bic_curve",)),
    Formula("A.9", "CGPFL-Heur's μ: the band of μ giving each K̂, and the widest-band rule",
            CGPFL, "IJCAI eq. (11) / ICLR eq. (12) (\"an appropriate μ\", value unprinted)",
            "DERIVED",
            "e(K) is linear in μ, so each K̂ is chosen on an interval of μ (exact crossings); the "
            "default μ is the geometric centre of the widest interval bounded on both sides "
            "(the sharpest elbow of cost(K), read from the uploads only); the relative μ = "
            "1/cost(1) can never choose K with c(√K − 1) ≥ 1.",
            ("pfl_theory.cgpfl_selection.mu_bands", "pfl_theory.cgpfl_selection.widest_band",
             "pfl_theory.cgpfl_selection.relative_cap")),
    Formula("A.6", "Smoothness L and strong convexity μ of the client losses", CGPFL,
            "Assumption 1 (CGPFL); A1(a)/(b) (pFedMe §B.2)", "DERIVED",
            "Exact extreme Hessian eigenvalues for quadratics; for ℓ2-regularised MLR, μ = ℓ2 "
            "(infimum of the curvature) and L ≤ ℓ2 + ½ λ_max(X̃ᵀX̃/n) from diag(p) − ppᵀ ⪯ ½I.",
            ("pfl_theory.constants.quadratic_constants", "pfl_theory.constants.mlr_constants")),
    Formula("A.8", "Definitions 2–3 for bounded linear predictors with the squared loss", CGPFL,
            "IJCAI eqs. (9)–(10); the constant B of Theorem 4.2", "DERIVED",
            "λ_H exact by sign enumeration for small n (else alternating ascent: a lower "
            "estimate), in closed form for N(0, Σ); disc_H exact via the trust-region "
            "subproblem; B the smallest valid constant (loss range / λ_H).",
            ("pfl_theory.constants.disagreement_linear", "pfl_theory.constants.disagreement_gaussian",
             "pfl_theory.constants.discrepancy_linear_squared",
             "pfl_theory.constants.ball_quadratic_min",
             "pfl_theory.constants.loss_range_linear_squared", "pfl_theory.constants.smallest_b")),
    # ---- B. pFedMe ---------------------------------------------------------------------
    Formula("B.1", "Personalized model θ̂_i(w) = prox_{f_i/λ}(w) and Moreau envelope F_i", PFEDME,
            "eq. (3) and the bi-level problem of §3.1", "SEED",
            "Iterative prox for general f; closed form (A + λI)⁻¹(b + λw) for quadratics.",
            (_M + "prox", _M + "quadratic_prox", _M + "quadratic_envelope",
             "pfl_theory.oracle_methods.envelope_prox", "pfl_theory.oracle_methods.envelope_value",
             "pfl_theory.oracle_methods.envelope_grad")),
    Formula("B.1", "Per-FedAvg personalized model θ_i(w) = w − α∇f_i(w)", PFEDME,
            "eqs. (4)–(5) (Per-FedAvg, Fallah et al. 2020)", "SEED",
            "First-order and Hessian-free variants of Per-FedAvg's Algorithm 1.",
            ("algorithms.methods.regularized.perfedavg.PerFedAvg", "pfl_theory.oracle_methods.perfedavg_fo_local",
             "pfl_theory.oracle_methods.perfedavg_fo_round")),
    Formula("B.3", "Proposition 1: L_F = λ, μ_F = λμ/(λ + μ), ∇F_i(w) = λ(w − θ̂_i(w))", PFEDME,
            "Proposition 1, eq. (6)", "SEED",
            "For quadratics ∇²F = λA(A + λI)⁻¹ [DERIVED], which explains the λ > 2L condition "
            "of the non-convex case.",
            (_M + "moreau_constants", _M + "envelope_hessian_quadratic", _M + "quadratic_value")),
    Formula("B.4", "pFedMe Algorithm 1 (inner prox steps, local step, β-mixing aggregation)",
            PFEDME, "Algorithm 1, eqs. (7)–(8); public code (pFedMeOptimizer)", "CODE",
            "K inner steps on the same mini-batch with warm-started θ (the code) instead of the "
            "ν stopping rule; aggregation 'uniform' (the paper's 1/S mean, default) or "
            "'weighted' by sample counts (the code); the code's extra ℓ2 term μ·θ is code_l2 "
            "(default 0); every client trains each round (Algorithm 1, default), or with "
            "train_clients='sampled' only the S sampled ones (as PFLlib; the same global "
            "model, the other clients' models kept from their last participation).",
            ("algorithms.methods.regularized.pfedme.PFedMe", "algorithms.reference_loop",
             # the same steps over a grad/prox oracle (numpy or PEPit points; issue 24)
             "pfl_theory.oracle_methods.inexact_prox", "pfl_theory.oracle_methods.pfedme_local",
             "pfl_theory.oracle_methods.pfedme_round", "pfl_theory.oracle_methods.average",
             "pfl_theory.oracle_methods.fedavg_local",
             "pfl_theory.oracle_methods.fedavg_round")),
    Formula("B.5", "Lemma 1: δ² = 2/(λ ± ·)² (γ_f²/|D| + ν)", PFEDME, "Lemma 1",
            "SEED-GARBLED→READ", "(λ + μ)² under A1(a), (λ − L)² under A1(b) with λ > L.",
            (_P + "lemma1_delta_sq",)),
    Formula("B.5", "Lemma 2: diversity of the envelopes F_i", PFEDME, "Lemma 2(a), 2(b)",
            "SEED-GARBLED→READ",
            "In (b) the numerators are 8L² (on ‖∇F‖²) and 2λ² (on σ_f²): the only assignment "
            "with the sensible λ → ∞ limit.",
            (_P + "sigma_F1_sq", _P + "lemma2a_bound", _P + "sigma_F2_sq", _P + "lemma2b_bound",
             _P + "gradient_diversity")),
    Formula("B.2", "Gradient variance γ_f² (A2) and diversity σ_f² (A3) from samples", PFEDME,
            "Assumptions A2, A3", "SEED",
            "γ_f² at one point from per-sample gradients; σ_f² as the max over sampled points "
            "(a lower estimate of the sup).",
            ("pfl_theory.constants.gradient_variance", "pfl_theory.constants.diversity_sup")),
    Formula("B.6", "Theorem 1 (strongly convex) and Corollary 1", PFEDME,
            "Theorem 1(a), 1(b); Corollary 1", "SEED-GARBLED→READ",
            "η̂₁ = 1/(6L_F(3 + 128κ_F/β)); hidden constants 1, polylogs dropped. Corollary 1(i) "
            "is UNCERTAIN: default β = √(N/T) if N ≥ T, alternative β = √N/T (both readings "
            "derived in pfl_theory.rates).",
            (_P + "theorem1a", _P + "theorem1b", _P + "eta_hat_1", _P + "min_rounds_theorem1",
             _P + "local_step_bound", _P + "corollary1_beta", _P + "theorem1a_symbolic",
             _P + "corollary1_beta_symbolic", "pfl_theory.rates.corollary1_derivation",
             "pfl_theory.rates.headline_rate", "pfl_theory.rates.power_exponents")),
    Formula("B.6", "Theorem 2 (non-convex) and Corollary 2", PFEDME,
            "Theorem 2(a), 2(b); Corollary 2", "SEED-GARBLED→READ",
            "Third term read as Δ_F^{2/3}(Rσ² + λ²δ²)^{1/3}/(β^{4/3}R^{1/3}T^{2/3}); the exponent "
            "of R is a parameter (default 1/3) because this does not reproduce Corollary 2's "
            "(TRN)^{−2/3} exactly (UNCERTAIN).",
            (_P + "theorem2a", _P + "theorem2b", _P + "eta_hat_2", _P + "corollary2_choice",
             _P + "theorem2a_symbolic",
             "pfl_theory.rates.corollary2_derivation", "pfl_theory.rates.corollary_derivations")),
    Formula("B.7", "FedProx Synthetic(α, β) generator of the pFedMe experiments", PFEDME,
            "§5 (Li et al. FedProx generator)", "CODE",
            "Seed-compatible with the reference generator; 60 features, 10 classes, power-law "
            "client sizes.", ("synthetic.fedprox.generate", "synthetic.fedprox.federation")),
    # ---- C. PPFE -----------------------------------------------------------------------
    Formula("C.1", "Harmonic mean of client sizes 1/n̄ = (1/N) Σ_i 1/n_i and parameter count",
            PPFE, "Section 3; Lemma 8's proof", "RECONSTRUCTED",
            "The harmonic mean (produced by the proof), not the arithmetic mean of the "
            "introduction.", (_PC + "harmonic_mean_size", _PC + "fc_parameter_count")),
    Formula("C.2", "Low-rank reduction of personalized layers", PPFE, "§4.3, App. A.1",
            "SEED", "Truncated SVD W_r; r(d_l + d_{l−1}) parameters; Eckart–Young error.",
            ("pfl_theory.ppfe_lowrank.truncated_svd", "pfl_theory.ppfe_lowrank.low_rank_param_count",
             "pfl_theory.ppfe_lowrank.low_rank_reduction_factor", "algorithms.methods.ppfe.ppfe_reduction.Reduction")),
    Formula("C.3", "Sample reweighting π' ∝ π exp(β s) (eq. 7), coefficients α, ensemble (eq. 8)",
            PPFE, "eqs. (7)–(8)", "RECONSTRUCTED",
            "Per-client exponential reweighting with inverse temperature β on 0-1 misses or "
            "losses, renormalised; SAMME-style coefficients α = log((1−ε)/ε) + log(C−1); final "
            "predictor Σ_t α_t h_t.",
            ("pfl_theory.ppfe_boosting.reweight", "pfl_theory.ppfe_boosting.weighted_error",
             "pfl_theory.ppfe_boosting.uniform_weights",
             "pfl_theory.ppfe_boosting.ensemble_coefficients",
             "pfl_theory.ppfe_boosting.final_ensemble", "algorithms.methods.ppfe.ppfe_ensemble.next_weights",
             "algorithms.methods.ppfe.ppfe_ensemble.ensemble_scores")),
    Formula("C.4", "PPFE Algorithm 1 (stages personalize one more layer each)", PPFE,
            "Algorithm 1; §4.2, §4.3, §6.2.5, App. A.4", "RECONSTRUCTED",
            "Stage 0 = FedAvg; stage t personalizes the last t layers (compressed) and trains "
            "on π^{(t)}-weighted batches; rounds split across stages in proportion.",
            ("algorithms.methods.ppfe.ppfe.PPFE", "algorithms.methods.ppfe.ppfe_reduction.stage_rounds")),
    Formula("C.5.3", "Theorem 7 (generalization gap of the T-stage ensemble)", PPFE,
            "Theorem 1 (eq. 11) = Theorem 7 (eq. 24)", "RECONSTRUCTED",
            "Shared term over N·n̄, personalized term over n̄, boosting term √(T/n̄), confidence "
            "term; hidden constants 1, logs dropped, depth factor L kept.",
            (_PB + "theorem7_terms", _PB + "stage_parameter_counts")),
    Formula("C.5.4", "Corollary 2 (shrinking personalized widths w_t = w γ_w^t)", PPFE,
            "Corollary 1 (eq. 12) = Corollary 2 (eqs. 29–30)", "RECONSTRUCTED",
            "Only the dominant quadratic personalized term w² S_T(γ_w) is kept, as the paper says.",
            (_PB + "corollary2_terms", _PB + "s_t")),
    Formula("C.5.6", "Lemma 4: log N(F, ε) ≤ P log(1 + ⌈MΛ/ε⌉)", PPFE, "Lemma 4",
            "RECONSTRUCTED", "Activation bounds A_l and Lipschitz constant Λ by the recursion "
            "of the 3-stage proof (max-row-sum norms).",
            (_PC + "lemma4_log_constants", _PC + "lemma4_log_covering")),
    Formula("C.5.7", "Lemma 5: N(G∘F, ε_g + L_g ε_f) ≤ N(G, ε_g) N(F, ε_f)", PPFE, "Lemma 5",
            "RECONSTRUCTED", "Forced by the proof (eqs. 19–20).", (_PC + "lemma5_composition",)),
    Formula("C.5.8", "Lemma 6: covering number of T-stage ensembles", PPFE, "Lemma 6, eqs. (21)–(22)",
            "RECONSTRUCTED", "Product cover of radius A Σ_t ε_t + T B_h ε_α.",
            (_PC + "lemma6_cover_radius", _PC + "lemma6_log_cover_size", _PC + "lemma6_log_covering",
             _PC + "alpha_grid")),
    Formula("C.5.9", "Lemma 8 (McDiarmid, harmonic mean) and the union bound", PPFE,
            "Lemma 8; eqs. (26)–(27)", "RECONSTRUCTED",
            "|L̂ − E L̂| ≤ B √(log(2/δ)/(2Nn̄)); the union bound optimises the cover radius.",
            (_PC + "lemma8_deviation", _PC + "union_bound_deviation")),
    Formula("C.5.10", "Lemma 9: minimiser of a x + √(b log(c/x)) on (0, c]", PPFE,
            "Lemma 9, eq. (28)", "RECONSTRUCTED",
            "ERRATUM? endpoint correction: the interior critical point u₂ is the minimiser only "
            "for κ = 2ac/√b > κ† ≈ 3.134 (not already for κ > √(2e)); otherwise x* = c.",
            (_PB + "lemma9_minimize", _PB + "lemma9_asymptotic")),
    Formula("C.5.11", "Theorem 2: AdaBoost training error ≤ Π 2√(ε(1−ε)) ≤ exp(−2γ²T)", PPFE,
            "Theorem 2, eq. (14) (Mohri et al. 2018, Thm 6.1)", "RECONSTRUCTED",
            "Weighted error under the current sample distribution (not the true error).",
            (_PB + "boosting_bias_bound", _PB + "adaboost_bound_chain",
             "pfl_theory.ppfe_boosting.adaboost_stumps", "pfl_theory.ppfe_boosting.fit_stumps")),
    Formula("C.5.12", "Bias–variance choice of T: argmin e^{−2γ²T} + κ₀√(T/n)", PPFE,
            "§5 'Bias–Variance Tradeoff'", "DERIVED",
            "Derived from Corollary 2 + Theorem 2; the Lemma-9 family with ac = 1; interior "
            "optimum iff 2/√b' > κ†.  γ from stage errors: min_t ½ − ε_t (eq. 13); for C classes "
            "the SAMME edge (1 − 1/C − ε_t)·C/(2(C − 1)) [toolkit normalisation].",
            (_PB + "select_stages", _PB + "kappa0_from_ingredients", _PB + "stage_edge")),
    Formula("C.6", "Linear generator w_i = (1 − α) w_g + α w_{l,i}, y = ⟨w_i, x⟩ + ε", PPFE,
            "eqs. (15)–(16), §6.1", "RECONSTRUCTED",
            "Convex combination forced by the prose (α = 0 identical, α = 1 independent; "
            "mixing='convex', default); mixing='variance_preserving' uses √(1−α), √α so the "
            "marginal law of w_i does not depend on α (a Local curve flat in α, Fig. 3b). "
            "d, n, σ_ε², Σ_i, s_i are toolkit defaults (d = 50, n = 40, σ² = 0.25), NOT the "
            "paper's; ridge at every stage.",
            ("synthetic.linear.make_linear_federation", "synthetic.linear.ridge",
             "synthetic.linear.population_mse", "algorithms.methods.ppfe.ppfe_linear.fit_ppfe_linear",
             "algorithms.methods.ppfe.ppfe_linear.fit_local_ridge", "algorithms.methods.ppfe.ppfe_linear.fit_fedavg_ridge")),
    # ---- D. PLGU -----------------------------------------------------------------------
    Formula("D.2", "SAM / LWSAM perturbation ε̃ = ρ sign(g) Λ |g|^{q−1} / (‖g‖_q^q)^{1/p}", PLGU,
            "eqs. (3)–(5)", "ERRATUM?",
            "The paper prints the exponent p − 1; only 1/p gives ‖ε̃‖_p = ρ and reduces to eq. (3) "
            "at p = 2 (exponent='corrected', default; 'printed' reproduces the misprint).",
            ("algorithms.methods.sam.sam.perturbation", "algorithms.methods.sam.sam.sam_gradient", "algorithms.methods.sam.sam.sam_step")),
    Formula("D.3", "Local PLGU routine (plain step on θ̃, SAM step on the global copy w̃)", PLGU,
            "Algorithm 1", "SEED",
            "Step 4 read as the SAM gradient of the global copy at w̃ + ε̃, ε̃ from the gradient at w̃.",
            ("algorithms.methods.sam.plgu_lf.plgu_local",)),
    Formula("D.4", "Personalization score ξ_{i,l} = ‖θ̃_{i,l} − w̃_l‖ / dim(w̃_l)", PLGU,
            "eqs. (6), (10)", "ERRATUM?",
            "The text claims Σ_l ξ_{i,l} = 1, which the formula does not give: scores are "
            "normalised explicitly; top-D ties broken deterministically.",
            ("algorithms.methods.sam.plgu_scores.personalization_scores", "algorithms.methods.sam.plgu_scores.top_layers")),
    Formula("D.5", "PLGU-LF (scheme I) and FedSAM", PLGU, "Algorithm 2, eq. (7)", "SEED",
            "Server update w̃ ← w̃ + mean Δ (the copy prints w̃^{t+1} on both sides).",
            ("algorithms.methods.sam.plgu_lf.PLGULF", "algorithms.methods.sam.plgu_lf.FedSAM")),
    Formula("D.6", "PLGU-GRep (scheme II on FedRep)", PLGU, "eqs. (8)–(13), Algorithm 3",
            "ERRATUM?", "eq. (13) read as φ̃ = φ − η g̃ (the printed g is the unperturbed gradient).",
            ("algorithms.methods.sam.plgu_grep.PLGUGRep",)),
    Formula("D.7", "PLGU-GHN (scheme II on pFedHN)", PLGU, "eqs. (22)–(26), Algorithm 4", "SEED",
            "The chain-rule product with Δw is used as a descent direction, as printed.",
            ("algorithms.methods.sam.pfedhn.PLGUGHN", "algorithms.methods.sam.pfedhn.PFedHN", "algorithms.methods.sam.pfedhn.hn_vjp")),
    Formula("D.8", "Theorems 1–3 and Lemmas 2–4 (generalization bounds)", PLGU,
            "Theorems 1–3; Lemmas 1–10 (appendix)", "SEED",
            "Last term 2√(log(1/γ)/m) (appendix; the main text's √(m log(1/γ)) is a typo); "
            "Lemma 4 as displayed (‖x‖ on the universal block, ‖x‖ + ρ on the personalized one, "
            "swapped w.r.t. its O-form); Theorem 1's term 4 follows the O-form; log D, "
            "log(L − D) clipped to log max(·, 2); Theorem 2 from the appendix (main text truncated).",
            (_PL + "theorem1_plgu_lf", _PL + "theorem2_plgu_grep", _PL + "theorem3_plgu_ghn",
             _PL + "lemma2_margin_complexity", _PL + "lemma3_adversarial_complexity",
             _PL + "lemma4_personalized_complexity", _PL + "lp_factor", _PL + "clipped_log",
             _PL + "linear_rademacher_bound", _PL + "empirical_rademacher_linear")),
    Formula("D.9", "Average, lowest-5% and top-5% client accuracy", PLGU, "Tables 1–4", "SEED",
            "The paper does not define the 5% tails: mean over the ⌈0.05 N⌉ worst / best clients.",
            ("algorithms.engine.evaluation.summarize", "algorithms.engine.evaluation.tail_size")),
)


def section_ids() -> list[str]:
    """Every section id of the reference, in document order."""
    return [sid for sid, _ in SECTIONS]


def formulas_in(section: str) -> list[Formula]:
    """The formulas filed under ``section`` (exact id)."""
    return [f for f in FORMULAS if f.section == section]


def _is_check_item(section: str) -> bool:
    """``E.A1``, ``E.C10``, … (numbered checks, rendered as list items)."""
    return section.startswith("E.") and any(ch.isdigit() for ch in section)


def _render_formula(f: Formula) -> list[str]:
    impl = ", ".join(f"`{name}`" for name in f.implementations)
    return [f"* **{f.name}** — {f.paper}, {f.equation} [{f.provenance}]",
            f"  * reading: {f.reading}",
            f"  * implemented by: {impl}"]


def _anchor(section: str) -> str:
    return "s-" + section.replace(".", "-").lower()


def render_markdown() -> str:
    """The formula reference ``docs/formulas.md`` (deterministic: same registry, same text)."""
    lines = ["# Formula reference",
             "",
             "Generated from `pfl_theory/formulas.py` by `pflt formulas --write`; do not edit by "
             "hand (a test regenerates it and compares). Each section id (`§A.5`, `§C.5.10`, …) "
             "is the one source files cite as `docs/formulas.md §X.Y`.",
             "",
             "For every implemented formula: the paper and equation, its provenance, the reading "
             "chosen where the paper is ambiguous or in error, and the functions implementing it.",
             "",
             "Provenance labels:",
             ""]
    lines += [f"* **{k}** — {v}" for k, v in PROVENANCE.items()]
    lines.append("")
    for sid, title in SECTIONS:
        if _is_check_item(sid):
            lines.append(f'* <a id="{_anchor(sid)}"></a>**§{sid}** {title}')
            continue
        hashes = "#" * min(sid.count(".") + 2, 4)
        if lines[-1] != "":
            lines.append("")
        lines += [f'{hashes} <a id="{_anchor(sid)}"></a>§{sid} {title}', ""]
        for f in formulas_in(sid):
            lines += _render_formula(f)
        if not formulas_in(sid) and "." in sid and not sid.startswith("E."):
            lines.append("Setting, assumptions or experimental facts of the paper; no formula "
                         "of this section is implemented on its own.")
        if sid == "F":
            lines += ["Implemented formulas that are not plainly legible in the papers:", ""]
            lines += [f"* §{f.section} {f.name} [{f.provenance}]" for f in FORMULAS
                      if f.provenance not in ("SEED", "CODE", "DERIVED")
                      or "UNCERTAIN" in f.reading or "ERRATUM" in f.reading]
        if lines[-1] != "":
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"
