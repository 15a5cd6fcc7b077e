"""The other sources the checks cite: the baselines the four papers compare against (each
algorithm's batched engine against its per-client oracle), the data generators, other
papers' rates and the toolkit's own contracts.  One item per algorithm or construction, so
that every registered check names a ledger item.

Rows: ``(paper id, label, section, kind T/A/E, statement, evidence[, missing])``.
"""

from __future__ import annotations

from verification.ledger.item import table

_ROWS = (
    ("fedavg", "Algorithm (FedAvg)", "§2", "A", "R local SGD steps on S of N clients, "
     "Σ n_i w_i / Σ n_i", "c:fedavg.engine_equals_oracle c:fedavg.engine_equals_oracle_form"),
    ("fedavg", "Local training", "§2", "A", "R local SGD steps per client, no communication "
     "(the Local baseline)", "c:local.engine_equals_oracle"),
    ("fedavg", "FedAvg + fine-tuning", "PPFE Table 1", "A", "FedAvg then full local "
     "fine-tuning (PPFE's FedAvg+FT)", "c:fedavg-ft.engine_equals_oracle"),
    ("fedavg", "homogeneous rate", "§2", "T", "homogeneous FedAvg = R·T gradient steps: "
     "max(|1 − ημ|, |1 − ηL|)^{2RT} Δ₀, worst case", "c:fedavg.worst_case_gd"),
    ("local-sgd-lb", "Local SGD rate", "Theorem", "T", "homogeneous Local SGD rate LB²/(KR) + "
     "σB/√(MKR) + (Lσ²B⁴)^{1/3}/(K^{1/3}R^{2/3}), worst case", "c:fedavg.worst_case_local_sgd_noise"),
    ("apfl", "Algorithm 1", "§3", "A", "APFL with the adaptive mixing α (eq. 10)",
     "c:apfl.engine_equals_oracle"),
    ("cfl", "Algorithm 2", "§3", "A", "CFL with the optimal bipartition of Algorithm 1",
     "c:cfl.engine_equals_oracle"),
    ("ditto", "Algorithm 1", "§3", "A", "Ditto with s = R personal steps",
     "c:ditto.engine_equals_oracle"),
    ("fedala", "Algorithm 1", "§3", "A", "FedALA's adaptive local aggregation (eqs. 4–5)",
     "c:fedala.engine_equals_oracle"),
    ("fedamp", "Algorithm 1", "§3", "A", "FedAMP's attentive message passing (eq. 7)",
     "c:fedamp.engine_equals_oracle"),
    ("fedbabu", "Algorithm 1", "§3", "A", "FedBABU: random fixed head, body averaged, head "
     "fine-tuned", "c:fedbabu.engine_equals_oracle"),
    ("fedbn", "Algorithm 1", "§3", "A", "FedBN: batch-norm layers kept local",
     "c:fedbn.engine_equals_oracle"),
    ("fedbn", "feature-shift setting", "§5", "E", "per-client affine feature shift and noise "
     "(the toolkit's transform)", "c:synthetic.feature_shift_moments"),
    ("fedem", "Algorithm 1", "§3", "A", "FedEM: E-step (eq. 5) and mixture weights (eq. 6)",
     "c:fedem.engine_equals_oracle"),
    ("fedfomo", "eqs. (2)–(3)", "§3", "A", "FedFomo's first-order model weights",
     "c:fedfomo.engine_equals_oracle"),
    ("fedpac", "Algorithm 1", "§3", "A", "FedPAC with its head-combination QP (eqs. 8–9)",
     "c:fedpac.engine_equals_oracle"),
    ("fedper", "Algorithm", "§3", "A", "FedPer: joint local SGD, body averaged, heads personal",
     "c:fedper.engine_equals_oracle"),
    ("fedproto", "Algorithm 1", "§3", "A", "FedProto's prototype aggregation (eqs. 5–6)",
     "c:fedproto.engine_equals_oracle"),
    ("fedprox", "Algorithm 2", "§3", "A", "FedProx's proximal local problem (eq. 2)",
     "c:fedprox.engine_equals_oracle"),
    ("fedprox", "Synthetic(α, β)", "§5.1", "E", "the Synthetic generator: x ~ N(v_i, Σ), "
     "Σ_jj = j^{-1.2}, per-client softmax models", "c:synthetic.fedprox_feature_moments "
     "c:synthetic.fedprox_reference_replay"),
    ("fedrep", "Algorithm 1", "§3", "A", "FedRep: head steps, then body steps, body averaged",
     "c:fedrep.engine_equals_oracle"),
    ("fedrod", "Algorithm 1", "§3", "A", "FedRoD's two heads (eqs. 6–7)",
     "c:fedrod.engine_equals_oracle"),
    ("fedsam", "Algorithm", "§3", "A", "FedAvg with SAM local steps",
     "c:fedsam.engine_equals_oracle"),
    ("ifca", "Algorithm 1", "§3", "A", "IFCA with model averaging",
     "c:ifca.engine_equals_oracle"),
    ("knnper", "eqs. (3)–(4)", "§3", "A", "kNN-Per's interpolated predictor on the datastore",
     "c:knnper.engine_equals_oracle"),
    ("l2sgd", "Algorithm 1", "§4", "A", "L2GD, stochastic", "c:l2sgd.engine_equals_oracle"),
    ("lgfedavg", "Algorithm", "§3", "A", "LG-FedAvg: head averaged, bodies local",
     "c:lgfedavg.engine_equals_oracle"),
    ("perfedavg", "Algorithm 1", "§3", "A", "Per-FedAvg (first-order and Hessian-free) and its "
     "one-step adaptation", "c:perfedavg.engine_equals_oracle "
     "c:perfedavg.engine_equals_oracle_form"),
    ("pfedfda", "Algorithm 1", "§3", "A", "pFedFDA: cross-validated β_i, LDA head",
     "c:pfedfda.engine_equals_oracle"),
    ("pfedhn", "eq. (22)", "§3", "A", "pFedHN's hypernetwork and its Δ-VJP updates",
     "c:pfedhn.engine_equals_oracle"),
    ("scaffold", "Algorithm 1", "§3", "A", "SCAFFOLD, option II", "c:scaffold.engine_equals_oracle"),
    ("fedopt", "Algorithm 2 (FedAdagrad)", "§3", "A", "server Adagrad on the pseudo-gradient: "
     "v_t = v_{t−1} + Δ_t²", "c:fedadagrad.engine_equals_oracle"),
    ("fedopt", "Algorithm 2 (FedYogi)", "§3", "A", "server Yogi: v_t = v_{t−1} − (1−β₂)Δ_t² "
     "sign(v_{t−1} − Δ_t²)", "c:fedyogi.engine_equals_oracle"),
    ("fedopt", "Algorithm 2 (FedAdam)", "§3", "A", "server Adam: v_t = β₂v_{t−1} + (1−β₂)Δ_t²",
     "c:fedadam.engine_equals_oracle"),
    ("fedavgm", "server momentum", "§3", "A", "u ← βu + Δ_t, x ← x + ηu",
     "c:fedavgm.engine_equals_oracle"),
    ("minimax-l2", "Theorem 1, Corollary 1", "§3", "T", "E‖w̃_i − w*_i‖² ≲ 1/N + R² ∧ 1/n "
     "(shape in the client size n)", "c:minimax.l2_personalization_rate_n"),
    ("dirichlet", "Dirichlet label skew", "", "E", "per-class shares p_k ~ Dir(α·1_N): "
     "Var p_ik = (1/N)(1 − 1/N)/(Nα + 1)", "c:synthetic.dirichlet_share_variance"),
    ("toolkit", "train/test isolation", "", "A", "every algorithm's training is bit-identical "
     "when only the test split changes", "c:engine.train_test_isolation"),
    ("toolkit", "permuted-label construction", "", "E", "planted clusters with per-client "
     "label permutations", "c:synthetic.permuted_labels_moments"),
    ("toolkit", "oracles in non-default settings", "", "A", "every algorithm's engine equals "
     "its per-client oracle with the model's l2 > 0 and with each non-default boolean / "
     "one-of hyper-parameter value",
     "c:engine.oracles_with_l2 c:engine.oracles_hyperparameter_values"),
)


def _items():
    by_paper: dict[str, list] = {}
    for pid, *row in _ROWS:
        by_paper.setdefault(pid, []).append(tuple(row))
    return tuple(i for pid, rows in by_paper.items() for i in table(pid, rows))


ITEMS = _items()
