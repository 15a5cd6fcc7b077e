"""The PLGU poor-clients experiment shared by the checks ``plgu.*`` and the figure
:mod:`paper_figures.plgu_poor_clients`.

PLGU Fig. 1/6 and Fig. 5 analogues: do sharpness-aware personalization methods lift the
poorest clients on a label-skewed federation?

PLGU — Qu et al., *How to Prevent the Poor Performance Clients for Personalized Federated
Learning?* (CVPR 2023); docs/formulas.md §D.5–D.9.  Toolkit setting, NOT the paper's (CIFAR with
ResNets): a Synthetic(0, 0) IID pool (FedProx generator, 30-d, labels argmax(xW + b)) reduced
to its 8 largest classes, each capped at ``CAP`` samples, split by
:func:`synthetic.partition.label_skew_partition` into N clients with 3 classes each (sizes
U{40..100}, 75/25 train/test); a 4-layer MLP (L = 4, so D ∈ {0..4}); S = 25 clients per round.
Quick: N = 50, 40 rounds, one seed, D ∈ {0, 2, 4}; full: N = 100, 120 rounds, 3 seeds, D ∈ {0..4}.

Writes
* ``plgu_client_ecdf.png/.csv`` — ECDF of the final per-client test accuracy of FedAvg,
  FedSAM, Ditto, FedRep, pFedHN, PLGU-LF (global and personalized), PLGU-GRep, PLGU-GHN;
* ``plgu_table.csv/.md`` — the same methods plus ρ = 0 ablations of PLGU-LF and PLGU-GRep
  (separating the perturbation's effect from the schemes' structure): average (mean over clients), lowest-5% and top-5% (mean of the
  worst / best ⌈0.05 N⌉ clients, §D.9 choice), mean ± sd over seeds;
* ``plgu_effect_of_D.png/.csv`` — PLGU-LF's three numbers against D (Fig. 5 analogue).

Every method uses the same lr 0.2, K = 10 local steps of batch 20 (FedRep / PLGU-GRep: 10 head
steps, then one body step resp. eqs. 11–13), ρ = 0.05 (paper default), D = 2, Ditto λ = 0.75
(paper), pFedHN α = 0.3 (α = 1 collapsed to chance on 2 of 3 seeds in 120-round runs).  No tuning on the test split.
"""

from __future__ import annotations

import numpy as np
import torch

from algorithms.engine.base import get_algorithm
from algorithms.engine.evaluation import evaluate, summarize
from algorithms.engine.models import Model, _dense, _uniform
from synthetic.federation import Federation
from synthetic.fedprox import generate
from synthetic.partition import label_skew_partition
from synthetic.federation import compute_device

CLASSES, CAP, DIM = 8, 1500, 30
COMMON = dict(lr=0.2, batch_size=20, clients_per_round=25)
METHODS = [  # (label, registry name, hyper-parameters, evaluated model)
    ("FedAvg", "fedavg", dict(local_rounds=10), "global"),
    ("FedSAM", "fedsam", dict(local_rounds=10, rho=0.05), "global"),
    ("Ditto", "ditto", dict(local_rounds=10, lam=0.75, personal_lr=0.2), "personalized"),
    ("FedRep", "fedrep", dict(head_steps=10, local_rounds=1), "personalized"),
    ("pFedHN", "pfedhn", dict(local_rounds=10, hn_lr=0.3), "personalized"),
    ("PLGU-LF (G)", "plgu-lf", dict(local_rounds=10, rho=0.05, personalized_layers=2), "global"),
    ("PLGU-LF (P)", "plgu-lf", dict(local_rounds=10, rho=0.05, personalized_layers=2), "personalized"),
    ("PLGU-GRep", "plgu-grep", dict(head_steps=10, rho=0.05), "personalized"),
    ("PLGU-GHN", "plgu-ghn", dict(local_rounds=10, hn_lr=0.3, rho=0.05), "personalized"),
    # ρ = 0 ablations: what PLGU's structure gives without the perturbation (PLGU-GHN at
    # ρ = 0 is pFedHN exactly, so it has no extra row)
    ("PLGU-LF ρ=0 (P)", "plgu-lf", dict(local_rounds=10, rho=0.0, personalized_layers=2), "personalized"),
    ("PLGU-GRep ρ=0", "plgu-grep", dict(head_steps=10, rho=0.0), "personalized"),
]


class MLP(Model):
    """ReLU MLP ``dim → hidden × depth → classes`` (L = depth + 1 layers) for the D sweep."""

    def __init__(self, dim: int, num_classes: int, hidden: int = 32, depth: int = 3):
        self.sizes = [dim] + [hidden] * depth + [num_classes]
        self.layers = [[f"fc{j}.weight", f"fc{j}.bias"] for j in range(len(self.sizes) - 1)]

    def init_single(self, gen):
        out = {}
        for j, (a, b) in enumerate(zip(self.sizes[:-1], self.sizes[1:])):
            out[f"fc{j}.weight"] = _uniform((a, b), a, gen)
            out[f"fc{j}.bias"] = _uniform((b,), a, gen)
        return out

    def forward(self, params, x):
        h = x.flatten(2)
        for j in range(len(self.layers)):
            h = _dense(h, params[f"fc{j}.weight"], params[f"fc{j}.bias"])
            if j < len(self.layers) - 1:
                h = torch.relu(h)
        return h


def federation(*, num_clients: int, seed: int) -> Federation:
    """The label-skewed federation described in the module docstring (CPU, float32)."""
    xs, ys = generate(0.0, 0.0, iid=True, num_clients=60, dim=DIM, num_classes=10,
                      size_multiplier=2, seed=seed)
    x, y = np.concatenate(xs), np.concatenate(ys)
    keep = np.argsort(-np.bincount(y, minlength=10), kind="stable")[:CLASSES]
    rng = np.random.default_rng(seed)
    idx = np.concatenate([rng.permutation(np.flatnonzero(y == c))[:CAP] for c in keep])
    relabel = np.full(10, -1)
    relabel[keep] = np.arange(CLASSES)
    part = label_skew_partition(x[idx], relabel[y[idx]], num_clients=num_clients,
                                classes_per_client=3, size_range=(40, 100), seed=seed,
                                replace=True)
    return Federation.from_client_arrays(part.xs, part.ys, num_classes=CLASSES, seed=seed,
                                         device=compute_device(), dtype=torch.float32,
                                         name=f"synthetic-pool label-skew N={num_clients}")


def client_accuracy(name: str, hps: dict, fed, model, *, rounds: int, seed: int
                    ) -> dict[str, np.ndarray]:
    """Final per-client test accuracy of every model the algorithm evaluates."""
    alg = get_algorithm(name)(**COMMON, **hps)
    state = alg.init(fed, model, seed)
    for _ in range(rounds):
        state = alg.round(state, fed, model)
    return {which: evaluate(model, params, fed.test)[0].numpy()
            for which, params in alg.evaluated(state).items()}


def stats(acc: np.ndarray) -> tuple[float, float, float]:
    s = summarize(torch.as_tensor(acc), torch.ones(len(acc)))
    return s["mean"], s["low5"], s["top5"]
