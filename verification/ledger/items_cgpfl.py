"""CGPFL (Tang, Guo, Guo, IJCAI 2022; the ICLR 2022 submission with the appendix): its items
in the IJCAI text's order, ICLR-only items where the appendix places them.  IJCAI eqs.
(6)–(11) = ICLR (7)–(12); Theorem 4.1/4.2 (IJCAI) = Theorem 1/2 (ICLR).

Rows: ``(label, section, kind T/A/E, statement, evidence[, missing[, text]])`` — see
:mod:`verification.ledger.item`.
"""

from __future__ import annotations

from verification.ledger.item import table

_THM41 = ("c:cgpfl.bound_thm41_final c:cgpfl.convergence_rate_T c:cgpfl.shape_thm41_T "
          "c:cgpfl.transcription_theorem41 c:cgpfl.worst_case_thm41_fixed "
          "c:cgpfl.worst_case_thm41_printed_G f:A.7 fig:cgpfl_convergence fig:worst_case")
_HEUR = ("c:cgpfl.transcription_select_k c:cgpfl.select_k_planted c:cgpfl.heur_khat_planted "
         "c:cgpfl.khat_validation_planted f:A.9 fig:cgpfl_select_k fig:selection")
_NO_TEXT = "only in the ICLR text"

ITEMS = table("cgpfl", (
    ("§1 premise", "§1, §3", "E", "clients fall into K contexts (clusters) whose members share a "
     "generalized model; the toolkit's planted-context generators", "c:synthetic.contexts_planted_moments"),
    ("eq. (1)", "§3", "T", "conventional FL: min_ω G(f_1(ω), …, f_N(ω)), FedAvg's G = Σ (m_i/m) f_i",
     "f:A.1", "a definition: no check states it apart"),
    ("eq. (2)", "§3", "T", "bi-level objective: personalized θ_i regularised towards the context "
     "model ω_k; lower level = k-means objective / N", "c:cgpfl.lower_level_kmeans "
     "c:cgpfl.transcription_lower_level f:A.2"),
    ("K = 1 reduction", "§3", "T", "with one context the problem (and Algorithm 1) is pFedMe's",
     "c:cgpfl.k1_equals_pfedme f:A.2"),
    ("eq. (3)", "§4.1", "T", "clustering matrices: P^t column-stochastic, P^{t+1} = P^t Q^t with "
     "Q^t doubly stochastic, J^t P^t = I", "c:cgpfl.matrix_invariants f:A.3"),
    ("eq. (4)", "§4.1", "A", "update chain Ω_{I,R} →P Ω_K →J Ω_{I,0} →H Ω_{I,R} →P Ω_K",
     "c:cgpfl.matrix_invariants c:cgpfl.engine_equals_oracle_form f:A.5"),
    ("eq. (5)", "§4.1", "A", "matrix form of the local updates Ω_{I,R} = Ω_{I,0} − βR H_I",
     "c:cgpfl.engine_equals_oracle_form f:A.5"),
    ("ICLR eq. (6)", "§4.1", "T", "global update Ω^{t+1} = Ω^t[(1 − α)I + αQ^t] − αβR H_I P^t Q^t "
     "(= ICLR eq. 13)", "c:cgpfl.global_update_identity f:A.5", "", "ICLR"),
    ("Algorithm 1", "§4.1", "A", "CGPFL: S prox steps per local round, local generalized step, "
     "k-means on the uploads, α-mixing of the context models", "c:cgpfl.engine_equals_oracle "
     "c:cgpfl.engine_equals_oracle_form f:A.5 t:tests/algorithms/test_cgpfl.py"),
    ("Algorithm 1, step 2", "§4.1", "A", "local generalized-model step with ∇_ω G = "
     "(2/N)(ω̃ − θ̃)", "c:cgpfl.local_gradient f:A.5"),
    ("Algorithm 1, step 4", "§4.1", "A", "global aggregation Ω^{t+1} = (1 − α)Ω^t + α Ω_{I,R} "
     "P^{t+1}; α = 1 gives the cluster means", "c:cgpfl.alpha1_cluster_means f:A.5"),
    ("Definition 1", "§4.2", "T", "L-smooth: ‖∇f(ω) − ∇f(ω′)‖ ≤ L‖ω − ω′‖", "f:A.6",
     "a definition: no check states it apart"),
    ("Assumption 1", "§4.2", "T", "each f_i is L-smooth and each G(ω_k) is L_G-smooth", "f:A.6",
     "an assumption: L, L_G are computed for the checks' problems, not tested"),
    ("Assumption 2", "§4.2", "T", "bounded intra-context diversity of ∇G_{k,i} (IJCAI eq. 6), δ_G²",
     "f:A.6", "an assumption: δ_G² enters Theorem 4.1(b) only through its check"),
    ("Assumption 3", "§4.2", "T", "bounded parameters and gradients ‖Ω^t‖² ≤ ρ_Ω², "
     "‖∇G_K(Ω^t)‖² ≤ ρ_g² (IJCAI eq. 7)", "f:A.6",
     "an assumption: ρ_Ω, ρ_g are measured along the runs of the bound checks, not tested"),
    ("Proposition 1", "§4.2", "T", "from pFedMe (IJCAI eq. 8): E‖Θ̃ − Θ̂‖² ≤ Nδ²",
     "c:pfedme.lemma1_delta f:A.6",
     "checked as pFedMe's Lemma 1 (per client), not in CGPFL's matrix form"),
    ("ICLR Proposition 1", "App. A", "T", "Jensen: ‖Σ_{i≤M} x_i‖² ≤ M Σ ‖x_i‖² and its weighted "
     "form", "", "a textbook inequality used inside the proofs; not checked apart", "ICLR"),
    ("Lemma 1", "App. A.2", "T", "non-expansion ‖XP^{t+1}‖ ≤ ‖X‖, ‖YQ^t‖ ≤ ‖Y‖",
     "c:cgpfl.lemma1_nonexpansion f:A.4", "", "ICLR"),
    ("Lemma 2", "App. A.3", "T", "the transition matrices tend to the identity (Q^t → I_K) and "
     "the B_1, B_2 terms are O(ρ²/T)", "c:cgpfl.q_to_identity f:A.7", "", "ICLR"),
    ("ICLR eq. (19)", "App. A.3", "T", "zero cross-term Σ_k [G_I P^t (Q^t − I)]_k = 0",
     "c:cgpfl.zero_cross_term f:A.7", "", "ICLR"),
    ("one-round descent", "App. A.3", "T", "pre-optimisation inequality before the step-size "
     "cases (constants 2, 3/2, 208, 13)", "c:cgpfl.bound_thm41_stepwise "
     "c:cgpfl.worst_case_thm41_fixed f:A.7", "", "ICLR"),
    ("Theorem 4.1 conditions", "§4.2", "T", "β ≤ 1/(2√(R(R+1)) L_G) and the step-size constant "
     "α̂₀", "c:cgpfl.transcription_theorem41 c:cgpfl.theorem41_constants f:A.7"),
    ("Theorem 4.1(a)", "§4.2", "T", "generalized models: E[(1/K)‖∇G_K(Ω^{t*})‖²] ≤ "
     "O(48α²ρ_Ω²/(Kα̂₀²T) + 80(…)^{1/2}/√(NKRT) + 52δ²/(KN))", _THM41),
    ("Theorem 4.1(b)", "§4.2", "T", "personalized models: (1/N) Σ E‖θ̃_i − ω_{k(i)}‖² ≤ "
     "O(∇G term) + O(δ_G²/λ² + δ²)", "c:cgpfl.bound_thm41b_personal c:cgpfl.personal_gap_lambda "
     "f:A.7"),
    ("Remark 4.1", "§4.2", "T", "rate O(1/√(KNRT)): √K faster than O(1/√(NRT)) analyses",
     "c:cgpfl.transcription_headline_rate c:cgpfl.convergence_rate_T fig:cgpfl_convergence",
     "only the dependence on T is a check; K, N, R are drawn by the figure, not judged"),
    ("Definition 2", "§4.3", "T", "complexity λ_H(D) = sup_{h1,h2} (1/|D|) Σ |h1(x) − h2(x)| "
     "(IJCAI eq. 9)", "c:cgpfl.transcription_theorem42 f:A.8"),
    ("Definition 3", "§4.3", "T", "label-discrepancy disc_H(D1, D2) = sup_h |L_D1(h) − L_D2(h)| "
     "(IJCAI eq. 10)", "c:cgpfl.transcription_theorem42 f:A.8"),
    ("Theorem 4.2", "§4.3", "T", "generalization: weighted excess risk ≤ 2√(log(N/δ)/m) + "
     "√(dK log(em/d)/m) + (λ + L/2)·cost(Θ*, Ω*; K) + Σ (m_i/m)(2Bλ_H + disc)",
     "c:cgpfl.bound_thm42_gap c:cgpfl.shape_thm42_m c:cgpfl.transcription_theorem42 f:A.8 "
     "fig:bound_tightness"),
    ("ICLR eqs. (27)–(28)", "App. B", "T", "smoothness step of the proof: L(ω) − L(θ*) ≤ "
     "(λ + L/2)‖θ* − ω‖² at the exact prox solution", "c:cgpfl.smoothness_step f:A.8", "",
     "ICLR"),
    ("Remark 4.2", "§4.3", "T", "K trades the √(dK) complexity term against the cost term; "
     "K = 1 recovers single-global-model bounds", "fig:cgpfl_accuracy_vs_k",
     "the monotonicity of cost(K) in K is drawn, not a registered check"),
    ("eq. (11)", "§4.4", "T", "CGPFL-Heur: K̂ = argmin_K e(K) = √(dK log(em/d)/m) + μ·cost(K), "
     "K ≤ N/2 (ICLR eq. 12)", _HEUR),
    ("CGPFL-Heur", "§4.4", "A", "K̂ chosen on the server in the first round, then frozen",
     "c:cgpfl-heur.engine_equals_oracle f:A.9"),
    ("§5.1 setting", "§5.1", "E", "N = 40, 3 (IJCAI) / 2 (ICLR) of 10 classes per client, sizes "
     "uniform in [400, 5000], 75/25 split", "t:tests/synthetic/real_data/test_paper_partitions.py "
     "f:A.10", "covered by tests of the partition, no registered check"),
    ("Table 1 (FMNIST)", "§5.2", "E", "test accuracy on Fashion-MNIST (MLR, DNN): CGPFL and "
     "CGPFL-Heur above every baseline", "r:cgpfl_table1_fmnist r:cgpfl_table1_fmnist_lr_grid r:cgpfl_table1_fmnist_tune "
     "c:cgpfl.table1_fmnist_ordering"),
    ("Table 1 (MNIST)", "§5.2", "E", "test accuracy on MNIST (MLR, DNN): CGPFL-Heur 97.41 / "
     "98.03", "r:cgpfl_table1_mnist"),
    ("Table 1 (CIFAR-10)", "§5.2", "E", "test accuracy on CIFAR-10 (CNN): CGPFL-Heur 74.75",
     "r:cgpfl_table1_cifar10"),
    ("Fig. 1", "§5.2", "E", "accuracy and loss against the round on MNIST for K ∈ {1, 2, 4, 8} "
     "and the baselines", "fig:cgpfl_convergence",
     "no entry on MNIST (not on this machine); the figure script draws the analogue on "
     "planted label-skew data"),
    ("Fig. 2", "§5.2", "E", "accuracy and loss against the round on Fashion-MNIST for "
     "different K and the baselines", "r:cgpfl_fig2_fmnist fig:cgpfl_fig2_fmnist"),
    ("Fig. 3(a)", "§5.3", "E", "accuracy of CGPFL for K = 1 … N/2 with CGPFL-Heur's K̂ marked "
     "(MNIST, FMNIST)", "fig:cgpfl_accuracy_vs_k",
     "the analogue on planted data; no entry on MNIST / FMNIST"),
    ("Fig. 3(b)", "§5.3", "E", "CGPFL-Heur against CGPFL at its best K and pFedMe", "",
     "no entry: the bars are not a reproduction entry (Table 1 holds the three methods)"),
    ("Table 2", "§5.4", "E", "λ sweep (λ = 7 … 19) of pFedMe, CGPFL (K = 2, 4), CGPFL-Heur on "
     "MNIST and FMNIST: CGPFL above pFedMe at every λ", "r:cgpfl_table2_lambda", "", "ICLR"),
    ("Fig. 4", "App. C.1", "E", "the clients' cluster assignments settle as training proceeds",
     "c:cgpfl.q_to_identity", "the figure is not drawn; Q^t → I is checked numerically", "ICLR"),
    ("Fig. 5(a)", "App. C.1", "E", "the average distance among the uploaded models converges",
     "", "no entry: the distances are not logged by a figure script", "ICLR"),
    ("Fig. 5(b)", "App. C.1", "E", "k-means on the server converges in a few iterations after "
     "the first rounds", "", "no entry: the k-means iteration counts are not recorded", "ICLR"),
))
