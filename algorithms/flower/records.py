"""Engine objects ↔ Flower records (``ArrayRecord`` / ``ConfigRecord``).

* Several named parameter dicts (and plain named tensors, under their bare name) travel in
  ONE ``ArrayRecord`` under keys ``"model/param"``
  (``{"context": {"fc.weight": [K, d, C]}}`` → ``"context/fc.weight"``; an empty dict is
  kept as ``"model/"``, a zero-size marker): CGPFL's K
  context models are one record whose arrays keep their leading ``[K, ...]`` dimension;
  a global model keeps its ``[1, ...]`` row, a client's own row of a per-client model is
  ``[1, ...]`` too.  Arrays cross the wire as numpy (dtype kept: float64 stays float64,
  int64 stays int64) and come back as tensors on the requested device.
* Run settings (algorithm name, hyper-parameters, model options, seed, N) are a flat
  ``ConfigRecord``: hyper-parameters under ``"hp.<field>"``; ``None`` (e.g. ``hidden``) is
  left out, since Flower config values cannot be ``None``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from flwr.app import ArrayRecord, ConfigRecord

from algorithms.engine.base import Params

SEP = "/"


def pack(models: dict[str, "Params | torch.Tensor"]) -> ArrayRecord:
    """One ``ArrayRecord`` holding every parameter of every named model and every named
    tensor (CPU copies)."""
    flat = {}
    for name, params in models.items():
        if SEP in name:
            raise ValueError(f"model name {name!r} must not contain {SEP!r}")
        if isinstance(params, torch.Tensor):
            flat[name] = params.detach().cpu().contiguous()
            continue
        if not params:
            flat[f"{name}{SEP}"] = torch.zeros(0)
        for key, value in params.items():
            flat[f"{name}{SEP}{key}"] = value.detach().cpu().contiguous()
    return ArrayRecord(flat)


def unpack(record: ArrayRecord, *, device=None) -> dict[str, "Params | torch.Tensor"]:
    """Inverse of :func:`pack` (tensors on ``device``; dtypes as sent)."""
    models: dict = {}
    for flat, value in record.to_torch_state_dict().items():
        name, sep, key = flat.partition(SEP)
        if not sep:
            models[name] = value.to(device)
        elif not key:
            models.setdefault(name, {})
        else:
            models.setdefault(name, {})[key] = value.to(device)
    return models


def tensors_record(tensors: dict[str, torch.Tensor]) -> ArrayRecord:
    """Plain named tensors (batch indices, a client's row of the assignment, …)."""
    return ArrayRecord({k: v.detach().cpu().contiguous() for k, v in tensors.items()})


def tensors_from(record: ArrayRecord, *, device=None) -> dict[str, torch.Tensor]:
    return {k: v.to(device) for k, v in record.to_torch_state_dict().items()}


def stack_rows(rows: list) -> "Params | torch.Tensor":
    """``[1, ...]`` parameter dicts (or tensors) of several clients → ``[n, ...]`` (list order)."""
    if not rows:
        raise ValueError("no client rows to stack")
    if isinstance(rows[0], torch.Tensor):
        return torch.cat(rows, dim=0)
    return {k: torch.cat([r[k] for r in rows], dim=0) for k in rows[0]}


def row(params: "Params | torch.Tensor", i: int, axis: int = 0):
    """Row ``i`` (along ``axis``) of ``[N, ...]`` parameters or a tensor, keeping the axis."""
    if isinstance(params, torch.Tensor):
        return params.narrow(axis, i, 1)
    return {k: v.narrow(axis, i, 1) for k, v in params.items()}


def counts_federation(train_counts, *, feature_shape, num_classes: int, dtype,
                      device="cpu", name: str = "flower-server"):
    """A data-free federation with the clients' train counts: what the server needs to draw
    the engine's mini-batch indices and sample weights.  Features are one zero row
    broadcast (no memory), so gathers work and ``feature_shape`` sizes the model."""
    from synthetic.federation import Federation, Split

    counts = torch.as_tensor(train_counts, dtype=torch.long, device=device)
    if counts.ndim != 1 or counts.numel() == 0 or bool((counts < 1).any()):
        raise ValueError(f"train counts must be a non-empty list of positive ints, got {train_counts}")
    offsets = torch.cumsum(counts, 0) - counts
    m = int(counts.sum())
    x = torch.zeros((1, *feature_shape), dtype=dtype, device=device).expand(m, *feature_shape)
    y = torch.zeros(1, dtype=torch.long, device=device).expand(m)
    split = Split(x, y, offsets, counts)
    return Federation(split, split, int(num_classes), name)


# ---- run settings ------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Settings:
    """What server and clients must agree on: the algorithm, its hyper-parameters, the
    model, the run seed and the number of clients ``N`` (client indices ``0 … N−1``)."""

    algorithm: str
    hyperparameters: dict[str, Any]
    num_clients: int
    seed: int = 0
    model: str = "mlr"
    hidden: int | None = None
    l2: float = 0.0

    def build_algorithm(self):
        from algorithms.engine.base import get_algorithm
        return get_algorithm(self.algorithm)(**self.hyperparameters)

    def build_model(self, federation):
        from algorithms.engine.models import build_model
        return build_model(self.model, federation, hidden=self.hidden, l2=self.l2)

    def to_record(self) -> ConfigRecord:
        rec: dict[str, Any] = {"algorithm": self.algorithm, "num_clients": self.num_clients,
                               "seed": self.seed, "model": self.model, "l2": float(self.l2)}
        if self.hidden is not None:
            rec["hidden"] = int(self.hidden)
        for k, v in self.hyperparameters.items():
            if v is None:
                raise ValueError(f"hyper-parameter {k!r} is None; Flower config values cannot be None")
            rec[f"hp.{k}"] = v
        return ConfigRecord(rec)

    @staticmethod
    def from_record(record: ConfigRecord) -> "Settings":
        rec = dict(record)
        hps = {k[3:]: v for k, v in rec.items() if k.startswith("hp.")}
        return Settings(str(rec["algorithm"]), hps, int(rec["num_clients"]), int(rec["seed"]),
                        str(rec["model"]), int(rec["hidden"]) if "hidden" in rec else None,
                        float(rec["l2"]))

    @staticmethod
    def of(algorithm, *, num_clients: int, seed: int = 0, model: str = "mlr",
           hidden: int | None = None, l2: float = 0.0) -> "Settings":
        """Settings of an algorithm *instance* (its dataclass fields are the hyper-parameters)."""
        from algorithms.engine.base import hyperparameters
        hps = {f.name: getattr(algorithm, f.name) for f in hyperparameters(type(algorithm))}
        return Settings(algorithm.name, hps, int(num_clients), int(seed), model, hidden, l2)
