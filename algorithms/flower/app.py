"""Module-level Flower apps for a deployment across machines (``flwr run``).

Point a Flower App's ``pyproject.toml`` at them::

    [tool.flwr.app.components]
    serverapp = "algorithms.flower.app:server_app"
    clientapp = "algorithms.flower.app:client_app"

**Run config** (``[tool.flwr.app.config]``, overridable with ``flwr run --run-config``),
read by the server (and by the clients for the data split):

* ``algorithm`` (str), ``num-clients`` (int N), ``rounds`` (int), ``seed`` (int, default 0),
  ``model`` (``mlr``/``dnn``/``cnn``, default ``mlr``), ``hidden`` (int, 0 = model default),
  ``l2`` (float), ``eval-every`` (int, default 1);
* hyper-parameters as ``hp.<field>`` — in TOML a table ``[tool.flwr.app.config.hp]`` with
  ``lam = 15.0`` etc. (Flower flattens it to ``hp.lam``); unset ones take the algorithm's
  defaults;
* ``out-dir`` (str, optional): the server writes ``state.pt`` (the full engine state,
  loadable with ``torch.load(weights_only=True)``; the rows of a client lost for good are
  NaN), ``history.json`` (with the clients left out of any exchange, and the clients that
  came back, under ``failures``) and ``outcome.json`` there — the run's outcome, since
  ``flwr run`` exits 0 whatever happens to the run (:func:`write_outcome`; ``pflt
  flower-outcome OUT`` turns it into an exit status);
* ``timeout`` (float, default 600): seconds the server waits for an exchange's replies; a
  client without a reply by then is *gone* until it answers a handshake again
  (:mod:`algorithms.flower.exchange`); ``poll`` (float, default 0.05): seconds between two
  looks for replies;
* ``checkpoint-every`` (int, optional, needs ``out-dir``): write ``out-dir/checkpoint.pt``
  every k rounds (:mod:`algorithms.engine.checkpoint`); ``resume`` (bool): continue from it;
* data: ``dtype`` (``float32``/``float64``, default ``float32``), ``num-classes`` (int,
  required so that every client agrees), ``train-fraction`` (default 0.75).

**Node config** of each SuperNode (``flower-supernode --node-config '...'``):
``partition-id`` = the client index i ∈ {0 … N−1} and ``data-path`` = a ``.npz`` file with
arrays ``x`` ``[n_i, ...]`` and ``y`` ``[n_i]`` (integer labels).  The client splits it
75/25 with ``Federation.from_client_arrays([x], [y], seed=seed + i)`` — the same split as
client i of ``Federation.from_client_arrays(xs, ys, seed=seed)`` in one process.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import torch
from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from algorithms.flower.client import make_client_app
from algorithms.flower.records import Settings
from algorithms.flower.strategy import DTYPES, run_server
from synthetic.federation import Federation

_RESERVED = {"algorithm", "num-clients", "rounds", "seed", "model", "hidden", "l2",
             "eval-every", "out-dir", "dtype", "num-classes", "train-fraction",
             "checkpoint-every", "resume", "timeout", "poll"}
OUTCOME = "outcome.json"


def write_outcome(out: Path, status: str, *, rounds: int | None = None,
                  failures: list | None = None, error: str | None = None) -> dict:
    """``out/outcome.json``: ``status`` (``completed``, ``completed-with-failures`` — some
    client was left out of some exchange —, or ``failed`` — no result, ``error`` says
    why), the last round, the clients ever left out and those lost at the end."""
    failures = failures or []
    left_out = sorted({i for f in failures if f["phase"] != "rejoin" for i in f["clients"]})
    lost = sorted({i for f in failures if f["phase"] == "collect" for i in f["clients"]})
    outcome = {"status": status, "round": rounds, "clients_left_out": left_out,
               "clients_missing_at_end": lost, "failure_entries": len(failures),
               "error": error}
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / (OUTCOME + ".tmp")
    tmp.write_text(json.dumps(outcome, indent=1))
    os.replace(tmp, out / OUTCOME)
    return outcome


def settings_from_run_config(rc: dict) -> Settings:
    """:class:`Settings` from a flattened Flower run config (see the module doc)."""
    for key in ("algorithm", "num-clients", "rounds"):
        if key not in rc:
            raise ValueError(f"run config needs '{key}' (keys given: {sorted(rc)})")
    unknown = [k for k in rc if k not in _RESERVED and not k.startswith("hp.")]
    if unknown:
        raise ValueError(f"unknown run-config keys {unknown}; known: {sorted(_RESERVED)} and hp.<field>")
    hps = {k[3:]: v for k, v in rc.items() if k.startswith("hp.")}
    settings = Settings(str(rc["algorithm"]), hps, int(rc["num-clients"]), int(rc.get("seed", 0)),
                        str(rc.get("model", "mlr")), int(rc.get("hidden", 0)) or None,
                        float(rc.get("l2", 0.0)))
    algorithm = settings.build_algorithm()     # unknown algorithm / bad hyper-parameter: fail now
    return Settings.of(algorithm, num_clients=settings.num_clients,
                       seed=settings.seed, model=settings.model, hidden=settings.hidden,
                       l2=settings.l2)


def load_client_data(context: Context) -> tuple[int, Federation]:
    """``(i, one-client federation)`` from the node config's ``partition-id`` and ``data-path``."""
    nc, rc = context.node_config, context.run_config
    for key in ("partition-id", "data-path"):
        if key not in nc:
            raise ValueError(f"node config needs '{key}' (start the SuperNode with "
                             f"--node-config 'partition-id=<i> data-path=\"<file>.npz\"')")
    if "num-classes" not in rc:
        raise ValueError("run config needs 'num-classes' so that every client agrees on it")
    path = Path(str(nc["data-path"]))
    if not path.is_file():
        raise FileNotFoundError(f"client data file {path} not found (an .npz with arrays x, y)")
    with np.load(path) as data:
        if "x" not in data or "y" not in data:
            raise ValueError(f"{path} must hold arrays 'x' and 'y', has {sorted(data.files)}")
        x, y = data["x"], data["y"]
    index = int(nc["partition-id"])
    dtype = str(rc.get("dtype", "float32"))
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    fed = Federation.from_client_arrays([x], [y], num_classes=int(rc["num-classes"]),
                                        train_fraction=float(rc.get("train-fraction", 0.75)),
                                        seed=int(rc.get("seed", 0)) + index,
                                        dtype=DTYPES[dtype], name=f"client{index}")
    return index, fed


