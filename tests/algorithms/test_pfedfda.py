"""pFedFDA (algorithms/methods/prototypes/pfedfda.py): an independent per-client oracle written from the paper
(plain loops over clients, classes, folds and β values, float64, the engine's mini-batch
indices), the mutation it catches, the body update's reduction to FedAvg with a frozen
generative head, and the generative head against Gaussian log-densities."""

import dataclasses

import pytest
import torch
import torch.nn.functional as F

import algorithms.methods.prototypes.pfedfda as pfedfda
from algorithms.engine.base import broadcast, weighted_mean
from algorithms.engine.heads import partial_sgd
from algorithms.engine.features import body_keys
from algorithms.engine.models import DNN
from algorithms.methods.prototypes.pfedfda import PFedFDA, gaussian_head, log_priors
from verification.oracles.pfedfda import pfedfda_oracle as oracle

C, HIDDEN = 4, 5
# float64 sums of a few hundred terms in another order (batched vs per-client kernels,
# Cholesky vs LU solves of well-conditioned (ridge ≥ 1) matrices): ≈ 1e-15 relative
ATOL = 1e-10


@pytest.fixture(scope="module")
def model():
    return DNN(6, C, hidden=HIDDEN)


@pytest.fixture(scope="module")
def shifted():
    """6 clients sharing 4 class means, each shifted by its own offset (0 … large): the
    cross-validated β then differs between clients (the permuted-label fixture gives β = 1
    everywhere)."""
    import numpy as np
    from synthetic.federation import Federation

    rng = np.random.RandomState(4)
    means = 2.0 * rng.randn(C, 6)
    xs, ys = [], []
    for i, n in enumerate([9, 14, 20, 12, 16, 11]):
        y = rng.randint(0, C, n)
        xs.append(means[y] + 0.8 * i * rng.randn(1, 6) + rng.randn(n, 6))
        ys.append(y)
    return Federation.from_client_arrays(xs, ys, num_classes=C, seed=0, device="cpu",
                                         dtype=torch.float64)


def _alg(**kw):
    return PFedFDA(**{"lr": 0.05, "local_rounds": 3, "batch_size": 5, "clients_per_round": 3,
                      "folds": 2, "beta_grid": 5, **kw})


def _engine(alg, fed, model, seed, rounds):
    s = alg.init(fed, model, seed)
    for _ in range(rounds):
        s = alg.round(s, fed, model)
    return s


def _max_diff(state, ref) -> float:
    body, heads, betas, gm, gc = ref
    d = [float((state.models["body"][k] - v).abs().max()) for k, v in body.items()]
    w = torch.stack([h[0] for h in heads])
    b = torch.stack([h[1] for h in heads])
    d += [float((state.models["head"]["fc2.weight"] - w).abs().max()),
          float((state.models["head"]["fc2.bias"] - b).abs().max()),
          float((state.tensors["beta"] - torch.stack(betas)).abs().max()),
          float((state.models["stats"]["means"][0] - gm).abs().max()),
          float((state.models["stats"]["cov"][0] - gc).abs().max())]
    return max(d)


@pytest.mark.parametrize("data", ["fed", "shifted"])
def test_engine_equals_the_per_client_oracle(data, model, request):
    fed = request.getfixturevalue(data)
    alg = _alg()
    state = _engine(alg, fed, model, seed=3, rounds=2)
    ref = oracle(alg, fed, model, seed=3, rounds=2)
    assert _max_diff(state, ref) <= ATOL
    if data == "fed":
        return
    assert _max_diff(state, ref) <= ATOL
    # the oracle picks non-trivial β (not all 0 or all 1), so the interpolation is exercised
    betas = torch.stack(ref[2])
    assert 0 < float(betas.mean()) < 1 and len(set(betas.tolist())) > 1


def test_the_oracle_comparison_sees_swapped_interpolation(shifted, model, monkeypatch):
    fed = shifted
    # the mutation: μ̂ = (1 − β) μ_i + β μ^g in the engine only
    alg = _alg()
    ref = oracle(alg, fed, model, seed=3, rounds=1)
    original = pfedfda.interpolate
    monkeypatch.setattr(pfedfda, "interpolate",
                        lambda beta, *a: original(1 - beta, *a))
    assert _max_diff(_engine(alg, fed, model, seed=3, rounds=1), ref) > 1e-4
    # ... and the oracle with the same mutation agrees with the mutated engine
    assert _max_diff(_engine(alg, fed, model, seed=3, rounds=1),
                     oracle(alg, fed, model, seed=3, rounds=1, flip=True)) <= ATOL


