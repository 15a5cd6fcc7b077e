"""Checkpoints of algorithm states: atomic writes, ``torch.load(weights_only=True)``.

A checkpoint stores the :class:`~algorithms.base.State` (round, seed, parameter dicts,
tensors) plus the algorithm's name and hyper-parameters.  No RNG state needs saving: every
round's randomness is derived from ``(seed, round)`` (:func:`algorithms.base.round_generator`),
so a run resumed from round ``t`` continues bit-identically.  Files are written to a
temporary name and renamed, so a run killed mid-write leaves the previous checkpoint intact.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import torch

from algorithms.base import State
from pfl_theory.safe_files import atomic_save


class CheckpointError(ValueError):
    """The checkpoint is unreadable or does not belong to the requested algorithm."""


def save_checkpoint(path: str | Path, state: State, algorithm) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": "pfl-theory-checkpoint-1",
        "algorithm": getattr(algorithm, "name", type(algorithm).__name__),
        "hyperparameters": json.dumps(dataclasses.asdict(algorithm), sort_keys=True),
        "round": int(state.round), "seed": int(state.seed),
        "models": {k: {n: t.detach().cpu() for n, t in v.items()} for k, v in state.models.items()},
        "tensors": {k: v.detach().cpu() for k, v in state.tensors.items()},
    }
    # temp file + rename (never through a link); a full disk is the OSError, no temporary
    return atomic_save(path, lambda fh: torch.save(payload, fh))


def load_checkpoint(path: str | Path, algorithm=None, *, device=None) -> State:
    """The state in ``path``; with ``algorithm`` given, its name and hyper-parameters must
    match the checkpoint's (else :class:`CheckpointError`)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # corrupt, truncated, or not a torch file
        raise CheckpointError(f"cannot read checkpoint {path}: {exc}") from None
    if not isinstance(payload, dict) or payload.get("format") != "pfl-theory-checkpoint-1":
        raise CheckpointError(f"{path} is not a pfl-theory checkpoint")
    if algorithm is not None:
        name = getattr(algorithm, "name", type(algorithm).__name__)
        if payload["algorithm"] != name:
            raise CheckpointError(f"checkpoint {path} is from algorithm "
                                  f"{payload['algorithm']!r}, not {name!r}")
        mine = json.dumps(dataclasses.asdict(algorithm), sort_keys=True)
        if payload["hyperparameters"] != mine:
            raise CheckpointError(f"checkpoint {path} has hyper-parameters "
                                  f"{payload['hyperparameters']}, not {mine}")
    models = {k: {n: t.to(device) for n, t in v.items()} for k, v in payload["models"].items()}
    tensors = {k: v.to(device) for k, v in payload["tensors"].items()}
    return State(int(payload["round"]), int(payload["seed"]), models, tensors)


def check_compatible(state: State, reference: State, path: str | Path = "checkpoint") -> None:
    """``state`` (loaded) fits ``reference`` (a fresh ``algorithm.init`` on the same
    federation and model): every model both hold has the same parameter names and per-row
    shapes (the leading dimension — N clients, K contexts, 1 — may differ, as contexts and
    stages evolve), else :class:`CheckpointError` naming the first mismatch."""
    shared = [name for name in reference.models if name in state.models]
    if not shared:
        raise CheckpointError(f"{path} holds models {sorted(state.models)}, this run has "
                              f"{sorted(reference.models)}")
    for name in shared:
        got, want = state.models[name], reference.models[name]
        if set(got) != set(want):
            raise CheckpointError(f"{path}: model {name!r} has parameters {sorted(got)}, "
                                  f"this run's model has {sorted(want)}")
        for k, t in want.items():
            if tuple(got[k].shape[1:]) != tuple(t.shape[1:]) or got[k].dim() != t.dim():
                raise CheckpointError(
                    f"{path}: {name}.{k} has shape {tuple(got[k].shape)}, this run's model "
                    f"needs {tuple(t.shape)} (another --model, --hidden or --data?)")
