"""pFedMe (Dinh, Tran, Nguyen, NeurIPS 2020): its items in the paper's order, with evidence.

Rows: ``(label, section, kind T/A/E, statement, evidence[, missing])`` — see
:mod:`verification.ledger.item`.
"""

from __future__ import annotations

from verification.ledger.item import table

_THM1 = ("c:pfedme.bound_thm1_mlr c:pfedme.bound_thm1_quadratic c:pfedme.bound_thm1_floor "
         "c:pfedme.bound_thm1_sampling c:pfedme.strongly_convex_linear_rate "
         "c:pfedme.transcription_theorem1 c:pfedme.transcription_step_sizes "
         "c:pfedme.worst_case_thm1_exact c:pfedme.worst_case_thm1_inexact "
         "c:pfedme.worst_case_thm1_noise_sampling f:B.6 fig:pfedme_rates fig:worst_case")
_THM2 = ("c:pfedme.bound_thm2_nonconvex c:pfedme.nonconvex_rate_T c:pfedme.transcription_theorem2 "
         "c:pfedme.worst_case_thm2 c:pfedme.worst_case_thm2_heterogeneous "
         "c:pfedme.worst_case_thm2_noise f:B.6 fig:worst_case")
_COR = ("c:pfedme.transcription_corollaries c:pfedme.transcription_corollary_rates "
        "c:pfedme.transcription_headline_rates c:pfedme.transcription_power_exponents")

