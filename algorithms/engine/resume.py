"""Where a run directory's run continues: its checkpoint and its history, both checked.

:func:`resume_point` is what ``pflt run --resume`` (and a Python caller) uses to continue a
run.  It trusts nothing it reads:

* the checkpoint (:mod:`algorithms.engine.checkpoint`): its form and digests; the algorithm and
  hyper-parameters, the training seed and the recorded run configuration (data, data seed,
  clients, model, dtype, evaluation period) must be this run's; its state must have the
  names, shapes, dtypes and client count that this run's algorithm, model and federation
  give at the checkpoint's round (``checkpoint_reference``: PPFE's state changes at each
  stage transition);
* the history: ``history.jsonl`` (every evaluation) is read whole, else ``history.json``;
  every evaluation due up to the checkpoint's round must be there.  A history that cannot be
  read whole, or that lacks rounds, is refused — the resumed run rewrites the history files,
  and would otherwise lose those rounds.  A missing or unreadable ``history.json`` is
  rebuilt from ``history.jsonl`` (its round-0 evaluation recomputed: it is deterministic).

Every refusal is a ``ValueError`` (:class:`ResumeError`, :class:`CheckpointError`,
:class:`~algorithms.engine.run_files.RunFileError`) naming the file and the key.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from algorithms.engine.base import State
from algorithms.engine.checkpoint import CheckpointError, check_algorithm, check_layout, read_payload
from algorithms.engine.run_files import (RunFileError, check_history, read_history_lines, read_json)

#: configuration keys that a checkpoint's run and the resuming run must share
#: (``algorithm``/``hyperparameters``/``seed`` are checked on their own; ``rounds`` and
#: ``device`` may change)
SHARED = ("federation", "num_clients", "model", "dtype", "eval_every", "data", "data_seed",
          "model_options")


class ResumeError(ValueError):
    """The run directory cannot be continued without losing or inventing results."""


def _check_config(path: Path, what: str, recorded: dict[str, Any], config: dict[str, Any],
                  keys=SHARED, *, present_only: bool = False) -> None:
    """``recorded`` (a file's configuration) agrees with ``config`` on ``keys`` (in a dict
    such as ``data``, entry by entry); ``present_only``: keys and entries the file lacks
    (written before they existed) are not compared."""
    config = json.loads(json.dumps(config, default=str))   # as recorded: tuples as lists
    for key in keys:
        if key not in config or (present_only and key not in recorded):
            continue
        old, new = recorded.get(key, "<missing>"), config[key]
        if isinstance(old, dict) and isinstance(new, dict):
            subs = [k for k in new if k in old or not present_only]
            subs += [k for k in old if k not in new]
            bad = next((k for k in subs if old.get(k, "<missing>") != new.get(k, "<missing>")),
                       None)
            if bad is None:
                continue
            key, old, new = f"{key}.{bad}", old.get(bad, "<missing>"), new.get(bad, "<missing>")
        elif old == new:
            continue
        raise ResumeError(f"{path}: {what}{key}: {old!r}, this run has {new!r} (options "
                          "changed since it was written?)")


def resume_point(out_dir: str | Path, algorithm, fed, model, *, seed: int,
                 config: dict[str, Any], device=None):
    """``(state, history)`` to continue the run in ``out_dir`` from its checkpoint, or
    ``None`` when it has none.  The temporary files of atomic writes cut short by a kill
    (``.checkpoint.pt.*.tmp`` …) are removed first: the caller is the directory's only
    writer (``pflt run`` holds its lock).  ``config`` is the resuming run's configuration
    (:func:`algorithms.engine.runner.run_config`); the history returned carries it."""
    from algorithms.engine.runner import History, initial_evaluation

    out = Path(out_dir)
    path = out / "checkpoint.pt"
    from pfl_theory.safe_files import remove_temporaries
    for name in ("checkpoint.pt", "history.json", "history.csv", "summary.json"):
        remove_temporaries(out / name)  # a write cut by a kill: never renamed, never read
    if not path.exists():
        return None
    payload = read_payload(path)
    check_algorithm(payload, algorithm, path)
    if payload["seed"] != seed:
        raise CheckpointError(f"{path}: seed: {payload['seed']}, this run has seed {seed}")
    if payload["config"] is not None:
        _check_config(path, "config.", payload["config"], config)
    state = State(payload["round"], payload["seed"],
                  {k: {n: t.to(device) for n, t in v.items()} for k, v in payload["models"].items()},
                  {k: t.to(device) for k, t in payload["tensors"].items()})
    reference = getattr(algorithm, "checkpoint_reference", None)
    reference = (reference(fed, model, seed, state.round) if reference is not None
                 else algorithm.init(fed, model, seed))
    client = [m for m in state.models if getattr(algorithm, "is_client_model", lambda _: False)(m)]
    check_layout(state, reference, path, num_clients=fed.num_clients, client_models=client)
    from algorithms.engine.runner import non_finite_model
    bad = non_finite_model(state)
    if bad is not None:     # the runner stops before checkpointing a non-finite state
        raise CheckpointError(f"{path}: {bad} holds NaN or inf (never checkpointed by a run: "
                              "edited or damaged?)")
    entries, initial = read_entries(out, config)
    entries = [e for e in entries if e["round"] <= state.round]
    every = int(config.get("eval_every", 1))
    missing = sorted(set(range(every, state.round + 1, every)) - {e["round"] for e in entries})
    if missing:
        shown = ", ".join(map(str, missing[:5])) + (" …" if len(missing) > 5 else "")
        raise ResumeError(f"{out}: the history lacks the evaluations of rounds {shown} (the "
                          f"checkpoint is at round {state.round}); resuming would lose them — "
                          "start the run again with --overwrite")
    if initial is None:
        initial = initial_evaluation(algorithm, algorithm.init(fed, model, seed), fed, model)
    check_reproduces(state, entries + [{"round": 0, **initial}], algorithm, fed, model, path)
    return state, History(dict(config), entries, initial)


#: relative tolerance between a test loss recomputed from the checkpoint and the recorded
#: one: the same state evaluated again differs only by the order of float32 reductions
#: (another thread count: ~1e-7 relative); one round of training changes it far more
REPRODUCE_RTOL = 1e-4


def check_reproduces(state: State, entries: list[dict], algorithm, fed, model, path) -> None:
    """The checkpoint's state gives the test losses the history recorded at its round (when
    that round was evaluated; round 0: the initial evaluation): a state from another
    round — a checkpoint whose ``round`` was changed — is refused."""
    from algorithms.engine.runner import initial_evaluation   # the runner's own test evaluation

    entry = next((e for e in entries if e["round"] == state.round), None)
    if entry is None:
        return
    for key, value in initial_evaluation(algorithm, state, fed, model).items():
        if not key.endswith("_loss"):
            continue
        name, recorded = key[:-len("_loss")], entry.get(key)
        if not isinstance(recorded, (int, float)) or recorded != recorded:
            continue
        if abs(value - recorded) > REPRODUCE_RTOL * max(1.0, abs(recorded)):
            raise ResumeError(f"{path}: its state gives {name}_loss {value:.6g} at round "
                              f"{state.round}, the history recorded {recorded:.6g}: the "
                              "checkpoint is not the state of that round (edited?)")


def read_entries(out: Path, config: dict[str, Any]) -> tuple[list[dict], dict | None]:
    """Every recorded evaluation of the run in ``out`` and its round-0 evaluation (None if
    not recorded): ``history.jsonl`` whole, else ``history.json``; ``history.json``'s
    configuration must be this run's when it can be read."""
    lines, whole = out / "history.jsonl", out / "history.json"
    data = None
    if whole.exists():
        try:
            data = check_history(whole, read_json(whole))
        except RunFileError:
            if not lines.exists():
                raise               # nothing else holds the entries
    if data is not None:
        recorded = data["config"]
        _check_config(whole, "config.", recorded, config,      # older files lack some keys
                      SHARED + ("algorithm", "hyperparameters", "seed"), present_only=True)
    entries = read_history_lines(lines) if lines.exists() else (data or {}).get("entries", [])
    initial = (data or {}).get("initial_evaluation") or None
    return entries, initial
