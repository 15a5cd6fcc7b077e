"""PPFE (Emrani, Najafi, Motahari, arXiv 2602.14244): its items in the paper's order, with
evidence.  Most displayed equations are lost in the text copy; the formula registry's
readings (docs/formulas.md §C) say which are reconstructed.

Rows: ``(label, section, kind T/A/E, statement, evidence[, missing])`` — see
:mod:`verification.ledger.item`.
"""

from __future__ import annotations

from verification.ledger.item import table

_THM7 = ("c:ppfe.transcription_theorem7 c:ppfe.bound_theorem7_calculator "
         "c:ppfe.bound_theorem7_union c:ppfe.shape_theorem7_n c:ppfe.shape_theorem7_union_n "
         "f:C.5.3 fig:ppfe_nn fig:bound_tightness")
_COR2 = ("c:ppfe.transcription_corollary2 c:ppfe.bound_corollary2_clients "
         "c:ppfe.shape_corollary2_N f:C.5.4")
_ABLATION = ("the Sent140 column has no entry (no Sent140 loader); the CIFAR/EMNIST "
             "columns are one command away (data not on this machine), the transfer on "
             "Fashion-MNIST tests the claim, the synthetic ordering check runs PPFE's stages "
             "against fixed heads on a small federation")
_ABL = "r:ppfe_ablations_transfer_fmnist c:ppfe.stage_accuracy_improves"

