"""Checkpoints of algorithm states: atomic writes, ``torch.load(weights_only=True)``.

A checkpoint stores the :class:`~algorithms.engine.base.State` (round, seed, parameter dicts,
tensors) plus the algorithm's name and hyper-parameters and the run's configuration (the
data, their seed, the model: ``config``, what :func:`algorithms.engine.runner.run` records).  No
RNG state needs saving: every round's randomness is derived from ``(seed, round)``
(:func:`algorithms.engine.base.round_generator`), so a run resumed from round ``t`` continues
bit-identically.  Files are written to a temporary name and renamed, so a run killed
mid-write leaves the previous checkpoint intact.

Reading one back trusts nothing: :func:`load_checkpoint` checks the form of every key (a
hand-edited or foreign file is a :class:`CheckpointError` naming the file and key), and a
checkpoint written by this version (format 2) carries a SHA-256 digest of each of its
records — round, seed, algorithm, hyper-parameters, configuration and the names, shapes and
dtypes of its tensors — so a record changed by hand (a round set back, a dtype swapped, a
model deleted) is refused by name instead of continuing with wrong results.
:func:`check_layout` checks a loaded state against the state the run's algorithm, model and
federation give (names, shapes, dtypes, client count).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import torch

from algorithms.engine.base import State
from pfl_theory.safe_files import atomic_save

FORMAT = "pfl-theory-checkpoint-2"
FORMATS = ("pfl-theory-checkpoint-1", FORMAT)
#: the records a format-2 checkpoint keeps a digest of
DIGESTED = ("algorithm", "hyperparameters", "round", "seed", "config", "layout")


class CheckpointError(ValueError):
    """The checkpoint is unreadable, edited, or does not belong to the requested run."""


def layout(models: dict, tensors: dict) -> dict[str, Any]:
    """Names, shapes and dtypes of a state's tensors (what the digest of ``layout`` covers)."""
    def one(t):
        return [list(t.shape), str(t.dtype)]
    return {"models": {k: {n: one(t) for n, t in sorted(v.items())} for k, v in sorted(models.items())},
            "tensors": {k: one(t) for k, t in sorted(tensors.items())}}


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def save_checkpoint(path: str | Path, state: State, algorithm,
                    config: dict[str, Any] | None = None) -> Path:
    """Write ``state`` (with ``algorithm``'s name and hyper-parameters and the run's
    ``config``) to ``path`` atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    models = {k: {n: t.detach().cpu() for n, t in v.items()} for k, v in state.models.items()}
    tensors = {k: v.detach().cpu() for k, v in state.tensors.items()}
    records = {"algorithm": getattr(algorithm, "name", type(algorithm).__name__),
               "hyperparameters": json.dumps(dataclasses.asdict(algorithm), sort_keys=True),
               "round": int(state.round), "seed": int(state.seed),
               "config": json.dumps(config, sort_keys=True, default=str),
               "layout": layout(models, tensors)}
    payload = {"format": FORMAT, **{k: v for k, v in records.items() if k != "layout"},
               "models": models, "tensors": tensors,
               "digests": {k: _digest(records[k]) for k in DIGESTED}}
    # temp file + rename (never through a link); a full disk is the OSError, no temporary
    return atomic_save(path, lambda fh: torch.save(payload, fh))


def _need(path, payload: dict, key: str, kind: type) -> Any:
    if key not in payload:
        raise CheckpointError(f"{path}: {key}: missing (not a complete checkpoint)")
    value = payload[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise CheckpointError(f"{path}: {key}: expected {kind.__name__}, got "
                              f"{type(value).__name__}")
    return value


def _tensor_dict(path, value: Any, key: str) -> dict[str, torch.Tensor]:
    if not isinstance(value, dict):
        raise CheckpointError(f"{path}: {key}: expected a dict of tensors, got "
                              f"{type(value).__name__}")
    for name, t in value.items():
        if not isinstance(name, str) or not isinstance(t, torch.Tensor):
            raise CheckpointError(f"{path}: {key}.{name}: expected a tensor, got "
                                  f"{type(t).__name__}")
    return value


def read_payload(path: str | Path) -> dict[str, Any]:
    """The checkpoint's records, each checked for its form (and, in format 2, against its
    digest); ``config`` and ``hyperparameters`` decoded (``config`` ``None`` when not
    recorded)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:   # empty, random bytes, truncated, or a pickle that weights_only refuses
        # (torch's own text ends in advice to load the file with weights_only=False: never
        # for a file that may be hostile, so it is not passed on)
        raise CheckpointError(f"{path}: refused: not a pfl-theory checkpoint (unsafe or "
                              f"damaged; {_size(path)})") from None
    if not isinstance(payload, dict) or payload.get("format") not in FORMATS:
        raise CheckpointError(f"{path}: refused: not a pfl-theory checkpoint (a torch file "
                              "without its records)")
    out = {"format": payload["format"], "algorithm": _need(path, payload, "algorithm", str),
           "round": _need(path, payload, "round", int), "seed": _need(path, payload, "seed", int)}
    if out["round"] < 0:
        raise CheckpointError(f"{path}: round: must be >= 0, got {out['round']}")
    hp_text = _need(path, payload, "hyperparameters", str)
    models = _need(path, payload, "models", dict)
    for name, params in models.items():
        _tensor_dict(path, params, f"models.{name}")
    out["models"] = models
    out["tensors"] = _tensor_dict(path, _need(path, payload, "tensors", dict), "tensors")
    config_text = "null"
    if payload["format"] == FORMAT:
        config_text = _need(path, payload, "config", str)
        digests = _need(path, payload, "digests", dict)
        records = {"algorithm": out["algorithm"], "hyperparameters": hp_text,
                   "round": out["round"], "seed": out["seed"], "config": config_text,
                   "layout": layout(models, out["tensors"])}
        for key in DIGESTED:
            if digests.get(key) != _digest(records[key]):
                raise CheckpointError(f"{path}: {key}: does not match the digest written with "
                                      "the checkpoint (edited by hand or damaged?)")
    for key, text in (("hyperparameters", hp_text), ("config", config_text)):
        try:
            out[key] = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            raise CheckpointError(f"{path}: {key}: not valid JSON") from None
    if not isinstance(out["hyperparameters"], dict):
        raise CheckpointError(f"{path}: hyperparameters: expected a JSON object")
    if out["config"] is not None and not isinstance(out["config"], dict):
        raise CheckpointError(f"{path}: config: expected a JSON object")
    return out


