"""algorithms/engine/evaluated_check.py: a plugin's ``evaluated()`` returning a model of the
wrong shape or dtype is one line naming the plugin (issue 43: it was a torch traceback from
algorithms/engine/evaluation.py — ``self and mat2 must have the same dtype``, an expand or
index error), and every built-in model's own parameters pass."""

from __future__ import annotations

import pytest
import torch

from algorithms.engine.evaluated_check import EvaluatedModels, check_evaluated, expected_shapes
from algorithms.engine.models import CNN, MLP, MLR
from pflt.cli import main

PLUGIN = '''
from dataclasses import dataclass
import torch
from algorithms.engine.base import register
from algorithms.methods.averaging.fedavg import FedAvg

@register("bad-eval")
@dataclass(frozen=True)
class Bad(FedAvg):
    """FedAvg whose evaluated() damages the model (McMahan et al., AISTATS 2017)."""
    def evaluated(self, state):
        g = state.models["global"]
        return {{"global": {{k: {expr} for k, v in g.items()}}}}
'''
TINY = ["--clients", "3", "--clients-per-round", "3", "--rounds", "1", "--local-rounds", "1",
        "--no-progress"]


@pytest.mark.parametrize("expr, needle", [
    ("v.double()", "['fc.weight'] has dtype torch.float64; the data and the model are "
                   "torch.float32"),
    ("v.long()", "has dtype torch.int64"),
    ("v[..., :-1]", "['fc.weight'] has shape [1, 60, 9]; MLR expects [1 or N = 3, 60, 10]"),
    ("v.expand(7, *v.shape[1:])", "has shape [7, 60, 10]: its leading dimension must be 1"),
    ("v if k.endswith('weight') else v[:, :-1]", "['fc.bias'] has shape [1, 9]"),
])
def test_a_plugins_wrong_model_is_one_line_naming_it(isolated_plugins, tmp_path, capsys, expr,
                                                     needle):
    # mutation caught: check_evaluated not called at the boundary (a RuntimeError traceback)
    path = tmp_path / "bad_eval.py"
    path.write_text(PLUGIN.format(expr=expr))
    code = main(["--plugin", str(path), "run", "--algorithm", "bad-eval", *TINY, "--out",
                 str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "Traceback" not in err
    last = err.splitlines()[-1]
    assert last.startswith("pflt run: error: algorithm 'bad-eval' (bad_eval.Bad): "
                           "evaluated(state)['global']") and needle in last


def _split(n=3, dtype=torch.float32):
    from synthetic.federation import Federation

    xs = [torch.randn(4, 6).numpy() for _ in range(n)]
    ys = [torch.arange(4).remainder(3).numpy() for _ in range(n)]
    return Federation.from_client_arrays(xs, ys, num_classes=3, device="cpu",
                                         dtype=dtype).test


@pytest.mark.parametrize("model", [MLR(6, 3), MLP(6, 3, hidden=(5,)), CNN(1, 28, 10)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_every_models_own_parameters_pass(model, dtype):
    # mutation caught: a check that refuses good models (a wrong expected shape or dtype)
    split = _split(dtype=dtype)
    for params in (model.init(1, dtype=dtype), model.init(3, dtype=dtype, same=False)):
        check_evaluated(model, EvaluatedModels({"m": params}, "'x' (t.X)"), split)


def test_missing_and_unknown_parameters_are_named_without_a_plugin_too():
    # mutation caught: comparing shapes only of the parameters present (a missing bias ran
    # into a KeyError in the model's forward)
    model, split = MLR(6, 3), _split()
    params = model.init(1)
    with pytest.raises(ValueError, match=r"model 'm' does not have the parameters of MLR: "
                       r"missing \['fc.bias'\], unknown none"):
        check_evaluated(model, {"m": {"fc.weight": params["fc.weight"]}}, split)
    with pytest.raises(ValueError, match=r"unknown \['extra'\]"):
        check_evaluated(model, {"m": {**params, "extra": torch.zeros(1, 2)}}, split)
    assert expected_shapes(model) == {"fc.weight": (6, 3), "fc.bias": (3,)}
