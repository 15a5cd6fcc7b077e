"""What ``pflt run`` stores with a run and reads back on ``--resume``: the saved options of
``run_options.json``, checked key by key as the command line checks them (used by
:mod:`pflt.commands.run_options` and the ``--from-run`` readers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: keys every saved ``run_options.json`` has (others — hyper-parameters, options added later —
#: take their defaults when absent)
SAVED_REQUIRED = ("algorithm", "model", "hidden", "l2", "rounds", "seed", "data_seed",
                  "eval_every", "checkpoint_every", "dtype", "data", "clients",
                  "synthetic_alpha", "synthetic_beta", "partition", "classes_per_client",
                  "class_assignment", "replace", "size_range", "dirichlet_alpha",
                  "train_fraction", "max_client_size")
#: options that are not saved with a run
NOT_SAVED = ("hyperparameters", "resume", "config", "model_chosen", "overwrite", "plugin")


def read_saved(path: Path, known: set[str], actions: dict, coerce) -> dict[str, Any]:
    """The options saved in a run's ``run_options.json``, each checked as the command line
    checks it (:func:`coerce`); a file that is not such an object, a missing or unknown key
    or a value of the wrong type is a one-line error naming the file and the key.  ``known``:
    the other keys the reading command saves (``flower-sim``'s own options); ``actions``
    and ``coerce``: ``pflt run``'s options and how the command line converts them
    (:mod:`pflt.commands.run_options`, which calls this with its own)."""
    from algorithms.engine.run_files import RunFileError, read_object

    saved = read_object(path)
    # runs saved before --data-seed / --class-assignment existed drew the data from
    # --seed with a random label assignment: resume them on the same data
    saved.setdefault("data_seed", saved.get("seed", 0))
    saved.setdefault("class_assignment", "random")
    saved.setdefault("replace", False)
    for key in SAVED_REQUIRED:
        if key not in saved:
            raise RunFileError(path, key, "missing")
    for key, value in saved.items():
        if key in known - set(actions):
            continue
        if key not in actions or key in NOT_SAVED:
            raise RunFileError(path, key, "not an option of pflt run")
        if value is None and (actions[key].default is None or key.startswith("hp_")):
            continue
        saved[key] = coerce(key, value, actions[key], str(path))
    return saved



def saved(options: dict[str, Any]) -> dict[str, Any]:
    """The options to store with a run (for ``--resume``)."""
    return {k: v for k, v in options.items() if k not in NOT_SAVED}