def _size(path: Path) -> str:
    try:
        n = path.stat().st_size
    except OSError:
        return "unreadable"
    return "empty" if n == 0 else f"{n} bytes"


def load_checkpoint(path: str | Path, algorithm=None, *, device=None) -> State:
    """The state in ``path``; with ``algorithm`` given, its name and hyper-parameters must
    match the checkpoint's (else :class:`CheckpointError`)."""
    payload = read_payload(path)
    if algorithm is not None:
        check_algorithm(payload, algorithm, path)
    models = {k: {n: t.to(device) for n, t in v.items()} for k, v in payload["models"].items()}
    tensors = {k: v.to(device) for k, v in payload["tensors"].items()}
    return State(payload["round"], payload["seed"], models, tensors)


def check_algorithm(payload: dict, algorithm, path) -> None:
    """The checkpoint (:func:`read_payload`) was written by ``algorithm`` (name and
    hyper-parameters)."""
    name = getattr(algorithm, "name", type(algorithm).__name__)
    if payload["algorithm"] != name:
        raise CheckpointError(f"checkpoint {path} is from algorithm "
                              f"{payload['algorithm']!r}, not {name!r}")
    mine = json.loads(json.dumps(dataclasses.asdict(algorithm), sort_keys=True))
    if payload["hyperparameters"] != mine:
        diff = sorted(k for k in set(mine) | set(payload["hyperparameters"])
                      if mine.get(k) != payload["hyperparameters"].get(k))
        raise CheckpointError(f"checkpoint {path} has other hyper-parameters than this run: "
                              + ", ".join(f"{k}={payload['hyperparameters'].get(k)!r} "
                                          f"(run: {mine.get(k)!r})" for k in diff))


def _rows(t: torch.Tensor) -> int | None:
    return t.shape[0] if t.dim() else None


def check_layout(state: State, reference: State, path: str | Path = "checkpoint", *,
                 num_clients: int | None = None, client_models=()) -> None:
    """``state`` (loaded) fits ``reference`` (the state the run's algorithm, federation and
    model give at the checkpoint's round: ``checkpoint_reference``): the same models with
    the same parameter names, per-row shapes and dtypes; the reference's tensors, with their
    dtypes and per-row shapes; ``num_clients`` rows wherever the reference has that many
    and in every model named in ``client_models``.  A leading dimension other than N may
    differ (contexts evolve); else :class:`CheckpointError` naming the first mismatch."""
    if set(state.models) != set(reference.models):
        raise CheckpointError(f"{path} holds models {sorted(state.models)}, this run at round "
                              f"{state.round} has {sorted(reference.models)}")
    items = [(f"{m}.{k}", state.models[m].get(k), t, m in client_models)
             for m in reference.models for k, t in reference.models[m].items()]
    for m in reference.models:
        if set(state.models[m]) != set(reference.models[m]):
            raise CheckpointError(f"{path}: model {m!r} has parameters {sorted(state.models[m])}, "
                                  f"this run's model has {sorted(reference.models[m])}")
    for name, t in reference.tensors.items():
        if name not in state.tensors:
            raise CheckpointError(f"{path}: tensors.{name}: missing")
        items.append((name, state.tensors[name], t, False))
    for name, got, want, per_client in items:
        if got.dtype != want.dtype:
            raise CheckpointError(f"{path}: {name} has dtype {got.dtype}, this run needs "
                                  f"{want.dtype} (another --dtype?)")
        if got.dim() != want.dim() or tuple(got.shape[1:]) != tuple(want.shape[1:]):
            raise CheckpointError(
                f"{path}: {name} has shape {tuple(got.shape)}, this run's model needs "
                f"{tuple(want.shape)} (another --model, --hidden or --data?)")
        if num_clients is not None and (per_client or _rows(want) == num_clients) \
                and _rows(got) != num_clients:
            raise CheckpointError(f"{path}: {name} has {_rows(got)} rows, this run has "
                                  f"{num_clients} clients (another --clients?)")
        if _rows(got) == 0 and _rows(want) != 0:
            raise CheckpointError(f"{path}: {name} is empty")
    for name, t in state.tensors.items():
        if t.is_floating_point() and name not in reference.tensors \
                and t.dtype != next(iter(_floats(reference)), t).dtype:
            raise CheckpointError(f"{path}: tensors.{name} has dtype {t.dtype}, this run's "
                                  f"are {next(iter(_floats(reference))).dtype}")


def _floats(state: State):
    for params in state.models.values():
        yield from (t for t in params.values() if t.is_floating_point())
    yield from (t for t in state.tensors.values() if t.is_floating_point())


check_compatible = check_layout  # the former name
