"""The contract battery for an algorithm of your own: ``contract_battery(MyAlgorithm)``.

The same properties ``tests/algorithms/test_contract.py`` asks of every built-in algorithm,
as plain functions raising ``AssertionError`` (no pytest needed to import this module):

============== =========================================================================
property       what is checked
============== =========================================================================
documented     every hyper-parameter has a help text and a paper symbol (``hp(…,
               symbol=…)``), the class has a docstring, instances are frozen
deterministic  the same seed gives the same state, bit for bit (2 rounds, twice)
isolation      no read of the test split while training: with the test split replaced
               (labels permuted, features noise) the states and the training-side
               history are the same, bit for bit (2 rounds, every client taking part;
               :mod:`algorithms.isolation`)
dtype_device   float64 data give float64 state on the data's device, float32 give float32
               (after 1 round)
finite         no NaN/inf in the state after 2 rounds
learns         the best evaluated model reaches 70 % test accuracy on a planted problem
               (6 clients, 3 separated Gaussian classes; chance 1/3) within 15 rounds
reference_loop the client/server split run one client at a time
               (:func:`algorithms.reference_loop.client_by_client_round`) equals the
               batched engine's round (3 rounds, float64, |difference| ≤ 1e-12)
resume         2 rounds, a checkpoint written and read back, 1 more round = 3 rounds
               straight, bit for bit
flower         under Flower (in-process simulation) the state equals the engine's
               (≤ 1e-12); skipped when ``flwr`` is not installed
============== =========================================================================

Use it from a test of your own (pytest)::

    from algorithms.testing import CONTRACT, check_contract, contract_battery

    def test_my_fedprox_meets_the_contract():
        contract_battery(MyFedProx)                 # every property, first failure raises

    @pytest.mark.parametrize("prop", CONTRACT)      # or one test per property
    def test_my_fedprox(prop):
        check_contract(MyFedProx, prop)

A model of your own, batched over clients: :func:`module_difference` compares it with an
ordinary single-client ``torch.nn.Module`` run one client at a time (logits, loss,
gradients).

Hyper-parameters: :data:`SMALL` (the values the built-in contract tests use, for the fields
the class has) updated by ``hyperparameters=``.  docs/extending.md walks through an example.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from algorithms.engine.base import State, hyperparameters

#: small settings so that a round is cheap; the learning rates are raised from the papers'
#: (tuned for 600–800 rounds) so that the planted problem is learned within 15 rounds
SMALL = {"local_rounds": 10, "inner_steps": 5, "batch_size": 10, "clients_per_round": 4,
         "lr": 0.03, "personal_lr": 0.05}

#: the properties of :func:`check_contract`, in the order :func:`contract_battery` runs them
CONTRACT = ("documented", "deterministic", "isolation", "dtype_device", "finite", "learns",
            "reference_loop", "resume", "flower")

#: float64 rounding of batched against one-row kernels over a few hundred operations
#: (measured 0 for the built-in algorithms, PPFE's SVD 3e-16)
ATOL = 1e-12


def planted_federation(dtype: torch.dtype = torch.float64, device: str = "cpu", *,
                       clients: int = 6, samples: int = 80):
    """``clients`` IID clients of ``samples`` samples each (3/4 train, 1/4 test), 3
    well-separated Gaussian classes in 5-d (Bayes accuracy ≈ 1)."""
    from synthetic.federation import Federation

    rng = np.random.RandomState(0)
    means = np.array([[3.0, 0, 0, 0, 0], [0, 3.0, 0, 0, 0], [0, 0, 3.0, 0, 0]])
    xs, ys = [], []
    for _ in range(clients):
        y = rng.randint(0, 3, samples)
        xs.append(means[y] + 0.5 * rng.randn(samples, 5))
        ys.append(y)
    return Federation.from_client_arrays(xs, ys, num_classes=3, device=device, dtype=dtype)


#: the built-in models that read images ``[C, H, H]`` (:func:`planted_images`)
IMAGE_MODELS = ("cnn", "cnn3", "resnet18-gn")


def planted_images(dtype: torch.dtype = torch.float64, device: str = "cpu", side: int = 16):
    """The image version of :func:`planted_federation`: 6 IID clients, 3 classes of 1×16×16
    images, class ``c`` a bright 4×4 square at its own place plus unit Gaussian noise
    (Bayes accuracy ≈ 1)."""
    from synthetic.federation import Federation

    rng = np.random.RandomState(0)
    patterns = np.zeros((3, 1, side, side))
    for c, (r, q) in enumerate(((2, 2), (2, side - 6), (side - 6, side // 2 - 2))):
        patterns[c, 0, r:r + 4, q:q + 4] = 3.0
    xs, ys = [], []
    for _ in range(6):
        y = rng.randint(0, 3, 80)
        xs.append(patterns[y] + rng.randn(80, 1, side, side))
        ys.append(y)
    return Federation.from_client_arrays(xs, ys, num_classes=3, device=device, dtype=dtype)


def planted(model: str | None, dtype: torch.dtype = torch.float64, device: str = "cpu"):
    """The planted problem for ``model`` (a built-in name): images for the convolutional
    models, Gaussian blobs otherwise."""
    return (planted_images if model in IMAGE_MODELS else planted_federation)(dtype, device)


def build(cls: type, **overrides: Any):
    """``cls`` with :data:`SMALL`'s values for the fields it has, then ``overrides``."""
    names = {f.name for f in hyperparameters(cls)}
    return cls(**{**{k: v for k, v in SMALL.items() if k in names}, **overrides})


