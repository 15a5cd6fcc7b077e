"""Each supported algorithm's round split into client update and server step, by calling the
batched engine's own code with N = 1 on a client (no re-implementation); needs no Flower.

The engine runs round ``t`` of every algorithm as: draw the mini-batch indices of all
clients and the sampled clients from ``state.generator()``; run the local update of the
training clients (batched over them); aggregate on the server.  Under Flower a client
holds only its own data, so a *split* provides

* ``draw(alg, state, fed)`` → :class:`Plan`: the SAME draws as the engine's ``round``
  (same generator, same call order: ``fed.sample_batches`` then
  :func:`algorithms.base.sample_clients`), with each client's indices made local to its
  own training split.  The server draws them from a data-free :func:`counts_federation`
  (only the clients' train counts are needed) and sends client ``i`` its ``[R, B]`` rows;
* ``client_update(alg, model, view, x, y, num_clients)`` → ``(upload, kept)``: the
  algorithm's local update for ONE client (``view`` = the server models, the client's rows
  of per-client tensors and its own per-client models, all with leading dimension 1);
* ``server_update(alg, state, fed, model, plan, uploads)`` → the next server state, with
  the engine's aggregation applied to the uploads stacked in ascending client order.

The server state holds the models in ``server_models`` (and all ``state.tensors``); the
models named in ``client_models`` live on the clients (Flower ``context.state``).
Reused engine code per algorithm:

* FedAvg — :func:`algorithms.steps.local_sgd`, :func:`algorithms.base.weighted_mean`.
* pFedMe — ``PFedMe.local_update`` and ``PFedMe.aggregate`` (all clients train, the sampled
  ``S`` upload).
* Ditto — :meth:`algorithms.ditto.Ditto.local_update` (global SGD steps + one personal prox
  step per batch), ``weighted_mean``.
* FedRep / FedPer / LG-FedAvg — ``_Decoupled.local_update``,
  :func:`algorithms.decoupled.aggregate`.
* CGPFL / CGPFL-Heur — ``_CGPFLBase.local_update`` (with ``local_scale`` set explicitly to
  the engine's ``step_scale(N)`` when it is 0, since the method reads N from its batch,
  and ``c = 2/N`` in the paper's reading) and the algorithm's
  own ``round`` for the server step, fed the clients' uploads in place of its local
  update (:func:`_with_uploads`); k-means runs on the server via :mod:`pfl_theory.kmeans`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from algorithms.base import Params, State, broadcast, sample_clients, select, weighted_mean
from algorithms.steps import local_sgd
from synthetic.federation import Federation, Split


@dataclass(frozen=True)
class Plan:
    """Round ``t``'s draws: ``batches[R, N, B]`` client-local train indices (CPU),
    ``train`` the clients running the local update, ``upload`` those aggregated (sorted)."""

    batches: torch.Tensor
    train: torch.Tensor
    upload: torch.Tensor


def counts_federation(train_counts, *, feature_shape, num_classes: int, dtype,
                      device="cpu", name: str = "flower-server") -> Federation:
    """A data-free federation with the clients' train counts: what the server needs to draw
    the engine's mini-batch indices and sample weights.  Features are one zero row
    broadcast (no memory), so gathers work and ``feature_shape`` sizes the model."""
    counts = torch.as_tensor(train_counts, dtype=torch.long, device=device)
    if counts.ndim != 1 or counts.numel() == 0 or bool((counts < 1).any()):
        raise ValueError(f"train counts must be a non-empty list of positive ints, got {train_counts}")
    offsets = torch.cumsum(counts, 0) - counts
    m = int(counts.sum())
    x = torch.zeros((1, *feature_shape), dtype=dtype, device=device).expand(m, *feature_shape)
    y = torch.zeros(1, dtype=torch.long, device=device).expand(m)
    split = Split(x, y, offsets, counts)
    return Federation(split, split, int(num_classes), name)


def client_batch(fed: Federation, local_index: torch.Tensor):
    """``(x [R, 1, B, ...], y)`` of a one-client federation for local indices ``[R, B]``."""
    idx = local_index.to(fed.device)[:, None, :] + fed.train.offsets[0]
    return fed.train.gather(idx)


class AlgorithmSplit:
    """Default: FedAvg-style sampling (S clients train and upload)."""

    client_models: tuple[str, ...] = ()
    client_tensors: tuple[str, ...] = ()

    def steps(self, alg) -> int:
        return alg.local_rounds

    def draw(self, alg, state: State, fed: Federation) -> Plan:
        gen = state.generator()
        batches = fed.sample_batches(self.steps(alg), alg.batch_size, gen).cpu()
        local = batches - fed.train.offsets.cpu()[None, :, None]
        chosen = sample_clients(fed.num_clients, alg.clients_per_round, gen)
        return Plan(local, self._trainers(chosen, fed.num_clients), chosen)

    def _trainers(self, chosen: torch.Tensor, n: int) -> torch.Tensor:
        return chosen

    def server_state(self, state: State) -> State:
        """``state`` without the per-client models (those live on the clients)."""
        return state.replace(models={k: v for k, v in state.models.items()
                                     if k not in self.client_models})

    def client_update(self, alg, model, view: State, x, y, num_clients: int):
        raise NotImplementedError

    def server_update(self, alg, state: State, fed, model, plan: Plan,
                      uploads: dict[str, Params]) -> State:
        raise NotImplementedError


class FedAvgSplit(AlgorithmSplit):
    def client_update(self, alg, model, view, x, y, num_clients):
        w = local_sgd(model, broadcast(view.models["global"], 1), x, y, alg.lr)
        return {"global": w}, {}

    def server_update(self, alg, state, fed, model, plan, uploads):
        counts = fed.train.counts[plan.upload.to(fed.device)]
        return state.next({"global": weighted_mean(uploads["global"], counts)})


class PFedMeSplit(AlgorithmSplit):
    client_models = ("personalized", "local")

    def _trainers(self, chosen, n):
        return torch.arange(n)            # every client trains; the S sampled are aggregated

    def client_update(self, alg, model, view, x, y, num_clients):
        theta, w_loc = alg.local_update(model, view.models["global"], x, y)
        return {"local": w_loc}, {"personalized": theta, "local": w_loc}

    def server_update(self, alg, state, fed, model, plan, uploads):
        counts = fed.train.counts[plan.upload.to(fed.device)]
        rows = torch.arange(plan.upload.numel(), device=fed.device)
        w_new = alg.aggregate(state.models["global"], uploads["local"], rows, counts)
        return state.next({"global": w_new})


class DittoSplit(AlgorithmSplit):
    client_models = ("personalized",)

    def client_update(self, alg, model, view, x, y, num_clients):
        w, v = alg.local_update(model, view.models["global"], view.models["personalized"], x, y)
        return {"global": w}, {"personalized": v}

    server_update = FedAvgSplit.server_update


class DecoupledSplit(AlgorithmSplit):
    client_models = ("personal",)

    def steps(self, alg):
        return alg.steps_per_round

    def client_update(self, alg, model, view, x, y, num_clients):
        from algorithms.decoupled import merge, subset

        shared, personal = view.models["shared"], view.models["personal"]
        params = merge(shared, personal, n=1)
        params = alg.local_update(model, params, x, y, list(shared), list(personal))
        return {"shared": subset(params, shared)}, {"personal": subset(params, personal)}

    def server_update(self, alg, state, fed, model, plan, uploads):
        from algorithms.decoupled import aggregate

        counts = fed.train.counts[plan.upload.to(fed.device)]
        return state.next({"shared": aggregate(uploads.get("shared", {}), counts,
                                               alg.aggregation)})


class CGPFLSplit(AlgorithmSplit):
    client_models = ("personalized", "local")
    client_tensors = ("assignment",)

    def draw(self, alg, state, fed):
        batches = fed.sample_batches(alg.local_rounds, alg.batch_size, state.generator()).cpu()
        everyone = torch.arange(fed.num_clients)
        return Plan(batches - fed.train.offsets.cpu()[None, :, None], everyone, everyone)

    @staticmethod
    def _needs_theta(alg) -> bool:
        return getattr(alg, "select_on", "uploads") == "personalized"

    def client_update(self, alg, model, view, x, y, num_clients):
        if alg.local_scale == 0:     # c may depend on N (c = 2/N): fix it for the whole federation
            alg = dataclasses.replace(alg, local_scale=alg.step_scale(num_clients))
        omega_i0 = select(view.models["context"], view.tensors["assignment"])
        first, theta, w = alg.local_update(model, omega_i0, x, y)
        upload = {"local": w, "first": first}
        if self._needs_theta(alg):
            upload["personalized"] = theta
        return upload, {"personalized": theta, "local": w}

    def server_update(self, alg, state, fed, model, plan, uploads):
        theta = uploads["personalized"] if self._needs_theta(alg) else uploads["local"]
        injected = _with_uploads(alg, (uploads["first"], theta, uploads["local"]))
        return self.server_state(injected.round(state, fed, model))


def _with_uploads(alg, result):
    """``alg`` whose ``local_update`` returns the clients' ``result`` instead of computing
    it, so the algorithm's own ``round`` performs the server step on the uploads."""
    cls = type(alg)
    sub = type(f"{cls.__name__}FromUploads", (cls,),
               {"local_update": lambda self, model, omega_i0, x, y: result})
    return sub(**{f.name: getattr(alg, f.name) for f in dataclasses.fields(alg) if f.init})


SPLITS: dict[str, AlgorithmSplit] = {
    "fedavg": FedAvgSplit(), "pfedme": PFedMeSplit(), "ditto": DittoSplit(),
    "fedrep": DecoupledSplit(), "fedper": DecoupledSplit(), "lgfedavg": DecoupledSplit(),
    "cgpfl": CGPFLSplit(), "cgpfl-heur": CGPFLSplit(),
}


def get_split(name: str) -> AlgorithmSplit:
    if name not in SPLITS:
        raise ValueError(f"algorithm {name!r} is not supported under Flower; supported: "
                         f"{', '.join(SPLITS)}")
    return SPLITS[name]


def client_view(state: State, split: AlgorithmSplit, i: int, kept: dict[str, Params]) -> State:
    """The one-client state of client ``i``: server models, row ``i`` of the per-client
    tensors, and the client's own per-client models ``kept`` (each ``[1, ...]``)."""
    tensors = {k: v[i:i + 1] for k, v in state.tensors.items() if k in split.client_tensors}
    return State(state.round, state.seed, {**state.models, **kept}, tensors)
