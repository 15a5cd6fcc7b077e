"""PLGU (Qu et al., CVPR 2023): its items in the paper's order (main text, then appendices
A–E), with evidence.

Rows: ``(label, section, kind T/A/E, statement, evidence[, missing])`` — see
:mod:`verification.ledger.item`.
"""

from __future__ import annotations

from verification.ledger.item import table

_GREP = "c:plgu-grep.engine_equals_oracle f:D.6"
_GHN = "c:plgu-ghn.engine_equals_oracle f:D.7"
_THM2 = "c:plgu.transcription_theorem2 f:D.8"
_THM3 = "c:plgu.transcription_theorem3 f:D.8"
_LEMMA = "checked as a part of its theorem's transcription, not apart"
_NO_TABLE = ("no reproduction entry (issue 42 item 4)")
_CNN = "the entry runs the toolkit's `cnn`, not the paper's ResNet-18"
_TMG_ROW = ("the Tiny-ImageNet part has no entry (the `tinyimagenet` loader exists, no entry "
            "column or PLGU partition uses it yet; no ResNet-50-GN); "
            "the CIFAR part runs the toolkit's `cnn`, not ResNet-18 / WRN-28-10")
_TMG = ("no entry runs Tiny-ImageNet (its `tinyimagenet` loader exists) and the paper's "
        "ResNet-18 / WRN-28-10 are not the entry's model")