def _model(hidden: int = 8, name: str | None = None, fed=None):
    """The battery's network: ``DNN(5, 3, hidden)``, or the built-in ``name`` sized for
    ``fed`` (``hidden`` its width)."""
    from algorithms.engine.models import DNN, build_model

    return DNN(5, 3, hidden=hidden) if name is None else build_model(name, fed, hidden=hidden)


def _tensors(state: State):
    for name in sorted(state.models):
        yield from (state.models[name][k] for k in sorted(state.models[name]))
    yield from (state.tensors[k] for k in sorted(state.tensors))


def _rounds(alg, fed, model, rounds: int, seed: int) -> State:
    state = alg.init(fed, model, seed)
    for _ in range(rounds):
        state = alg.round(state, fed, model)
    return state


def _same(a: State, b: State, what: str, atol: float = 0.0) -> None:
    assert a.round == b.round, f"{what}: rounds {a.round} and {b.round}"
    assert sorted(a.models) == sorted(b.models), f"{what}: models {sorted(a.models)} and " \
                                                 f"{sorted(b.models)}"
    assert sorted(a.tensors) == sorted(b.tensors), f"{what}: tensors differ in names"
    for x, y in zip(_tensors(a), _tensors(b)):
        assert x.shape == y.shape, f"{what}: shapes {tuple(x.shape)} and {tuple(y.shape)}"
        if x.is_floating_point() and atol > 0:
            diff = float((x - y).abs().max()) if x.numel() else 0.0
            assert diff <= atol, f"{what}: max |difference| {diff:.3g} > {atol:g}"
        else:
            assert torch.equal(x, y), f"{what}: states differ"


def check_contract(cls: type, prop: str, *, hyperparameters: dict[str, Any] | None = None,
                   model: str | None = None, hidden: Any = None, device: str = "cpu") -> str:
    """Check one property of :data:`CONTRACT` for the algorithm class ``cls``; raises
    ``AssertionError`` naming the property when it does not hold; returns ``"ok"`` or
    ``"skipped: <why>"``.  ``model``: a built-in ``--model`` name (``hidden`` its width) in
    place of the small DNN, on :func:`planted_images` for the convolutional ones;
    ``device``: where the data and the state live."""
    if prop not in CONTRACT:
        raise ValueError(f"unknown contract property {prop!r}; one of {', '.join(CONTRACT)}")
    alg = build(cls, **(hyperparameters or {}))
    name = (cls.__dict__.get("name") or cls.__name__) \
        + (f" with {model}" if model else "") + (f" on {device}" if device != "cpu" else "")
    fed = planted(model, device=device)
    model_ = _model(8 if hidden is None else hidden, model, fed)
    if prop == "documented":
        for f in dataclasses.fields(cls):
            if f.init:
                assert f.metadata.get("help"), f"{name}.{f.name} has no help text (use hp())"
                assert f.metadata.get("symbol"), f"{name}.{f.name} has no paper symbol"
        assert cls.__dict__.get("__doc__"), f"{name} has no class docstring"
        first = next(f.name for f in dataclasses.fields(cls) if f.init)
        try:
            setattr(alg, first, getattr(alg, first))
        except dataclasses.FrozenInstanceError:
            return "ok"
        raise AssertionError(f"{name} is not a frozen dataclass")
    if prop == "deterministic":
        _same(_rounds(alg, fed, model_, 2, 4), _rounds(alg, fed, model_, 2, 4),
              f"{name} deterministic (same seed twice)")
    elif prop == "isolation":
        from algorithms.isolation import isolation_differences

        diff = isolation_differences(alg, fed, model_, rounds=2, seed=5)
        assert not diff, (f"{name} reads the test split while training: with the test split "
                          f"replaced (labels permuted, features noise) these differ: "
                          f"{'; '.join(diff[:4])}{' …' if len(diff) > 4 else ''} — held-out "
                          "data must be carved from the training split")
    elif prop == "dtype_device":
        for dtype in (torch.float64, torch.float32):
            f = planted(model, dtype, device)
            for x in _tensors(_rounds(alg, f, model_, 1, 1)):
                if x.is_floating_point():
                    assert x.dtype == dtype and x.device == f.device, \
                        f"{name}: {dtype} data gave a {x.dtype} tensor on {x.device}"
    elif prop == "finite":
        for x in _tensors(_rounds(alg, fed, model_, 2, 0)):
            if x.is_floating_point():
                assert bool(torch.isfinite(x).all()), f"{name}: NaN/inf in the state"
    elif prop == "learns":
        from algorithms.engine.evaluation import evaluate

        evaluated = alg.evaluated(_rounds(alg, fed, model_, 15, 0))
        assert evaluated, f"{name} evaluates no model"
        best = max(float(evaluate(model_, p, fed.test)[0].mean()) for p in evaluated.values())
        assert best >= 0.7, f"{name}: best evaluated accuracy {best:.3f} < 0.7 after 15 " \
                            "rounds on separated blobs (chance 1/3)"
    elif prop == "reference_loop":
        from algorithms.reference_loop import client_by_client_round

        a = b = alg.init(fed, model_, 2)
        for _ in range(3):
            a, b = alg.round(a, fed, model_), client_by_client_round(alg, b, fed, model_)
        _same(a, b, f"{name}: client-by-client loop against the batched engine", ATOL)
    elif prop == "resume":
        from algorithms.engine.checkpoint import load_checkpoint, save_checkpoint

        with tempfile.TemporaryDirectory() as tmp:
            path = save_checkpoint(Path(tmp) / "checkpoint.pt", _rounds(alg, fed, model_, 2, 3),
                                   alg)
            resumed = alg.round(load_checkpoint(path, alg, device=fed.device), fed, model_)
        _same(resumed, _rounds(alg, fed, model_, 3, 3), f"{name}: resumed against straight")
    elif prop == "flower":
        if importlib.util.find_spec("flwr") is None:
            return "skipped: flwr is not installed"
        from algorithms.flower.local import simulate
        from algorithms.flower.records import Settings
        from algorithms.engine.runner import run

        small = _model(4, model, fed)
        engine = run(alg, fed, small, rounds=2, seed=7, progress=False).state
        flower = simulate(Settings.of(alg, num_clients=fed.num_clients, seed=7,
                                      model=model or "dnn", hidden=4), fed, rounds=2).state
        _same(flower, engine, f"{name}: Flower against the engine", ATOL)
    return "ok"