ITEMS = table("ppfe", (
    ("eq. (1)", "§1.1", "T", "abstract bound: gap ≲ Σ_t C(G_t)/(N n̄) + Σ_t C(P_t)/n̄ + "
     "boosting term (= eq. 10)", "f:C.5.2", "the capacity form is instantiated by Theorem 7; "
     "not checked apart"),
    ("eq. (2)", "§3", "T", "weighted empirical loss L̂_i(h; π) = Σ_j π_j ℓ(h(x_j), y_j), π on "
     "the simplex", "c:ppfe.reweighting f:C.1"),
    ("eq. (3)", "§4", "T", "FedAvg objective min_θ (1/N) Σ L̂_i(h_θ)", "f:C.2",
     "a definition: no check states it apart"),
    ("eq. (4)", "§4", "T", "decoupled PFL: shared representation f_φ, client heads g_ψi, "
     "min (1/N) Σ L̂_i(g_ψi ∘ f_φ)", "c:fedrep.engine_equals_oracle f:C.2"),
    ("eq. (5)", "§4.1", "A", "stage 0: FedAvg on the whole network, uniform weights",
     "c:ppfe.engine_equals_oracle f:C.2"),
    ("eq. (6)", "§4.1", "A", "stage t: the last t layers personalized under a complexity "
     "constraint, weighted ERM", "c:ppfe.engine_equals_oracle f:C.2"),
    ("§4.1 low rank", "§4.1, App. A.1", "A", "SVD truncation of the personalized layers: "
     "W_r = U_r Σ_r V_rᵀ with Frobenius error Σ_{k>r} σ_k²", "c:ppfe.low_rank f:C.2"),
    ("eq. (7)", "§4.2", "A", "AdaBoost-like reweighting π' ∝ π exp(β s) with an inverse "
     "temperature, renormalised", "c:ppfe.reweighting f:C.3"),
    ("eq. (8)", "§4.2", "A", "final ensemble H_i = Σ_t α_i^(t) g_ψi^(t) ∘ f_φ^(t)",
     "c:ppfe.engine_equals_oracle f:C.3"),
    ("Algorithm 1", "§4.2", "A", "PPFE: stages personalize one more layer each, boosting "
     "weights carried between stages", "c:ppfe.engine_equals_oracle f:C.4 "
     "t:tests/algorithms/test_ppfe.py"),
    ("§4.3 complexity", "§4.3", "E", "same rounds as the baselines, fewer parameters "
     "communicated per stage, up to T forward passes at test time", "fig:ppfe_nn",
     "the communication curve is drawn, not judged by a check"),
    ("eq. (9)", "§5", "T", "generalization gap Δ = min L̂ − min L (= eq. 23), |Δ| ≤ sup |L̂ − L|",
     "c:ppfe.bound_theorem7_union f:C.5.1"),
    ("n̄ (harmonic mean)", "§5", "T", "1/n̄ = (1/N) Σ 1/n_i, N n̄ the effective sample size",
     "c:ppfe.transcription_lemma8 f:C.1"),
    ("Theorem 1", "§5.1", "T", "informal main result (eq. 11): shared terms over N n̄, "
     "personalized over n̄, √(T/n̄), confidence — see Theorem 7", _THM7),
    ("Corollary 1", "§5.1", "T", "informal (eq. 12): shrinking personalized widths w_t = w γ_w^t "
     "keep the personalized term bounded in T — see Corollary 2", _COR2),
    ("Remark 1", "§5.1", "T", "width shrinkage and low-rank decomposition give comparable "
     "bounds", "f:C.5.4", "a remark: the low-rank variant's bound is not computed"),
    ("Remark 2", "§5.1", "T", "the bounds are non-vacuous for DNNs",
     "c:ppfe.bound_theorem7_calculator c:ppfe.bound_corollary2_clients"),
    ("Remark 3", "§5.1", "T", "with one personalized stage the analysis covers FedRep",
     "c:ppfe.one_stage_equals_fedrep"),
    ("eq. (13)", "§5.2", "T", "weak-learning edge γ = min_t (½ − ε_t) (SAMME form for C > 2)",
     "c:ppfe.transcription_stage_edge f:C.5.11"),
    ("Theorem 2", "§5.2", "T", "AdaBoost training error ≤ Π 2√(ε_t(1 − ε_t)) ≤ e^{−2γ²T} "
     "(eq. 14)", "c:ppfe.adaboost_chain c:ppfe.transcription_adaboost_chain f:C.5.11"),
    ("§5 bias–variance", "§5.2", "T", "choose T by argmin e^{−2γ²T} + κ₀√(T/n)",
     "c:ppfe.select_stages c:ppfe.select_stages_benchmark c:ppfe.transcription_select_stages "
     "c:ppfe.transcription_kappa0 f:C.5.12 fig:ppfe_linear fig:selection"),
    ("eq. (15)", "§6.1", "E", "synthetic regression y = ⟨w_i, x⟩ + ε", "c:synthetic.ppfe_linear_moments "
     "f:C.6"),
    ("eq. (16)", "§6.1", "E", "client models w_i = (1 − α) w_g + α w_l,i",
     "c:ppfe.generator_diversity c:synthetic.ppfe_linear_moments f:C.6"),
    ("Fig. 1", "§4.1", "A", "diagram of progressive personalization", "",
     "a diagram of the method: nothing to measure"),
    ("Fig. 2", "§4.2", "A", "diagram of PPFE's stages and reweighting", "",
     "a diagram of the method: nothing to measure"),
    ("Fig. 3(a)", "§6.1", "E", "test MSE against the number of clients N: PPFE lowest, Local "
     "and FedAvg worse", "c:ppfe.fig3_ppfe_best fig:ppfe_linear"),
    ("Fig. 3(b)", "§6.1", "E", "test MSE against α: FedAvg degrades, PPFE stays low, Local "
     "flat", "c:ppfe.fig3_local_flat_in_alpha c:ppfe.fig3_ppfe_best fig:ppfe_linear"),
    ("§6.2 setting", "§6.2", "E", "100 clients, S classes each, 150 (CIFAR-10) / 400 "
     "(CIFAR-100) samples per client, T = 4 stages, 160 rounds",
     "t:tests/synthetic/real_data/test_paper_partitions.py f:C.7",
     "covered by tests of the partition, no registered check"),
    ("Table 1", "§6.2.6", "E", "accuracy on CIFAR-10/100, EMNIST, Sent140 against 8 baselines: "
     "PPFE best in 5 of 6 columns", "r:ppfe_table1 r:ppfe_table1_transfer_fmnist "
     "c:transfer_fmnist.ppfe_above_fedavg c:transfer_fmnist.ppfe_above_personalized",
     "the Sent140 column has no entry (no Sent140 loader, issue 42 item 5)"),
    ("Fig. 4(a)", "§6.2.7", "E", "accuracy against local data size 100 → 500 on CIFAR-100", "",
     "no entry: CIFAR-100 not on this machine and the sweep's S is unrecovered"),
    ("Fig. 4(b)", "§6.2.7", "E", "accuracy against the number of classes per client", "",
     "no entry: the S values of the sweep are unrecovered"),
    ("Table 2", "§6.2.8", "E", "CIFAR-10 Dirichlet(1.0, 0.3) partitions: PPFE best in both",
     "r:ppfe_table2_dirichlet"),
    ("Table 3", "§6.3.1", "E", "model reduction on/off: with MR better in every column",
     _ABL + " r:ppfe_table3_reduction c:transfer_fmnist.ppfe_table3_reduction", _ABLATION),
    ("Table 4", "§6.3.2", "E", "fixed heads M1–M3 against PPFE: deeper fixed heads degrade",
     _ABL + " r:ppfe_table4_fixed_heads c:transfer_fmnist.ppfe_table4_fixed_heads", _ABLATION),
    ("Table 5", "§6.3.3", "E", "no progression (WP) / no reweighting (WPW) against PPFE",
     _ABL + " r:ppfe_table5_progression c:transfer_fmnist.ppfe_table5_progression",
     _ABLATION),
    ("Table 6", "App. B", "E", "SVD against structured sparsification: comparable",
     "r:ppfe_table6_sparse r:ppfe_ablations_transfer_fmnist "
     "c:transfer_fmnist.ppfe_table6_sparse", "the Sent140 column has no entry (no Sent140 "
     "loader); the transfer on Fashion-MNIST tests the claim"),
    ("Definition 1", "App. C.1", "T", "ε-cover and covering number N(F, ε)", "f:C.5.5",
     "a definition: no check states it apart"),
    ("Lemma 3", "App. C.1", "T", "uniform convergence through covers (from Mohri et al.)",
     "f:C.5.5", "a cited standard result; used through Lemma 8 and eqs. (26)–(27)"),
    ("Lemma 4", "App. C.2", "T", "covering number of fully-connected DNNs: "
     "log N(F, ε) ≤ P log(1 + ⌈MΛ/ε⌉), |f − f'| ≤ Λη", "c:ppfe.lemma4_perturbation "
     "c:ppfe.bound_lemma4_covering c:ppfe.bound_lemma4_perturbation c:ppfe.transcription_lemma4 "
     "f:C.5.6"),
    ("Lemma 5", "App. C.2", "T", "compositional cover N(G∘F, ε_g + L_g ε_f) ≤ N(G, ε_g) N(F, ε_f)",
     "c:ppfe.lemma5_composition c:ppfe.transcription_lemma5 f:C.5.7"),
    ("Lemma 6", "App. C.2", "T", "covering number of T-stage ensembles (eqs. 21–22)",
     "c:ppfe.lemma6_product_cover c:ppfe.bound_lemma6_perturbation c:ppfe.transcription_lemma6 "
     "c:ppfe.transcription_lemma6_allocation f:C.5.8"),
    ("Theorem 7", "App. C.3", "T", "formal generalization bound of Algorithm 1 (eq. 24)", _THM7),
    ("eqs. (26)–(27)", "App. C.3", "T", "union bound: excess ≤ inf_ε 2L_ℓ ε + "
     "B√((log N(ε) + log(2/δ))/(2N n̄))", "c:ppfe.transcription_union_bound "
     "c:ppfe.bound_theorem7_union f:C.5.9"),
    ("Lemma 8", "App. C.3", "T", "pointwise concentration |L̂ − E L̂| ≤ B√(log(2/δ)/(2N n̄))",
     "c:ppfe.lemma8_mcdiarmid c:ppfe.bound_lemma8_quantile c:ppfe.bound_lemma8_envelope "
     "c:ppfe.transcription_lemma8 f:C.5.9"),
    ("Lemma 9", "App. C.3", "T", "minimiser of a x + √(b log(c/x)) on (0, c] (eq. 28)",
     "c:ppfe.lemma9_minimiser c:ppfe.transcription_lemma9 c:ppfe.transcription_lemma9_asymptotic "
     "f:C.5.10"),
    ("Corollary 2", "App. C.3", "T", "formal (eqs. 29–30): widths w γ_w^t, S_T(γ_w) = "
     "Σ t γ_w^{2t}", _COR2),
))
