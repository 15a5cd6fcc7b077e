"""CGPFL's baselines: IFCA, APFL, Per-FedAvg, L2SGD, Ditto (algorithms/{ifca,apfl,perfedavg,
l2sgd,ditto}.py).  Each learns a planted problem, is deterministic, and reduces where a
reduction exists; golden values from FedAvg (independent engine code), autograd and loops."""

import numpy as np
import pytest
import torch

from algorithms.methods.regularized.apfl import APFL
from algorithms.engine.base import broadcast, sq_distance
from algorithms.methods.regularized.ditto import Ditto
from algorithms.engine.evaluation import evaluate
from algorithms.methods.averaging.fedavg import FedAvg
from algorithms.methods.clustered.ifca import IFCA
from algorithms.methods.regularized.l2sgd import L2SGD
from algorithms.engine.models import build_model
from algorithms.methods.regularized.perfedavg import PerFedAvg
from verification.experiments.cgpfl import planted_federation

COMMON = dict(local_rounds=3, batch_size=10)


@pytest.fixture(scope="module")
def planted():
    pl = planted_federation(8, 2, dim=10, size_range=(30, 50), class_sep=1.0, seed=1)
    return pl.fed, build_model("mlr", pl.fed)


def _run(alg, fed, model, rounds, seed=0):
    s = alg.init(fed, model, seed)
    for _ in range(rounds):
        s = alg.round(s, fed, model)
    return s


def _acc(model, params, fed):
    a, _ = evaluate(model, params, fed.test)
    c = fed.test.counts.double()
    return float((a * c).sum() / c.sum())


def _same(a, b, tol=0.0):
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=tol, atol=tol)


ALGS = {
    "ifca": (IFCA(num_contexts=2, lr=0.1, clients_per_round=8, **COMMON), "cluster"),
    "apfl": (APFL(lr=0.1, mix_lr=0.05, clients_per_round=8, **COMMON), "personalized"),
    "perfedavg-fo": (PerFedAvg(lr=0.1, inner_lr=0.05, variant="fo", clients_per_round=8, **COMMON),
                     "personalized"),
    "perfedavg-hf": (PerFedAvg(lr=0.1, inner_lr=0.05, variant="hf", clients_per_round=8, **COMMON),
                     "personalized"),
    "l2sgd": (L2SGD(lr=0.1, lam=1.0, avg_prob=0.2, **COMMON), "personalized"),
    "ditto": (Ditto(lam=0.5, lr=0.1, personal_lr=0.1, clients_per_round=8, **COMMON), "personalized"),
}


@pytest.mark.parametrize("name", list(ALGS))
def test_learns_above_chance_and_is_deterministic(planted, name):
    fed, model = planted
    alg, ev = ALGS[name]
    start = _acc(model, alg.evaluated(alg.init(fed, model, 0))[ev], fed)
    s1, s2 = _run(alg, fed, model, 8), _run(alg, fed, model, 8)
    acc = _acc(model, alg.evaluated(s1)[ev], fed)
    assert acc > 0.6 and acc > start + 0.2  # 10 classes, 3 per client: chance ≤ 1/3
    for m in s1.models:
        _same(s1.models[m], s2.models[m])


def test_ifca_k1_is_fedavg(planted):
    fed, model = planted
    a = _run(IFCA(num_contexts=1, lr=0.1, clients_per_round=5, **COMMON), fed, model, 3)
    b = _run(FedAvg(lr=0.1, clients_per_round=5, **COMMON), fed, model, 3)
    _same(a.models["clusters"], b.models["global"])


def test_ifca_assignment_is_lowest_loss(planted):
    fed, model = planted
    s = _run(IFCA(num_contexts=2, lr=0.1, clients_per_round=8, **COMMON), fed, model, 2)
    losses = []
    for j in range(2):
        one = {k: v[j:j + 1] for k, v in s.models["clusters"].items()}
        loss = []
        for i in range(fed.num_clients):  # brute force per client
            o, c = int(fed.train.offsets[i]), int(fed.train.counts[i])
            p = {k: v for k, v in one.items()}
            loss.append(float(model.per_client_loss(p, fed.train.x[o:o + c][None], fed.train.y[o:o + c][None])))
        losses.append(loss)
    assert s.tensors["assignment"].tolist() == np.argmin(np.array(losses), 0).tolist()


def test_ditto_global_is_fedavg_and_large_lambda_collapses(planted):
    fed, model = planted
    b = _run(FedAvg(lr=0.1, clients_per_round=8, **COMMON), fed, model, 3)
    gaps = []
    for lam in (0.1, 1.0, 10.0, 100.0):
        alg = Ditto(lam=lam, lr=0.1, personal_lr=0.01, clients_per_round=8, **COMMON)
        prev = _run(alg, fed, model, 2)
        a = alg.round(prev, fed, model)
        _same(a.models["global"], b.models["global"])
        # the personal models are pulled to the anchor w^t of the round (the previous global)
        gaps.append(float(sq_distance(a.models["personalized"], prev.models["global"]).mean()))
    assert all(x > y for x, y in zip(gaps, gaps[1:]))  # personal → global as λ grows
    assert gaps[-1] < 1e-2 * gaps[0]


def test_apfl_alpha0_is_fedavg(planted):
    fed, model = planted
    a = _run(APFL(lr=0.1, mix_init=0.0, mix_lr=0.0, clients_per_round=5, **COMMON), fed, model, 3)
    b = _run(FedAvg(lr=0.1, clients_per_round=5, **COMMON), fed, model, 3)
    _same(a.models["global"], b.models["global"])
    ev = APFL(lr=0.1, mix_init=0.0, mix_lr=0.0).evaluated(a)
    _same(ev["personalized"], broadcast(a.models["global"], fed.num_clients))


