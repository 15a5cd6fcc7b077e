"""One run per output directory: a fresh run never mixes its files with another run's.

A run directory holds the files of :data:`RUN_FILES` (:mod:`algorithms.engine.run_files`).  A run
started afresh (:func:`algorithms.engine.runner.run` without a ``state``; ``pflt run --out DIR``
without ``--resume``) in a directory that holds another run — other algorithm,
hyper-parameters, seed, data, model, … (:data:`IDENTITY`) — is refused with
:class:`RunDirectoryError`: its ``history.*`` would be replaced while that run's checkpoint,
summary and options stayed, and a later resume, ``pflt compare`` or ``select-k --from-run``
would read a mixture.  ``overwrite=True`` (``--overwrite``) removes the earlier run's files
first (only those: nothing else in the directory is touched).

The same run started again from round 0 (the same configuration, e.g. the same command run
twice) replaces its own earlier files: the stale checkpoint and summary are removed before
the first round, so that nothing of the earlier attempt outlives it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: the files a run writes into its directory (the last two by ``pflt run``)
RUN_FILES = ("history.json", "history.jsonl", "history.csv", "checkpoint.pt", "summary.json",
             "run_options.json")
#: the files that say which run a directory holds
RECORDS = ("history.json", "history.jsonl", "checkpoint.pt")
#: the configuration keys that make two runs the same run (``rounds``, ``device`` may differ)
IDENTITY = ("algorithm", "hyperparameters", "seed", "federation", "num_clients", "model",
            "dtype", "eval_every", "data", "data_seed", "model_options")


class RunDirectoryError(ValueError):
    """The output directory holds another run."""


def recorded_config(out: Path) -> dict[str, Any] | None:
    """The configuration recorded in the run directory ``out`` (``history.json``'s, else
    the checkpoint's); ``None`` when neither can be read."""
    from algorithms.engine.checkpoint import CheckpointError, read_payload
    from algorithms.engine.run_files import RunFileError, check_history, read_json

    try:
        return check_history(out / "history.json", read_json(out / "history.json"))["config"]
    except (OSError, RunFileError):
        pass
    try:
        return read_payload(out / "checkpoint.pt")["config"]
    except (OSError, CheckpointError):
        return None


def differences(recorded: dict[str, Any], config: dict[str, Any]
                ) -> list[tuple[str, Any, Any]]:
    """``(key, recorded, this run's)`` for each :data:`IDENTITY` key on which two
    configurations differ (as recorded in JSON); in a dict (hyper-parameters, data), each
    entry that differs (``hyperparameters.lam``)."""
    config = json.loads(json.dumps(config, default=str))
    out = []
    for key in IDENTITY:
        if key not in config or recorded.get(key, "<missing>") == config[key]:
            continue
        old, new = recorded.get(key), config[key]
        if isinstance(old, dict) and isinstance(new, dict):
            out += [(f"{key}.{k}", old.get(k), new.get(k)) for k in sorted(set(old) | set(new))
                    if old.get(k, "<missing>") != new.get(k, "<missing>")]
        else:
            out.append((key, old, new))
    return out


def remove_run_files(out: Path, names=RUN_FILES) -> None:
    for name in names:
        for path in (out / name, out / (name + ".tmp")):
            if path.is_file() or path.is_symlink():
                path.unlink()


def claim_out_dir(out_dir: str | Path, config: dict[str, Any], *, overwrite: bool = False,
                  hint: str = "pass overwrite=True to replace it") -> None:
    """Make ``out_dir`` ready for a fresh run with ``config``: nothing there, the same run
    (its stale checkpoint and summary removed) or, with ``overwrite``, another run's files
    removed; else :class:`RunDirectoryError` naming the first difference and ``hint``."""
    out = Path(out_dir)
    if not out.is_dir():
        return
    for name in RUN_FILES:      # checked before anything is read or removed
        if (out / name).is_symlink():
            raise RunDirectoryError(f"{out / name} is a symbolic link; pflt does not read or "
                                    "write run files through links: remove it or choose "
                                    "another --out")
    if overwrite:
        remove_run_files(out)
        return
    if not any((out / name).exists() for name in RECORDS):
        remove_run_files(out, ("summary.json",))
        return
    recorded = recorded_config(out)
    if recorded is None:
        raise RunDirectoryError(f"{out} holds files of a run that cannot be read (history.json, "
                                f"checkpoint.pt); {hint}, or choose another directory")
    diff = differences(recorded, config)
    if diff:
        key, old, new = diff[0]
        raise RunDirectoryError(f"{out} holds another run ({key}: {_short(old)}, this run: "
                                f"{_short(new)}); {hint}, or choose another directory")
    remove_run_files(out, ("checkpoint.pt", "summary.json"))


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True) if value is not None else "missing"
    return text if len(text) <= 80 else text[:77] + "..."