ITEMS = table("pfedme", (
    ("eq. (1)", "§3.1", "T", "conventional FL: min_w f(w) := (1/N) Σ_i f_i(w), f_i the expected "
     "loss of client i", "f:B.1", "a definition: no check states it apart"),
    ("eq. (2)", "§3.1", "T", "regularised client loss f_i(θ_i) + (λ/2)‖θ_i − w‖²",
     "c:pfedme.envelope_sanity f:B.1"),
    ("pFedMe problem", "§3.1", "T", "bi-level problem min_w F(w) = (1/N) Σ F_i(w), F_i the Moreau "
     "envelope min_θ {f_i(θ) + (λ/2)‖θ − w‖²}", "c:pfedme.envelope_sanity "
     "c:pfedme.envelope_gradient f:B.1"),
    ("eq. (3)", "§3.1", "T", "personalized model θ̂_i(w) = prox_{f_i/λ}(w), the inner problem's "
     "unique solution", "c:pfedme.envelope_gradient c:pfedme.reduction_gd_on_envelope f:B.1"),
    ("eq. (4)", "§3.1", "T", "Per-FedAvg's problem: min_w (1/N) Σ f_i(w − α∇f_i(w))",
     "c:perfedavg.engine_equals_oracle_form c:perfedavg.engine_equals_oracle f:B.1"),
    ("eq. (5)", "§3.1", "T", "Per-FedAvg's step is the minimiser of a first-order model "
     "⟨∇f_i(w), θ − w⟩ + ‖θ − w‖²/(2α)", "f:B.1",
     "the rewriting (5) is not checked apart (the step itself is, eq. (4))"),
    ("Assumption 1(a)", "§3.1", "T", "f_i is μ-strongly convex", "f:A.6",
     "an assumption: μ is computed or estimated for the checks' problems, not tested"),
    ("Assumption 1(b)", "§3.1", "T", "f_i is L-smooth (non-convex case)", "f:A.6",
     "an assumption: L is computed or estimated for the checks' problems, not tested"),
    ("Assumption 2", "§3.1", "T", "bounded variance of stochastic gradients: "
     "E‖∇f̃_i(w; ξ) − ∇f_i(w)‖² ≤ γ_f²", "f:B.2",
     "an assumption: γ_f² is estimated from samples for the checks, not tested"),
    ("Assumption 3", "§3.1", "T", "bounded diversity: (1/N) Σ ‖∇f_i(w) − ∇f(w)‖² ≤ σ_f²",
     "f:B.2", "an assumption: σ_f² is estimated from samples for the checks, not tested"),
    ("Proposition 1", "§3.1", "T", "∇F_i is λ-smooth, F_i is λμ/(λ+μ)-strongly convex, and "
     "∇F_i(w) = λ(w − θ̂_i(w)) (eq. 6)", "c:pfedme.prop1_constants c:pfedme.envelope_gradient "
     "c:pfedme.worst_case_envelope_L c:pfedme.worst_case_envelope_mu f:B.3"),
    ("Algorithm 1", "§3.2", "A", "pFedMe: R local steps w ← w − ηλ(w − θ̃_i(w)) with a "
     "δ-approximate prox, S clients sampled, w ← (1 − β)w + β·mean",
     "c:pfedme.engine_equals_oracle c:pfedme.engine_equals_oracle_form "
     "c:pfedme.beta_extrapolation c:pfedme.aggregation_equal_sizes "
     "c:pfedme.reduction_gd_on_envelope f:B.4 t:tests/algorithms/test_pfedme.py"),
    ("eq. (7)", "§3.2", "A", "mini-batch inner objective h̃_i(θ; w, D_i) = f̃_i(θ; D_i) + "
     "(λ/2)‖θ − w‖²", "c:pfedme.engine_equals_oracle f:B.4"),
    ("eq. (8)", "§3.2", "A", "inner solve to accuracy ‖∇h̃_i(θ̃_i)‖² ≤ ν in K = O(κ log(d/ν)) "
     "steps", "f:B.4", "the engine runs K inner steps (the experiments' setting); the ν "
     "stopping rule is not implemented"),
    ("Lemma 1", "§3.2", "T", "E‖θ̃_i − θ̂_i‖² ≤ δ² = 2(γ_f²/|D| + ν)/(λ ± ·)² in both cases of "
     "Assumption 1", "c:pfedme.lemma1_delta c:pfedme.transcription_lemma1 f:B.5"),
    ("Lemma 2(a)", "§4", "T", "strongly convex: envelope diversity ≤ 4L_F(F(w) − F(w*)) + "
     "2σ²_{F,1}", "c:pfedme.lemma2_diversity c:pfedme.transcription_lemma2 f:B.5"),
    ("Lemma 2(b)", "§4", "T", "non-convex, λ > 2√2 L: envelope diversity ≤ "
     "2λ²σ_f²/(λ² − 8L²) =: σ²_{F,2}", "c:pfedme.lemma2_diversity c:pfedme.transcription_lemma2 "
     "f:B.5"),
    ("Theorem 1(a)", "§4", "T", "strongly convex: E[F(w̄_T)] − F* ≤ linear decay + client "
     "sampling + client drift + λ²δ²/μ_F", _THM1),
    ("Theorem 1(b)", "§4", "T", "personalized models in a ball around w*: (1/N) Σ "
     "E‖θ̃_i − w*‖² = O(E[F(w̄_T) − F*] + σ²_{F,1}/λ² + δ²)", "c:pfedme.personalized_ball_lambda "
     "c:pfedme.transcription_theorem1 fig:pfedme_rates"),
    ("Corollary 1", "§4", "T", "S = N: β = Θ(√N/T) or Θ(NR) gives linear O(1/(TRN)) or quadratic "
     "O(1/(TRN)²) speed-up", "c:pfedme.corollary1_rate_reading " + _COR),
    ("Remark 1", "§4", "T", "the floor λ²δ²/μ_F (a λδ/μ_F-neighbourhood), the sampling term 0 "
     "at S = N, the drift term", "c:pfedme.bound_thm1_floor c:pfedme.bound_thm1_sampling"),
    ("Theorem 2(a)", "§4", "T", "non-convex: E‖∇F(w_{t*})‖² ≤ O(Δ_F/(η̂T) + (Δ_F)^{2/3}(…)/"
     "(βRT)^{2/3} + sampling + λ²δ²)", _THM2),
    ("Theorem 2(b)", "§4", "T", "personalized models near w_t: (1/N) Σ E‖θ̃_i − w_t‖² = "
     "O(E‖∇F‖² + σ²_{F,2}/λ² + δ²)", "c:pfedme.personalized_ball_lambda "
     "c:pfedme.transcription_theorem2"),
    ("Corollary 2", "§4", "T", "S = N, β = Θ(N^{1/2}R^{1/4}), T^{1/3} = Θ((NR)^{2/3}): "
     "O(1/(TRN)^{2/3}) speed-up", "c:pfedme.corollary2_rate_reading " + _COR),
    ("Remark 2", "§4", "T", "the non-convex speed-up of order 2/3 beats the 1/2 of earlier FL "
     "analyses", "c:pfedme.corollary2_rate_reading c:pfedme.nonconvex_rate_T"),
    ("§5 MNIST setting", "§5", "E", "N = 20 clients, 2 of 10 labels each, sizes in "
     "[1165, 3834], 75/25 split", "c:synthetic.label_skew_counts "
     "t:tests/synthetic/real_data/test_paper_partitions.py"),
    ("§5 Synthetic setting", "§5", "E", "FedProx Synthetic(ᾱ = 0.5, β̄ = 0.5): 60-dim inputs, "
     "10 classes, N = 100, power-law sizes in [250, 25810]",
     "c:synthetic.fedprox_feature_moments c:synthetic.fedprox_reference_replay f:B.7"),
    ("Fig. 1", "§5", "E", "effect of K (inner steps) on convergence, MNIST, MLR and DNN: "
     "K ≈ 3–5 suffices", "r:pfedme_figs_mnist r:pfedme_figs_transfer_fmnist "
     "c:transfer_fmnist.pfedme_fig1_k"),
    ("Fig. 2", "§5", "E", "effect of β on convergence, MNIST: larger β converges faster, "
     "too large destabilises", "r:pfedme_figs_mnist r:pfedme_figs_transfer_fmnist "
     "c:transfer_fmnist.pfedme_fig2_beta"),
    ("Fig. 3", "§5", "E", "pFedMe (PM) vs its global model, Per-FedAvg, FedAvg on MNIST at "
     "shared hyper-parameters: PM ahead by 0.9–1.5 %", "r:pfedme_figs_mnist"),
    ("Fig. 4", "§5", "E", "the same comparison on Synthetic: PM 6.1 %, 3.8 %, 5.2 % above GM, "
     "Per-FedAvg, FedAvg (strongly convex)", "",
     "no entry: the Synthetic comparison at shared hyper-parameters (η = 0.005, S = 10, "
     "β = 1) is not a reproduction entry or figure script (the generator is checked: "
     "synthetic.fedprox_reference_replay)"),
    ("Table 1 (MNIST)", "§5", "E", "fine-tuned accuracies on MNIST: pFedMe-PM best "
     "(95.62 MLR, 99.46 DNN)", "r:pfedme_table1_mnist r:pfedme_table1_transfer_fmnist "
     "c:transfer_fmnist.pfedme_pm_best c:transfer_fmnist.pfedme_over_fedavg"),
    ("Table 1 (Synthetic)", "§5", "E", "fine-tuned accuracies on Synthetic: pFedMe-PM best "
     "(83.20 MLR, 86.36 DNN), PM > GM, Per-FedAvg > FedAvg",
     "file:paper_figures/results/pfedme_table1_full.md c:pfedme.table1_ordering "
     "fig:pfedme_table1"),
))