ITEMS = table("plgu", (
    ("eq. (1)", "§3.1", "T", "scheme I (global + personalized models) and scheme II (no global "
     "model) objectives", "f:D.1", "a definition: no check states it apart"),
    ("eq. (2)", "§3.2", "T", "SAM: min_θ max_{‖ε‖_p ≤ ρ} F(θ + ε)",
     "c:fedsam.engine_equals_oracle f:D.2"),
    ("eq. (3)", "§3.2", "T", "one-step ascent ε̃ = ρ ∇F/‖∇F‖ ≈ the inner argmax",
     "c:plgu.first_order_ascent c:plgu.perturbation_norm f:D.2"),
    ("eq. (4)", "§3.2", "T", "layer-wise SAM (LWSAM) with the scaling Λ_i = diag(ξ_i)",
     "c:plgu.layer_perturbation_norms f:D.2"),
    ("eq. (5)", "§3.2", "T", "first-order LWSAM solution ε̃ = ρ sign(g) Λ |g|^{q−1}/(‖g‖_q^q)^{1/p} "
     "(printed exponent p − 1: erratum)", "c:plgu.perturbation_norm "
     "c:plgu.perturbation_norm_printed_exponent c:plgu.layer_perturbation_norms f:D.2"),
    ("Algorithm 1", "§3.2", "A", "local PLGU routine: a plain step on θ̃, a SAM step on the "
     "global copy w̃", "c:plgu-lf.engine_equals_oracle f:D.3 "
     "t:tests/algorithms/test_plgu_algorithms.py"),
    ("eq. (6)", "§4.1", "T", "personalization score ξ_{i,l} = ‖θ̃_{i,l} − w̃_l‖/dim(w̃_l) "
     "(PLGU-LF)", "c:plgu-lf.engine_equals_oracle f:D.4 t:tests/algorithms/test_plgu_scores.py"),
    ("Algorithm 2", "§4.1", "A", "PLGU-LF: the D layers with the largest ξ stay personal, the "
     "rest are universal and perturbed", "c:plgu-lf.engine_equals_oracle f:D.5 "
     "t:tests/algorithms/test_plgu_algorithms.py"),
    ("eq. (7)", "§4.1", "T", "PLGU-LF objective; |L^Per| = 0 gives FedSAM, ρ = 0 or D = L no "
     "perturbation", "c:plgu.d_equals_l_no_perturbation c:plgu.rho0_fedsam_equals_fedavg f:D.5"),
    ("Theorem 1", "§4.2", "T", "PLGU-LF gap = O(β(margin and adversarial complexities of the "
     "global part over √m and of the personalized part over N√m̂) + √(log(1/γ)/m))",
     "c:plgu.bound_theorem1_gap c:plgu.shape_theorem1_m c:plgu.transcription_theorem1 f:D.8 "
     "fig:bound_tightness"),
    ("Fig. 1", "§1", "E", "toy example on CIFAR-10 (100 clients, 3 labels): the poorest clients "
     "of pFL methods", "fig:plgu_poor_clients c:plgu.lowest5_lift",
     "the analogue on a small label-skewed federation, not CIFAR-10"),
    ("Fig. 2", "§4.1", "A", "illustration of PLGU-LF", "", "a diagram of the method: nothing "
     "to measure"),
    ("eq. (8)", "§5.1", "T", "FedRep objective min_φ (1/N) Σ min_h F_i(h, φ)",
     "c:fedrep.engine_equals_oracle f:D.6"),
    ("eq. (9)", "§5.1", "A", "K epochs of head steps on the local data", _GREP),
    ("eq. (10)", "§5.1", "T", "personalization score of the representation layers", _GREP),
    ("eq. (11)", "§5.1", "A", "representation step φ_i = φ̃ − η g", _GREP),
    ("eq. (12)", "§5.1", "A", "LWSAM perturbation of the representation (same 1/p erratum as "
     "eq. 5)", "c:plgu-grep.engine_equals_oracle c:plgu.perturbation_norm f:D.6"),
    ("eq. (13)", "§5.1", "A", "perturbed representation update (printed with g where g̃ is "
     "meant: erratum, the intended reading is run)", _GREP),
    ("Algorithm 3", "§5.1", "A", "PLGU-GRep: K head epochs, one perturbed representation "
     "update, server averaging of φ", _GREP + " t:tests/algorithms/test_plgu_algorithms.py"),
    ("Fig. 3", "§5.1", "A", "illustration of PLGU-GRep", "", "a diagram of the method: nothing "
     "to measure"),
    ("Theorem 2", "§5.2", "T", "PLGU-GRep gap: representation term over √m (with ρ), head "
     "terms over N√m̂ (main-text statement truncated; appendix version complete)",
     "c:plgu.bound_theorem2_gap c:plgu.shape_theorem2_m c:plgu.transcription_theorem2 f:D.8"),
    ("§6.1 setting", "§6.1", "E", "100 clients, 3 (CIFAR-10) / 10 (CIFAR-100) labels, equal "
     "sizes, C = 10 or 100 per round, K = 5 epochs, batch 50, ρ = 0.05",
     "t:tests/synthetic/real_data/test_paper_partitions.py f:D.9",
     "covered by tests of the partition, no registered check"),
    ("§6.1 metrics", "§6.1", "E", "average, lowest 5 % and top 5 % client accuracy",
     "c:plgu.lowest5_lift f:D.9 t:tests/algorithms/test_evaluation.py"),
    ("Table 1", "§6.2", "E", "global-model accuracy: PLGU-LF above FedAvg, FedSAM, Ditto, "
     "pFedMe on CIFAR-10/100 and Tiny-ImageNet, average and lowest 5 %",
     "r:plgu_table1_global r:plgu_table1_transfer_fmnist c:plgu.lowest5_lift "
     "c:transfer_fmnist.plgu_global_average c:transfer_fmnist.plgu_low5_without_average_loss",
     "the Tiny-ImageNet row has no entry: " + _TMG),
    ("Table 2", "§6.2", "E", "personalized-model accuracy: PLGU-GRep / PLGU-GHN best on average "
     "and lowest 5 %", "r:plgu_table2_personalized r:plgu_table2_transfer_fmnist "
     "c:plgu.lowest5_lift c:transfer_fmnist.plgu_personalized",
     "the Tiny-ImageNet row has no entry: " + _TMG),
    ("Fig. 4", "§6.2", "E", "convergence of the personalized models on the three datasets", "",
     "no entry: " + _TMG + " (CIFAR curves would be the histories of the Table 2 runs)"),
    ("Fig. 5", "§6.3", "E", "impact of the number D of personalized layers",
     "fig:plgu_poor_clients", "the D sweep is drawn on a small synthetic federation, not CIFAR"),
    ("Fig. 6", "§6.3", "E", "distribution of the personalized models' accuracies",
     "fig:plgu_poor_clients", "the per-client distribution is drawn on a small synthetic "
     "federation, not CIFAR"),
    ("Table 3", "§6.3", "E", "impact of local epochs K ∈ {1, 5, 10} (CIFAR-10, C = 10)",
     "r:plgu_table3_local_epochs", _CNN),
    ("Table 4", "§6.3", "E", "impact of the radius ρ ∈ {0.05, 0.1, 0.5} (CIFAR-10, C = 10): "
     "ρ = 0.05 best, 0.5 degrades", "r:plgu_table4_rho r:plgu_table4_rho_transfer_fmnist "
     "c:transfer_fmnist.plgu_table4_rho", _CNN + "; the transfer on Fashion-MNIST tests "
     "the claim"),
    ("Fig. 7", "§6.3", "E", "loss landscapes of PLGU-LF", "",
     "no entry: no loss-landscape figure script"),
    ("Lemma 1", "App. A", "T", "PLGU-LF gap ≤ β(Rademacher terms of G_u, G̃_u, G_p, G̃_p) + "
     "2√(log(1/γ)/m)", "c:plgu.bound_theorem1_gap f:D.8",
     "checked only through Theorem 1's combination of Lemmas 1–4"),
    ("Lemma 2", "App. A", "T", "R(G_u) ≤ 2B√(d + 1 + log n) Π M_l/√m (Golowich-style)",
     "c:plgu.bound_lemma2_rademacher c:plgu.bound_lemma2_envelope_m c:plgu.transcription_lemma2 "
     "c:plgu.rademacher_linear c:plgu.transcription_linear_rademacher_bound "
     "c:plgu.transcription_empirical_rademacher f:D.8"),
    ("Lemma 3", "App. A", "T", "adversarial class: R ≤ 24 max{1, q^{1/2−1/p}}(B + ρ)/(γ√m) "
     "√(Σ d_l d_{l−1} log 3L) Π M_l", "c:plgu.transcription_lemma3 "
     "c:plgu.transcription_clipped_log_lp_factor f:D.8"),
    ("Lemma 4", "App. A", "T", "personalized classes: R_P(G_p) + R_P(G̃_p) ≤ margin + "
     "adversarial (display and O-form disagree)", "c:plgu.bound_lemma4_total "
     "c:plgu.bound_term4_display c:plgu.bound_term4_linear c:plgu.bound_term4_oform "
     "c:plgu.bound_term4_printed c:plgu.shape_term4_linear_B c:plgu.transcription_lemma4 f:D.8"),
    ("Lemma 5", "App. B", "T", "PLGU-GRep gap ≤ β(β_h Σ R_H + β_φ(R_Φ + R̃_Φ)) + "
     "2√(log(1/γ)/N)", _THM2, _LEMMA),
    ("Lemma 6", "App. B", "T", "head class Rademacher bound", _THM2, _LEMMA),
    ("Lemma 7", "App. B", "T", "representation classes (plain and adversarial)", _THM2, _LEMMA),
    ("eqs. (22)–(23)", "App. C.1", "T", "hypernetwork w_i = h(v_i; φ) and its objective",
     _GHN),
    ("eqs. (24)–(25)", "App. C.1", "A", "server SAM step on φ and the descriptor update", _GHN),
    ("eq. (26)", "App. C.1", "T", "PLGU-GHN objective min max_{‖ε‖≤ρ} Σ (m_i/m) F_i(h(v_i, φ + ε))",
     _GHN),
    ("Algorithm 4", "App. C.1", "A", "PLGU-GHN: pFedHN with a sharpness-aware hypernetwork "
     "update", _GHN + " t:tests/algorithms/test_plgu_algorithms.py"),
    ("Fig. 8", "App. C.1", "A", "illustration of PLGU-GHN", "", "a diagram of the method: "
     "nothing to measure"),
    ("Theorem 3", "App. C.2", "T", "PLGU-GHN gap: descriptor term over N√m̂, hypernetwork terms "
     "over √N (with ρ), + 2√(log(1/γ)/N)", "c:plgu.bound_theorem3_gap c:plgu.shape_theorem3_m "
     "c:plgu.transcription_theorem3 f:D.8"),
    ("Lemma 8", "App. C.2", "T", "PLGU-GHN gap decomposition into descriptor and hypernetwork "
     "Rademacher terms", _THM3, _LEMMA),
    ("Lemma 9", "App. C.2", "T", "descriptor class Rademacher bound", _THM3, _LEMMA),
    ("Lemma 10", "App. C.2", "T", "hypernetwork classes (plain and adversarial)", _THM3, _LEMMA),
    ("Table 5", "App. D.1", "E", "datasets and networks: ResNet-18 (CIFAR), WRN-28-10 / ResNet-50 "
     "(Tiny-ImageNet)", "t:tests/algorithms/test_models_resnet.py "
     "t:tests/synthetic/real_data/test_tiny_imagenet.py",
     "ResNet-18 and the Tiny-ImageNet loader exist; WRN-28-10 and ResNet-50-GN do not "
     "(issue 42 item 5)"),
    ("Table 6", "App. E.1", "E", "global-model accuracy at 5 / 20 / 50 labels (CIFAR-10, "
     "CIFAR-100, Tiny-ImageNet)", "r:plgu_table6_global_labels", _TMG_ROW),
    ("Table 7", "App. E.1", "E", "personalized-model accuracy at 5 / 20 / 50 labels",
     "r:plgu_table7_personalized_labels", _TMG_ROW),
    ("Table 8", "App. E.1", "E", "accuracy at 8 / 50 / 100 labels (caption: personalized; "
     "methods: Table 1's, read as the global model)", "r:plgu_table8_global_labels", _TMG_ROW),
    ("Table 9", "App. E.1", "E", "personalized-model accuracy at 8 / 20 / 40 labels",
     "r:plgu_table9_personalized_labels", _TMG_ROW),
    ("Fig. 9", "App. D.3", "A", "the hypernetwork architecture of PLGU-GHN",
     "c:pfedhn.engine_equals_oracle", "the toolkit's hypernetwork is pFedHN's; the figure's "
     "exact widths are not checked"),
    ("Fig. 10", "App. E", "E", "further performance curves on CIFAR-100", "",
     "no entry: " + _NO_TABLE),
    ("Fig. 11", "App. E", "E", "further performance curves on Tiny-ImageNet", "",
     "no entry: " + _TMG),
    ("Table 10", "App. E", "E", "local epochs K on CIFAR-100 and Tiny-ImageNet",
     "r:plgu_table10_local_epochs", _TMG_ROW),
    ("Table 11", "App. E", "E", "radius ρ on CIFAR-100 and Tiny-ImageNet",
     "r:plgu_table11_rho", _TMG_ROW),
))
