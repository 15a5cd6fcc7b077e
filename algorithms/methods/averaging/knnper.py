"""kNN-Per — O. Marfoq, G. Neglia, R. Vidal, L. Kameni, *Personalized Federated Learning
through Local Memorization*, ICML 2022 (arXiv 2111.09360).

Training is FedAvg (:class:`~algorithms.methods.averaging.fedavg.FedAvg`, the same draws and the same
global model bit for bit).  Personalization is at inference: client i keeps a *datastore*
of its training rows' features ``(φ(x_j), y_j)`` under the current global model
(``φ`` = the input of the last layer, :mod:`algorithms.engine.features`; rebuilt by every client
after each round, ``datastore`` exchange, so that every round's evaluation is "training
stopped here") and predicts (eq. 3–4)

    p_i(y | x) = λ p_kNN,i(y | x) + (1 − λ) p_w(y | x),
    p_kNN,i(y | x) = Σ_{j ∈ N_k(x)} 1{y_j = y} exp(−‖φ(x) − φ(x_j)‖² / (D σ)) / Σ_{j ∈ N_k(x)} exp(…),

with ``N_k(x)`` the ``k`` nearest datastore entries (squared Euclidean distance, as the
authors' FAISS ``IndexFlatL2``; the kernel ``exp(−d²/(D·scale))`` is their code's).  All
clients are batched: ``torch.cdist`` of every evaluation block against its client's padded
datastore ``[M, D]`` (entries past the client's count masked), top-k, and a segment sum of
the kernel weights over the labels — no loop over clients.

Evaluated: ``global`` = the FedAvg model; ``personalized`` = the interpolated predictor
(on the training split every row finds itself in its datastore at distance 0, so its
recorded train loss is optimistic by construction; the test split is the measure)
— :class:`KNNPredictor`: its logits are ``log p_i(y | x)``, floored at the smallest normal
float so that ``λ = 1`` with no neighbour of the true class gives a large finite loss.

Departures: the paper tunes ``λ`` and ``k`` per client on validation data; here both are
hyper-parameters shared by all clients (defaults ``λ = 0.5``, ``k = 10``, the kernel scale
1).  The datastore holds all of a client's training rows up to ``capacity`` entries (2,000 by
default; above that evenly spaced rows in data order; the authors' code samples a
"capacity" fraction at random): a client of 18,285 rows (Synthetic, N = 12) made the
exact datastore's evaluation take a minute per run.
The kernel weights are normalised as a softmax over the k neighbours (the same numbers,
without the 0/0 of underflowing exponentials).  Reduction (tested): ``λ = 0`` evaluates
exactly the FedAvg model (its training is FedAvg's for every λ).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from algorithms.engine.base import NO_SYMBOL, State, broadcast, hp, register
from algorithms.engine.contract import Phase, everyone, initial_state
from algorithms.engine.features import (client_rows, feature_dim, features,
                                 head_keys)
from algorithms.methods.averaging.fedavg import FedAvg
from pfl_theory.validation import positive, positive_int


def _unit_interval(name, value):
    if not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {value}")
    return value


def knn_probabilities(z: torch.Tensor, store: torch.Tensor, labels: torch.Tensor,
                      count: torch.Tensor, k: int, scale: float, num_classes: int
                      ) -> torch.Tensor:
    """``p_kNN(y | x)`` ``[G, c, C]`` for queries ``z [G, c, D]`` against the datastores
    ``store [G, M, D]`` / ``labels [G, M]`` with ``count [G]`` valid entries each."""
    d2 = torch.cdist(z, store).square()                               # [G, c, M]
    valid = torch.arange(store.shape[1], device=z.device)[None, :] < count[:, None]
    d2 = d2.masked_fill(~valid[:, None, :], float("inf"))
    near, idx = torch.topk(d2, min(k, store.shape[1]), dim=-1, largest=False)
    w = torch.softmax(-near / (z.shape[-1] * scale), dim=-1)          # inf → weight 0
    lab = torch.gather(labels[:, None, :].expand(-1, z.shape[1], -1), 2, idx)
    p = torch.zeros(*z.shape[:2], num_classes, dtype=z.dtype, device=z.device)
    return p.scatter_add_(2, lab, w)


def datastore_rows(fed, clients: torch.Tensor, capacity: int) -> tuple[dict, dict]:
    """The rows each client stores (phase ``batches`` / ``payload`` entries ``rows``, as
    :func:`~algorithms.engine.features.all_rows_phase_parts`): all of them when it has at most
    ``capacity``, else ``capacity`` evenly spaced ones (row ``⌊j n / capacity⌋``)."""
    clients = clients.to(fed.train.counts.device)
    counts, offsets = fed.train.counts[clients], fed.train.offsets[clients]
    keep = counts.clamp(max=capacity)
    m = int(keep.max()) if keep.numel() else 1
    j = torch.minimum(torch.arange(m, device=counts.device)[None, :], (keep - 1)[:, None])
    pos = torch.div(j * counts[:, None], keep[:, None], rounding_mode="floor")
    return {"rows": (offsets[:, None] + pos).unsqueeze(0)}, {"rows": keep}


class KNNPredictor(dict):
    """kNN-Per's personalized predictor as a parameter dict the evaluation accepts: the
    global model's parameters (``[1, ...]``) plus each client's datastore
    (``knn.z [N, M, D]``, ``knn.y [N, M]``, ``knn.n [N]``); :meth:`logits` gives
    ``log(λ p_kNN + (1 − λ) softmax(f_w))``."""

    def __init__(self, params: dict, lam: float, k: int, scale: float, num_classes: int):
        super().__init__(params)
        self.lam, self.k, self.scale, self.num_classes = lam, k, scale, num_classes

    def logits(self, model, rows: dict, x: torch.Tensor) -> torch.Tensor:
        params = {k: v for k, v in rows.items() if not k.startswith("knn.")}
        out = model.forward(params, x)
        p = torch.softmax(out, -1)
        if self.lam > 0:
            z = features(model, params, x)
            knn = knn_probabilities(z, rows["knn.z"], rows["knn.y"], rows["knn.n"], self.k,
                                    self.scale, self.num_classes)
            p = self.lam * knn + (1 - self.lam) * p
        return torch.log(p.clamp(min=torch.finfo(p.dtype).tiny))


@register("knnper")
@dataclass(frozen=True)
class KNNPer(FedAvg):
    """kNN-Per (Marfoq, Neglia, Vidal, Kameni, ICML 2022, arXiv 2111.09360): FedAvg
    training (η = ``lr``, R = ``local_rounds``, |D| = ``batch_size``, S =
    ``clients_per_round``) and the kNN interpolation λ = ``lam`` with k = ``neighbours``
    and kernel scale σ = ``scale``."""

    client_tensors = ("store_z", "store_y", "store_n")

    lam: float = hp(0.5, "interpolation λ of the kNN and global predictions (0: FedAvg)",
                    check=_unit_interval, symbol="λ")
    neighbours: int = hp(10, "number k of nearest neighbours in the datastore",
                         check=positive_int, symbol="k")
    scale: float = hp(1.0, "kernel scale σ: weights exp(-d²/(D·σ))", check=positive, symbol="σ")
    capacity: int = hp(2000, "datastore entries per client at most (evenly spaced rows)",
                       check=positive_int, symbol=NO_SYMBOL)

    def server_init(self, fed, model, seed: int) -> State:
        """FedAvg's initial model and empty datastores (filled by the ``datastore`` phase)."""
        head_keys(model)
        state = FedAvg.init(self, fed, model, seed)
        n, m = fed.num_clients, min(int(fed.train.counts.max()), self.capacity)
        dev = fed.device
        return state.replace(tensors={
            "store_z": torch.zeros(n, m, feature_dim(model), device=dev, dtype=fed.dtype),
            "store_y": torch.zeros(n, m, device=dev, dtype=torch.long),
            "store_n": torch.zeros(n, device=dev, dtype=fed.train.counts.dtype)})

    def init(self, fed, model, seed: int) -> State:
        return initial_state(self, fed, model, seed)

    def init_phase(self, state: State, fed, model) -> Phase:
        batches, payload = datastore_rows(fed, everyone(fed), self.capacity)
        return Phase("datastore", everyone(fed), batches, payload, uploaders=everyone(fed)[:0])

    def client_update(self, phase, model, view):
        """``train``: FedAvg's local SGD; ``datastore``: the features of all own rows."""
        if phase.name != "datastore":
            return super().client_update(phase, model, view)
        x, y, _ = client_rows(view)
        z = features(model, broadcast(view.server["global"], x.shape[0]), x)
        return {"store_z": z, "store_y": y, "store_n": view.payload["rows"]}, {}

    def server_aggregate(self, phase, state, uploads, fed, model):
        if phase.name == "datastore":
            return state, None
        state, _ = super().server_aggregate(phase, state, uploads, fed, model)
        return state, self.init_phase(state, fed, model)

    def evaluated(self, state: State) -> dict:
        w = state.models["global"]
        t = state.tensors
        c = w[[k for k in w if k.endswith("bias")][-1]].shape[-1]   # the last layer's width
        store = {"knn.z": t["store_z"], "knn.y": t["store_y"], "knn.n": t["store_n"]}
        return {"global": w,
                "personalized": KNNPredictor({**w, **store}, self.lam, self.neighbours,
                                             self.scale, c)}

