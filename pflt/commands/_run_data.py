"""The data options of ``pflt run``: which of them the chosen ``--data``/``--partition`` use,
and the :class:`~synthetic.sources.DataSpec` they describe."""

from __future__ import annotations

import dataclasses
from typing import Any

from pflt.cli import UserError

#: data options that only some --data / --partition use (the others ignore them)
LABEL_SKEW_ONLY = ("classes_per_client", "class_assignment", "replace", "size_range")
SYNTHETIC_ONLY = ("synthetic_alpha", "synthetic_beta")
FEATURE_SHIFT_ONLY = ("shift_rotation", "shift_contrast", "shift_noise")


def check_data_options(values: dict[str, Any], defaults: dict[str, Any]) -> None:
    """A data option set (command line or config) to a non-default value that the chosen
    ``--data``/``--partition`` would ignore is an error, as ``--hidden`` with ``--model mlr``:
    the run would otherwise record e.g. ``partition = "dirichlet"`` for synthetic data it
    drew without any partition.  ``defaults``: every option's default."""
    if str(values["data"]) in ("synthetic", "synthetic-iid"):
        unused = ("partition", *LABEL_SKEW_ONLY, "dirichlet_alpha", *FEATURE_SHIFT_ONLY)
        where = f"--data {values['data']} (they partition real data: digits, mnist5k, mnist:DIR …)"
    else:
        unused = SYNTHETIC_ONLY + (() if values["partition"] == "label-skew" else LABEL_SKEW_ONLY)
        unused += () if values["partition"] == "dirichlet" else ("dirichlet_alpha",)
        unused += () if values["partition"] == "feature-shift" else FEATURE_SHIFT_ONLY
        where = f"--data {values['data']} --partition {values['partition']}"
    given = [k for k in unused if values.get(k) != defaults.get(k)
             and not (k == "size_range" and values.get(k) is None)]
    if given:
        raise UserError(f"option(s) {', '.join('--' + k.replace('_', '-') for k in given)} "
                        f"do not apply to {where}")


def data_spec(options: dict[str, Any]):
    from synthetic.sources import DataSpec

    return DataSpec(data=options["data"], num_clients=options["clients"],
                    alpha=options["synthetic_alpha"], beta=options["synthetic_beta"],
                    partition=options["partition"],
                    classes_per_client=options["classes_per_client"],
                    class_assignment=options["class_assignment"], replace=options["replace"],
                    size_range=tuple(options["size_range"]) if options["size_range"] else None,
                    dirichlet_alpha=options["dirichlet_alpha"],
                    shift_rotation=options.get("shift_rotation", DataSpec.shift_rotation),
                    shift_contrast=options.get("shift_contrast", DataSpec.shift_contrast),
                    shift_noise=options.get("shift_noise", DataSpec.shift_noise),
                    train_fraction=options["train_fraction"],
                    max_client_size=options["max_client_size"], seed=options["data_seed"],
                    standardize=bool(options.get("standardize", False)),
                    validation_fraction=float(options.get("validation_fraction", 0.0)))


def data_dict(spec) -> dict[str, Any]:
    return dataclasses.asdict(spec)


def scaling_options(options: dict[str, Any]) -> str:
    """The options that scale the features of the chosen data (what to blame for NaN or
    inf in them): ``--synthetic-alpha/--synthetic-beta`` for synthetic data, the
    feature-shift options for ``--partition feature-shift``, else ``--data`` itself."""
    if str(options["data"]) in ("synthetic", "synthetic-iid"):
        names = SYNTHETIC_ONLY
    elif options.get("partition") == "feature-shift":
        names = FEATURE_SHIFT_ONLY
    else:
        return f"--data {options['data']}: the file's values?"
    from synthetic.sources import DataSpec

    spec_field = {"synthetic_alpha": "alpha", "synthetic_beta": "beta"}
    changed = [k for k in names if k in options
               and options[k] != getattr(DataSpec, spec_field.get(k, k), None)]
    return "/".join("--" + k.replace("_", "-") for k in changed or names) + " too large?"
