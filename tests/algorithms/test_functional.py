"""algorithms/engine/functional.py — any single-client nn.Module batched over clients with torch.func:
forward, gradients and whole rounds equal a plain per-client loop over the module itself."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from algorithms import reference_loop
from algorithms.engine.base import get_algorithm
from algorithms.engine.functional import FunctionalModel, as_model
from algorithms.engine.models import MLR, Model
from algorithms.engine.runner import run
from synthetic.sources import DataSpec, build_federation

F64 = torch.float64
# float64 throughout: vmap'd and looped computations perform the same operations in a
# possibly different order, so agreement is to rounding (~1e-15 relative); 1e-10 leaves room
# for accumulation over a few hundred updates.
TOL = dict(rtol=1e-10, atol=1e-12)


def _net(dim=7, classes=4):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(dim, 5), nn.Tanh(), nn.Linear(5, 6), nn.ReLU(),
                         nn.Linear(6, classes)).to(F64)


def _client_module(module, params, i):
    """A plain copy of ``module`` holding client i's parameters (the per-client oracle)."""
    m = copy.deepcopy(module)
    with torch.no_grad():
        for name, p in m.named_parameters():
            p.copy_(params[name][i])
    return m


class LoopModel(Model):
    """The oracle: the same module evaluated client by client with loss.backward()."""

    def __init__(self, module, l2=0.0):
        self.module, self.l2 = module, l2
        self.layers = FunctionalModel(module).layers

    def forward(self, params, x):
        return torch.stack([_client_module(self.module, params, i)(x[i])
                            for i in range(x.shape[0])])

    def autograd_grad(self, params, x, y):
        grads, losses = {k: [] for k in params}, []
        for i in range(x.shape[0]):
            m = _client_module(self.module, params, i)
            loss = F.cross_entropy(m(x[i]), y[i])
            if self.l2 > 0:
                loss = loss + 0.5 * self.l2 * sum((p ** 2).sum() for n, p in m.named_parameters()
                                                  if n.endswith("weight"))
            loss.backward()
            for n, p in m.named_parameters():
                grads[n].append(p.grad)
            losses.append(loss.detach())
        return {k: torch.stack(v) for k, v in grads.items()}, torch.stack(losses)

    grad = autograd_grad


@pytest.fixture
def batch():
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(5, 9, 7, generator=gen, dtype=F64)
    y = torch.randint(0, 4, (5, 9), generator=gen)
    return x, y


def test_forward_equals_the_per_client_loop(batch):
    x, _ = batch
    fm = FunctionalModel(_net())
    params = fm.init(5, seed=1, dtype=F64, same=False)
    assert torch.allclose(fm.forward(params, x), LoopModel(_net()).forward(params, x), **TOL)


@pytest.mark.parametrize("l2", [0.0, 0.3])
def test_gradients_and_losses_equal_the_per_client_loop(batch, l2):
    x, y = batch
    fm = FunctionalModel(_net(), l2=l2)
    params = fm.init(5, seed=2, dtype=F64, same=False)
    g, loss = fm.grad(params, x, y)
    g_ref, loss_ref = LoopModel(_net(), l2=l2).autograd_grad(params, x, y)
    assert torch.allclose(loss, loss_ref, **TOL)
    for k in g_ref:
        assert torch.allclose(g[k], g_ref[k], **TOL), k
    # the engine's generic autograd path agrees too (same per_client_loss semantics)
    g_auto, _ = fm.autograd_grad(params, x, y)
    assert all(torch.allclose(g[k], g_auto[k], **TOL) for k in g)


def test_a_wrong_gradient_would_be_caught(batch):
    # the comparison above can fail: a perturbed gradient is not within tolerance
    x, y = batch
    fm = FunctionalModel(_net())
    params = fm.init(5, seed=2, dtype=F64, same=False)
    g, _ = fm.grad(params, x, y)
    g_ref, _ = LoopModel(_net()).autograd_grad(params, x, y)
    k = next(iter(g))
    assert not torch.allclose(g[k] * (1 + 1e-6), g_ref[k], **TOL)