def test_apfl_alpha_step_matches_autograd(planted):
    """One local step: α ← α − η_α ∂/∂α f̃(αv + (1−α)w) (eq. 10), autograd golden."""
    fed, model = planted
    alg = APFL(lr=0.1, mix_init=0.3, mix_lr=0.5, clients_per_round=8, local_rounds=1, batch_size=10)
    s0 = alg.init(fed, model, 0)
    s0 = s0.replace(models={**s0.models, "local": model.init(8, seed=5, dtype=fed.dtype, same=False)})
    s1 = alg.round(s0, fed, model)
    x, y = fed.train.gather(fed.sample_batches(1, 10, s0.generator())[0])
    a = torch.full((8,), 0.3, dtype=fed.dtype, requires_grad=True)
    v, w = s0.models["local"], broadcast(s0.models["global"], 8)
    mixed = {k: a.view(-1, *[1] * (v[k].ndim - 1)) * v[k] + (1 - a.view(-1, *[1] * (v[k].ndim - 1))) * w[k] for k in v}
    g = torch.autograd.grad(model.per_client_loss(mixed, x, y).sum(), a)[0]
    torch.testing.assert_close(s1.tensors["alpha"], (0.3 - 0.5 * g).clamp(0, 1), rtol=1e-10, atol=1e-12)


def test_perfedavg_fo_zero_inner_lr_is_fedavg(planted):
    fed, model = planted
    a = _run(PerFedAvg(lr=0.1, inner_lr=0.0, variant="fo", clients_per_round=5, **COMMON), fed, model, 3)
    b = _run(FedAvg(lr=0.1, clients_per_round=5, **COMMON), fed, model, 3)
    _same(a.models["global"], b.models["global"])


def test_perfedavg_hf_step_matches_exact_maml_step(planted):
    """HF finite-difference Hessian-vector product vs autograd's (I − α∇²f)∇f(w̃)."""
    fed, model = planted
    alg = PerFedAvg(lr=0.1, inner_lr=0.05, variant="hf", hf_delta=1e-5, clients_per_round=8,
                    local_rounds=1, batch_size=10)
    w = model.init(8, seed=3, dtype=fed.dtype, same=False)
    gen = torch.Generator().manual_seed(0)
    b1, b2, b3 = (fed.train.gather(fed.sample_batches(1, 10, gen)[0]) for _ in range(3))
    got = alg.meta_step(model, w, b1, b2, b3)
    leaves = {k: v.clone().requires_grad_(True) for k, v in w.items()}
    g_in = torch.autograd.grad(model.per_client_loss(leaves, *b1).sum(), list(leaves.values()))
    w_t = {k: (w[k] - 0.05 * gi).detach() for k, gi in zip(leaves, g_in)}
    g, _ = model.grad(w_t, *b2)
    lv = {k: v.clone().requires_grad_(True) for k, v in w.items()}
    gr = torch.autograd.grad(model.per_client_loss(lv, *b3).sum(), list(lv.values()), create_graph=True)
    hv = torch.autograd.grad(sum((gi * g[k]).sum() for k, gi in zip(lv, gr)), list(lv.values()))
    want = {k: w[k] - 0.1 * (g[k] - 0.05 * h) for k, h in zip(lv, hv)}
    _same(got, want, tol=1e-8)  # central differences with δ = 1e-5: O(δ²) error


def test_l2sgd_lambda0_is_local_training(planted):
    fed, model = planted
    alg = L2SGD(lr=0.1, lam=0.0, avg_prob=0.3, **COMMON)
    s0 = alg.init(fed, model, 0)
    s1 = alg.round(s0, fed, model)
    gen = s0.generator()
    x, y = fed.train.gather(fed.sample_batches(3, 10, gen))
    coins = (torch.rand(3, generator=gen, dtype=torch.float64) < 0.3).tolist()
    for i in range(fed.num_clients):  # scalar loop per client
        p = {k: v[i:i + 1] for k, v in s0.models["personalized"].items()}
        for r in range(3):
            if not coins[r]:
                g, _ = model.grad(p, x[r, i:i + 1], y[r, i:i + 1])
                p = {k: p[k] - 0.1 / 0.7 * g[k] for k in p}
        _same({k: v[i:i + 1] for k, v in s1.models["personalized"].items()}, p, tol=1e-12)


def test_l2sgd_full_averaging_step(planted):
    """ηλ/p = 1: an averaging step sets every x_i to x̄ (mean preserved)."""
    fed, model = planted
    alg = L2SGD(lr=0.1, lam=5.0, avg_prob=0.5, local_rounds=1, batch_size=10)
    s = alg.init(fed, model, 0)
    s = s.replace(models={"personalized": model.init(8, seed=1, dtype=fed.dtype, same=False)})
    averaged = 0
    for _ in range(10):
        s2 = alg.round(s, fed, model)
        if int(s2.tensors["averaging_steps"]) == 1:
            mean = {k: v.mean(0, keepdim=True) for k, v in s.models["personalized"].items()}
            _same(s2.models["personalized"], broadcast(mean, 8), tol=1e-12)
            averaged += 1
        s = s2
    assert averaged >= 1  # P(no averaging in 10 rounds) = 2^-10, and the seed is fixed


def test_invalid_hyperparameters():
    with pytest.raises(ValueError):
        L2SGD(lr=0.5, lam=1.0, avg_prob=0.1)
    with pytest.raises(ValueError):
        PerFedAvg(variant="so")
    with pytest.raises(ValueError):
        APFL(mix_init=1.5)