def contract_battery(cls: type, *, hyperparameters: dict[str, Any] | None = None,
                     skip: tuple[str, ...] = (), model: str | None = None, hidden: Any = None,
                     device: str = "cpu") -> dict[str, str]:
    """Every property of :data:`CONTRACT` but ``skip``, in order (``model``, ``hidden``,
    ``device`` as :func:`check_contract`); the first that does not hold raises
    ``AssertionError``.  Returns ``{property: "ok" | "skipped: …"}``."""
    unknown = set(skip) - set(CONTRACT)
    if unknown:
        raise ValueError(f"unknown contract properties {sorted(unknown)}")
    return {p: check_contract(cls, p, hyperparameters=hyperparameters, model=model,
                              hidden=hidden, device=device)
            for p in CONTRACT if p not in skip}


def _is_dense_weight(module: nn.Module, name: str) -> bool:
    owner = module.get_submodule(name.rsplit(".", 1)[0]) if "." in name else module
    return isinstance(owner, nn.Linear) and name.endswith("weight")


def load_client_parameters(module: nn.Module, params: dict, i: int) -> nn.Module:
    """``module`` with client ``i``'s parameters copied in (the engine's names are the
    module's; ``Linear`` weights transposed: the engine stores dense weights
    ``[d_in, d_out]``)."""
    own = dict(module.named_parameters())
    assert sorted(own) == sorted(params), f"names differ: {sorted(set(own) ^ set(params))}"
    with torch.no_grad():
        for k, p in own.items():
            v = params[k][i].T if _is_dense_weight(module, k) else params[k][i]
            assert p.shape == v.shape, f"{k}: {tuple(p.shape)} against {tuple(v.shape)}"
            p.copy_(v)
    return module


def module_difference(model, params: dict, x: torch.Tensor, y: torch.Tensor,
                      make_module) -> float:
    """Largest |batched − per-client module| over every client's logits, mean
    cross-entropy and its gradient (each parameter): the batched engine model ``model``
    against ``make_module()`` — an ordinary single-client ``torch.nn.Module`` — run one
    client at a time with that client's parameters (float64 ``params`` and ``x``;
    a model without ℓ2 term)."""
    logits = model.forward(params, x)
    grads, loss = model.grad(params, x, y)
    worst = 0.0
    for i in range(x.shape[0]):
        module = load_client_parameters(make_module().to(torch.float64), params, i)
        out = module(x[i])
        ref_loss = F.cross_entropy(out, y[i])
        ref_loss.backward()
        worst = max(worst, float((out.detach() - logits[i]).abs().max()),
                    abs(float(ref_loss) - float(loss[i])))
        for k, p in module.named_parameters():
            g = torch.zeros_like(p) if p.grad is None else p.grad   # unused by the module
            g = g.T if _is_dense_weight(module, k) else g
            worst = max(worst, float((g - grads[k][i]).abs().max()))
    return worst