def test_linear_module_is_the_builtin_mlr(batch):
    x, y = batch
    fm = FunctionalModel(nn.Linear(7, 4).to(F64))
    params = fm.init(5, seed=0, dtype=F64, same=False)
    mlr = MLR(7, 4)
    mp = {"fc.weight": params["weight"].transpose(1, 2), "fc.bias": params["bias"]}
    assert torch.allclose(fm.forward(params, x), mlr.forward(mp, x), **TOL)
    g, _ = fm.grad(params, x, y)
    gm, _ = mlr.grad(mp, x, y)
    assert torch.allclose(g["weight"].transpose(1, 2), gm["fc.weight"], **TOL)


def test_init_is_seeded_and_layers_follow_the_modules():
    fm = FunctionalModel(_net())
    a, b = fm.init(3, seed=5, same=False), fm.init(3, seed=5, same=False)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["0.weight"][0], a["0.weight"][1])  # independent draws
    c = fm.init(3, seed=6)
    assert not torch.equal(a["0.weight"][0], c["0.weight"][0])
    assert torch.equal(c["0.weight"][0], c["0.weight"][2])  # same=True: one broadcast model
    assert fm.layers == [["0.weight", "0.bias"], ["2.weight", "2.bias"], ["4.weight", "4.bias"]]


def test_bad_inputs_are_value_errors():
    with pytest.raises(ValueError, match="torch.nn.Module"):
        FunctionalModel(lambda x: x)
    with pytest.raises(ValueError, match="partition"):
        FunctionalModel(_net(), layers=[["0.weight"]])
    with pytest.raises(ValueError, match="l2"):
        FunctionalModel(_net(), l2=-1.0)
    assert isinstance(as_model(nn.Linear(2, 2)), FunctionalModel)
    mlr = MLR(3, 2)
    assert as_model(mlr) is mlr


@pytest.fixture(scope="module")
def fed():
    return build_federation(DataSpec(data="synthetic", num_clients=6, max_client_size=60),
                            dtype=F64)


def test_pfedme_round_equals_the_per_client_reference_loop(fed):
    module = nn.Sequential(nn.Linear(60, 8), nn.Tanh(), nn.Linear(8, 10)).to(F64)
    fm, loop = FunctionalModel(module), LoopModel(module)
    alg = get_algorithm("pfedme")(local_rounds=2, inner_steps=2, clients_per_round=3)
    state = alg.init(fed, fm, seed=0)
    batched = alg.round(state, fed, fm)
    looped = reference_loop.pfedme_round(alg, state, fed, loop)
    for name in ("global", "personalized", "local"):
        for k in batched.models[name]:
            assert torch.allclose(batched.models[name][k], looped.models[name][k], **TOL)


@pytest.mark.parametrize("name", ["fedavg", "pfedme", "ditto", "fedrep", "ppfe", "plgu-lf"])
def test_algorithms_run_with_a_custom_module(fed, name):
    import dataclasses

    cls = get_algorithm(name)
    small = {"clients_per_round": 3, "local_rounds": 1, "inner_steps": 1, "head_steps": 1}
    fields = {f.name for f in dataclasses.fields(cls)}
    alg = cls(**{k: v for k, v in small.items() if k in fields})
    module = nn.Sequential(nn.Linear(60, 8), nn.ReLU(), nn.Linear(8, 6), nn.ReLU(),
                           nn.Linear(6, 10))
    result = run(alg, fed, FunctionalModel(module), rounds=2, seed=0, progress=False)
    last = result.history.last()
    accs = [v for k, v in last.items() if k.endswith("_accuracy") and isinstance(v, float)]
    assert accs and all(0.0 <= a <= 1.0 for a in accs)
