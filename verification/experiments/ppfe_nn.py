"""The PPFE-for-neural-networks experiment shared by the check ``ppfe.stage_*`` and the
figure :mod:`paper_figures.ppfe_nn` (which plots what :func:`run_all` returns).

Setting (toolkit choice, the paper's image experiments are not reproducible offline): the
planted label-skewed federation :func:`synthetic.permuted_labels.permuted_label_federation`
(K = 10 clusters, 4 per client, half of the clients with permuted labels — a shared
representation plus personal heads), a 4-layer MLP (widths 20-32-32-16-10), so PPFE runs the
paper's 4 stages (stage t personalizes the last t layers) with the 30/50/40/40 round split.
Baselines (head = last layer): FedRep, FedPer, LG-FedAvg, FedBABU, FedAvg+FT, plus FedAvg
and Local as references.  Same learning rate, batch size and S for all.

Left panel: test accuracy (sample-weighted) vs round — PPFE's ensemble (eq. 8) and its
running stage model, each baseline's personalized model; stage boundaries dotted.
Right panel: the same accuracies against the cumulative number of parameters communicated
(2 · participants · shared parameters per round).  CSV: one row per (method, round).
"""

from __future__ import annotations

import torch

from algorithms.engine.base import get_algorithm
from algorithms.engine.models import MLP
from algorithms.engine.runner import evaluation_entry
from synthetic.permuted_labels import permuted_label_federation
from synthetic.federation import compute_device

BASELINES = ("fedrep", "fedper", "lgfedavg", "fedbabu", "fedavg-ft", "fedavg", "local")


def setting(*, quick: bool, seed: int):
    """``(federation, model, rounds, common hyper-parameters)`` of the experiment."""
    n = 20 if quick else 50
    fed = permuted_label_federation(num_clients=n, num_clusters=10, classes_per_client=4,
                                    dim=20, size_range=(20, 60), separation=1.0, noise=2.0,
                                    permuted=0.5, seed=seed, device=compute_device(), dtype=torch.float32)
    model = MLP(20, 10, hidden=(32, 32, 16))
    common = {"lr": 0.1, "batch_size": 10, "clients_per_round": n // 2}
    return fed, model, (40 if quick else 160), common


def trajectory(alg, fed, model, *, rounds: int, seed: int, eval_rounds,
               train_loss: bool = False) -> list[dict]:
    """Evaluation entries (runner format + diagnostics) at the rounds in ``eval_rounds``
    (with ``train_loss``: also each model's loss on the training split)."""
    state = alg.init(fed, model, seed)
    out = []
    for _ in range(rounds):
        state = alg.round(state, fed, model)
        if state.round in eval_rounds:
            out.append(evaluation_entry(alg, state, fed, model, train_loss=train_loss))
    return out


def stage_ends(alg, model) -> list[int]:
    ends, total = [], 0
    for r in alg.schedule(model):
        total += r
        ends.append(total)
    return ends


def run_all(*, quick: bool, seed: int) -> list[dict]:
    fed, model, rounds, common = setting(quick=quick, seed=seed)
    step = 4 if quick else 8
    rows = []
    ppfe = get_algorithm("ppfe")(total_rounds=rounds, **common)
    ends = stage_ends(ppfe, model)
    evals = sorted(set(range(step, rounds + 1, step)) | set(ends))
    for e in trajectory(ppfe, fed, model, rounds=rounds, seed=seed, eval_rounds=evals,
                        train_loss=True):
        for name, key in (("PPFE ensemble", "ensemble_accuracy"), ("PPFE stage model", "stage_accuracy")):
            row = {"method": name, "round": e["round"], "stage": int(e["stage"]),
                   "accuracy": e[key], "comm_params": e["comm_params_total"]}
            if name == "PPFE stage model":  # for the generalization gap (test − train loss)
                row.update(test_loss=e["stage_loss"], train_loss=e["stage_train_loss"])
            rows.append(row)
    for name in BASELINES:
        kw = {k: v for k, v in common.items() if not (name == "local" and k == "clients_per_round")}
        alg = get_algorithm(name)(**kw)
        for e in trajectory(alg, fed, model, rounds=rounds, seed=seed, eval_rounds=evals):
            key = "local_accuracy" if name == "local" else (
                "global_accuracy" if name == "fedavg" else "personalized_accuracy")
            if name == "fedavg":
                comm = 2 * common["clients_per_round"] * sum(v[0].numel() for v in
                                                              model.init(1).values()) * e["round"]
            else:
                comm = e.get("comm_params_total", 0.0)
            rows.append({"method": name, "round": e["round"], "stage": "", "accuracy": e[key],
                         "comm_params": comm})
    return rows, ends


