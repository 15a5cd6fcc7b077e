"""pflt/commands/_run_data.py: data options the chosen --data/--partition would ignore are
refused, and the options describe the DataSpec the run builds."""

import pytest

from pflt.cli import UserError
from pflt.commands._run_data import data_dict, data_spec
from pflt.commands.run_options import check_data_options


def _options(**over):
    base = {"data": "digits", "clients": 5, "synthetic_alpha": 0.5, "synthetic_beta": 0.5,
            "partition": "label-skew", "classes_per_client": 2, "class_assignment": "cyclic",
            "replace": False, "size_range": None, "dirichlet_alpha": 0.5,
            "train_fraction": 0.75, "max_client_size": None, "data_seed": 3}
    return base | over


def test_the_spec_carries_every_data_option():
    spec = data_spec(_options(partition="feature-shift"))
    d = data_dict(spec)
    assert d["data"] == "digits" and d["num_clients"] == 5 and d["seed"] == 3
    assert d["partition"] == "feature-shift"


def test_an_option_the_data_ignores_is_refused():
    from pflt.commands.run_options import _actions
    defaults = {k: a.default for k, a in _actions().items()}
    values = defaults | {"data": "synthetic", "partition": "dirichlet"}
    with pytest.raises(UserError, match="--partition"):
        check_data_options(values)
    values = defaults | {"data": "digits", "partition": "iid", "dirichlet_alpha": 0.1}
    with pytest.raises(UserError, match="--dirichlet-alpha"):
        check_data_options(values)
    check_data_options(defaults | {"data": "digits", "partition": "dirichlet",
                                   "dirichlet_alpha": 0.1})          # used: accepted
