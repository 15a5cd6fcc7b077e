"""Reading a finished or checkpointed ``pflt run --out DIR`` for ``select-k`` / ``select-stages``.

What a run directory holds (:mod:`pflt.commands.run`, :mod:`algorithms.engine.runner`):
``run_options.json`` (the data / model options), ``history.json`` / ``history.jsonl``
(evaluations and diagnostics per round) and, with ``--checkpoint-every``, ``checkpoint.pt`` (the algorithm's
state: every client's models; :mod:`algorithms.engine.checkpoint`).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from pflt.cli import UserError


def _dir(path: Path) -> Path:
    path = Path(path)
    if not path.is_dir():
        raise UserError(f"--from-run: no run directory at {path}")
    return path


def run_models(path: Path, key: str | None = None) -> tuple[np.ndarray, dict]:
    """Client models ``[N, d]`` (float64) of the checkpoint in ``path`` and a description
    (``source``, ``models_key``, ``round``, ``algorithm``, ``hyperparameters``).  ``key``
    picks the state's model set; default ``personalized`` (the Θ* of CGPFL's cost), else
    ``local``; a checkpoint with neither (FedAvg's one global model, PPFE's body and heads)
    or a set without one row per client is refused with a one-line error."""
    from algorithms.engine.base import flatten
    from algorithms.engine.checkpoint import CheckpointError, load_checkpoint, read_payload

    ckpt = _dir(path) / "checkpoint.pt"
    if not ckpt.is_file():
        raise UserError(f"--from-run: {ckpt} not found; the client models are only saved by "
                        "`pflt run --checkpoint-every K`")
    try:
        payload = read_payload(ckpt)
        state = load_checkpoint(ckpt)
    except CheckpointError as exc:
        raise UserError(str(exc)) from None
    names = list(state.models)
    if key is None:
        key = next((k for k in ("personalized", "local") if k in names), None)
        if key is None:
            raise UserError(f"--from-run: {ckpt} ({payload['algorithm']}) holds no per-client "
                            f"'personalized' or 'local' models (it has {', '.join(names)}); "
                            "pass --models-key NAME to cluster one of them")
    if key not in state.models:
        raise UserError(f"--models-key {key!r} is not in the checkpoint; it has {names}")
    params = state.models[key]
    rows = next(iter(params.values())).shape[0] if params else 0
    if rows < 2:
        raise UserError(f"--from-run: {ckpt}: {payload['algorithm']}'s {key!r} holds "
                        f"{rows} model(s), not one per client: nothing to cluster")
    x = flatten(params).detach().cpu().double().numpy()
    info = {"source": str(ckpt), "models_key": key, "round": int(state.round),
            "algorithm": payload["algorithm"], "hyperparameters": payload["hyperparameters"]}
    return x, info


def run_data(path: Path):
    """The run's federation, rebuilt on the CPU by :func:`run_federation` (None if
    ``run_options.json`` is missing or the data cannot be rebuilt)."""
    try:
        return run_federation(path)[0]
    except Exception:  # missing, older or foreign options file: the caller falls back
        return None


def run_client_sizes(path: Path) -> np.ndarray | None:
    """Training samples per client of the run's federation (:func:`run_data`), or
    None when it cannot be rebuilt."""
    fed = run_data(path)
    return None if fed is None else fed.train.counts.cpu().double().numpy()


def run_history(path: Path) -> list[dict]:
    """The entries of the run's history (one per evaluation; ``history.json`` with
    ``history.jsonl``, :func:`algorithms.engine.run_files.read_history`)."""
    from algorithms.engine.run_files import read_history

    f = _dir(path) / "history.json"
    if not f.is_file():
        raise UserError(f"--from-run: {f} not found")
    try:
        data = read_history(f.parent)
    except ValueError as exc:
        raise UserError(f"--from-run: {exc}") from None
    entries = data.get("entries", data) if isinstance(data, dict) else data
    if not isinstance(entries, list):
        raise UserError(f"--from-run: {f} has no list of entries")
    return entries


def run_federation(path: Path, *, dtype=None, algorithm: str = "cgpfl"):
    """``(federation, model, hyper-parameters, description)`` rebuilt from the run's
    ``run_options.json`` (the data, split and model of the run, on the CPU).  The
    hyper-parameters of ``algorithm`` (``cgpfl``: CGPFL's, without ``num_contexts``; ``ppfe``:
    PPFE's) are the run's own when it trained that algorithm (for CGPFL: ``cgpfl`` or
    ``cgpfl-heur``; its ``hp_*`` options), else the algorithm's defaults (``{}``).  The
    description has the run's ``algorithm`` and training ``seed``."""
    import torch

    from algorithms.engine.base import get_algorithm, hyperparameters
    from algorithms.engine.models import build_model
    from pflt.commands import run_options as opts
    from synthetic.sources import build_federation

    f = _dir(path) / "run_options.json"
    if not f.is_file():
        raise UserError(f"--from-run: {f} not found (it rebuilds the clients' data)")
    options = opts.read_saved(f)        # its form, key by key (one line naming the key)
    try:
        dt = dtype or (torch.float64 if options.get("dtype") == "float64" else torch.float32)
        fed = build_federation(opts.data_spec(options), device="cpu", dtype=dt)
        model = build_model(options["model"], fed, hidden=options.get("hidden"),
                            l2=options.get("l2", 0.0))
    except (KeyError, TypeError, ValueError, json.JSONDecodeError) as exc:
        raise UserError(f"--from-run: cannot rebuild the run's data from {f}: {exc}") from None
    names = {fl.name for fl in hyperparameters(get_algorithm(algorithm))} - {"num_contexts"}
    same = ("cgpfl", "cgpfl-heur") if algorithm == "cgpfl" else (algorithm,)
    hp = {}
    if options.get("algorithm") in same:
        hp = {k[3:]: v for k, v in options.items()
              if k.startswith("hp_") and v is not None and k[3:] in names}
    info = {"source": str(f), "algorithm": options.get("algorithm"), "clients": fed.num_clients,
            "hyperparameters": hp or f"{algorithm.upper()} defaults"}
    if algorithm != "cgpfl":
        info["seed"] = options.get("seed", 0)
    return fed, model, hp, info