def test_body_update_is_fedavg_with_the_generative_head_frozen(fed, model):
    """Reduction (paper §4.1, global representation learning): with the head fixed to the
    generative classifier of the global estimates, a round's body is FedAvg's — local SGD
    of the model (its own forward and gradient) on the body keys only, sample-weighted
    mean."""
    alg = _alg(clients_per_round=fed.num_clients)
    state = alg.init(fed, model, seed=1)
    phase = alg.first_phase(state, fed, model)
    x, y = fed.train.gather(phase.batches["sgd"])
    stats = state.models["stats"]
    yr = fed.train.gather(phase.batches["rows"])[1][0]
    mask = torch.arange(yr.shape[1])[None, :] < fed.train.counts[:, None]
    counts = (F.one_hot(yr, C) * mask[..., None]).sum(1).double()
    w, b = gaussian_head(stats["means"], stats["cov"], log_priors(counts), alg.ridge)
    params = {**broadcast(state.models["body"], fed.num_clients),
              "fc2.weight": w.expand(fed.num_clients, -1, -1), "fc2.bias": b}
    local = partial_sgd(model, params, body_keys(model), x, y, alg.lr)
    want = weighted_mean({k: local[k] for k in body_keys(model)}, fed.train.counts)
    got = alg.round(state, fed, model).models["body"]
    for k in want:
        # the model's baddbmm layers vs the feature path's matmul: float64 rounding only
        torch.testing.assert_close(got[k], want[k], rtol=0, atol=1e-12)


def test_gaussian_head_is_the_bayes_classifier_of_the_gaussians():
    """logit_c(z) − log N(z; μ_c, Σ + εI) − log π_c is the same for every class (the
    class-independent −½ zᵀΣ⁻¹z and normaliser): softmax of the head = Bayes posterior."""
    g = torch.Generator().manual_seed(0)
    d = 5
    means = torch.randn(C, d, generator=g, dtype=torch.float64)
    a = torch.randn(d, d, generator=g, dtype=torch.float64)
    cov = a @ a.T / d
    logp = torch.log_softmax(torch.randn(C, generator=g, dtype=torch.float64), 0)
    z = torch.randn(7, d, generator=g, dtype=torch.float64)
    w, b = gaussian_head(means, cov, logp, 0.5)
    dist = torch.distributions.MultivariateNormal(means, cov + 0.5 * torch.eye(d, dtype=torch.float64))
    joint = dist.log_prob(z[:, None, :]) + logp               # [7, C]
    torch.testing.assert_close(torch.log_softmax(z @ w + b, 1), torch.log_softmax(joint, 1),
                               rtol=0, atol=1e-12)
    wrong = z @ w + (b + 0.5 * (means * w.T).sum(1))           # without the −½ μᵀΣ⁻¹μ term
    assert (torch.log_softmax(wrong, 1) - torch.log_softmax(joint, 1)).abs().max() > 1e-3


def test_one_grid_point_keeps_the_global_distribution(fed, model):
    """β grid of one point (β = 0): every personalized head is the global estimates' head
    with the client's own priors (no local feature statistics enter)."""
    alg = _alg(beta_grid=1)
    s = alg.init(fed, model, seed=0)
    assert float(s.tensors["beta"].abs().max()) == 0.0
    ref = oracle(alg, fed, model, seed=0, rounds=0)
    assert _max_diff(s, ref) <= ATOL
    heads = torch.stack([h[0] for h in ref[1]])                 # W = (Σ^g + εI)⁻¹ μ^gᵀ
    torch.testing.assert_close(heads, heads[:1].expand_as(heads), rtol=0, atol=1e-12)


def test_mlr_is_federated_lda_without_sgd(fed):
    """With MLR the body is empty (z = x): rounds only re-estimate the statistics."""
    from algorithms.engine.models import MLR
    mlr = MLR(6, C)
    alg = _alg()
    s = alg.round(alg.init(fed, mlr, seed=0), fed, mlr)
    assert s.models["body"] == {} and set(s.models["head"]) == {"fc.weight", "fc.bias"}
    assert torch.isfinite(alg.evaluated(s)["personalized"]["fc.weight"]).all()


def test_rejects_a_model_without_known_features(fed):
    from algorithms.engine.functional import FunctionalModel
    net = FunctionalModel(torch.nn.Sequential(torch.nn.Linear(6, 4)))
    with pytest.raises(ValueError, match="linear last layer"):
        _alg().init(fed, net, seed=0)


def test_hyperparameters_are_checked():
    for bad in ({"folds": 0}, {"beta_grid": 0}, {"ridge": 0.0}):
        with pytest.raises(ValueError):
            _alg(**bad)
    assert dataclasses.fields(PFedFDA)