server_app = ServerApp()


@server_app.main()
def main(grid: Grid, context: Context) -> None:
    rc = dict(context.run_config)
    out = Path(str(rc["out-dir"])) if "out-dir" in rc else None
    from algorithms.engine.runner import DivergenceError
    try:
        serve(grid, rc, out)
    except DivergenceError:         # its outcome (with the round) is written by serve
        raise
    except BaseException as exc:    # the run has no result: say so where the results go
        if out is not None:
            write_outcome(out, "failed", error=f"{type(exc).__name__}: {exc}")
        raise                       # the ServerApp exits non-zero: `flwr ls` shows it failed


def serve(grid: Grid, rc: dict, out: Path | None) -> None:
    settings = settings_from_run_config(rc)
    every = int(rc.get("checkpoint-every", 0)) or None
    if (every or rc.get("resume")) and out is None:
        raise ValueError("checkpoint-every / resume need an out-dir in the run config")
    state = None
    if rc.get("resume"):
        from algorithms.engine.checkpoint import load_checkpoint
        state = load_checkpoint(out / "checkpoint.pt", settings.build_algorithm())
    for result in run_server(grid, [settings], rounds=int(rc["rounds"]),
                             eval_every=int(rc.get("eval-every", 1)), state=state,
                             checkpoint=out / "checkpoint.pt" if every else None,
                             checkpoint_every=every, timeout=float(rc.get("timeout", 600.0)),
                             poll=float(rc.get("poll", 0.05))):
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            tmp = out / "state.pt.tmp"                 # atomic: temp file + rename
            torch.save({"round": result.state.round, "seed": result.state.seed,
                        "models": result.state.models, "tensors": result.state.tensors}, tmp)
            os.replace(tmp, out / "state.pt")
            tmp = out / "history.json.tmp"
            tmp.write_text(json.dumps(
                {"settings": {"algorithm": settings.algorithm,
                              "hyperparameters": settings.hyperparameters},
                 "entries": result.history, "failures": result.failures}, indent=1))
            os.replace(tmp, out / "history.json")
            left_out = any(f["phase"] != "rejoin" for f in result.failures)
            if result.divergence is not None:     # the engine's contract: a failed run
                write_outcome(out, "failed", rounds=result.divergence.round,
                              failures=result.failures,
                              error=f"DivergenceError: {result.divergence}")
            else:
                write_outcome(out, "completed-with-failures" if left_out else "completed",
                              rounds=result.state.round, failures=result.failures)
        if result.divergence is not None:
            raise result.divergence     # the ServerApp fails: `flwr ls` shows it


client_app = make_client_app(load_client_data)
