import numpy as np
import pytest
import torch

from algorithms import reference_loop
from algorithms.methods.averaging.fedavg import FedAvg
from algorithms.engine.models import DNN, MLR, QuadraticMean
from algorithms.methods.regularized.pfedme import PFedMe
from synthetic import fedprox
from synthetic.federation import Federation


@pytest.fixture(scope="module")
def small_fed():
    return fedprox.federation(0.5, 0.5, num_clients=6, dim=10, num_classes=4,
                              size_multiplier=1, seed=3, device="cpu", dtype=torch.float64)


def _assert_states_equal(a, b, atol):
    assert a.models.keys() == b.models.keys()
    for name in a.models:
        for k in a.models[name]:
            torch.testing.assert_close(a.models[name][k], b.models[name][k], rtol=0, atol=atol)


@pytest.mark.parametrize("model_cls", [MLR, DNN])
@pytest.mark.parametrize("aggregation", ["uniform", "weighted"])
def test_batched_equals_reference_loop(small_fed, model_cls, aggregation):
    model = model_cls(10, 4) if model_cls is MLR else DNN(10, 4, hidden=6)
    alg = PFedMe(lam=15, lr=0.05, personal_lr=0.05, inner_steps=3, local_rounds=4,
                 batch_size=5, beta=1.5, clients_per_round=4, aggregation=aggregation,
                 code_l2=0.001)
    s_batched = s_ref = alg.init(small_fed, model, seed=7)
    for _ in range(3):
        s_batched = alg.round(s_batched, small_fed, model)
        s_ref = reference_loop.pfedme_round(alg, s_ref, small_fed, model)
        # float64; the two differ only in summation order (batched bmm vs per-client mm)
        _assert_states_equal(s_batched, s_ref, atol=1e-11)


def test_fedavg_batched_equals_reference_loop(small_fed):
    model = DNN(10, 4, hidden=6)
    alg = FedAvg(lr=0.1, local_rounds=3, batch_size=4, clients_per_round=3)
    s_batched = s_ref = alg.init(small_fed, model, seed=1)
    for _ in range(3):
        s_batched = alg.round(s_batched, small_fed, model)
        s_ref = reference_loop.fedavg_round(alg, s_ref, small_fed, model)
        _assert_states_equal(s_batched, s_ref, atol=1e-11)  # float64, summation order only


def test_large_lambda_personalized_model_collapses_to_local_model(small_fed):
    model = MLR(10, 4)
    gaps = []
    for lam in (1e2, 1e4):
        # step sizes scaled so every update is a stable contraction (lr·λ ≤ 1)
        alg = PFedMe(lam=lam, lr=0.5 / lam, personal_lr=1.0 / (lam + 10), inner_steps=5,
                     local_rounds=3, batch_size=5, clients_per_round=6)
        state = alg.round(alg.init(small_fed, model, seed=0), small_fed, model)
        diff = state.models["personalized"]["fc.weight"] - state.models["local"]["fc.weight"]
        gaps.append(float(diff.abs().max()))
    assert gaps[1] < 1e-3
    assert gaps[1] < gaps[0] / 50  # the gap shrinks like 1/λ (λ grew 100×)


def _quadratic_federation(centres, n=8):
    xs = [np.tile(c, (n, 1)) for c in centres]
    ys = [np.zeros(n, dtype=np.int64) for _ in centres]
    return Federation.from_client_arrays(xs, ys, num_classes=2, device="cpu",
                                         dtype=torch.float64)


def test_one_round_with_exact_prox_is_gradient_descent_on_the_envelope():
    rng = np.random.RandomState(0)
    centres = rng.randn(5, 3)
    fed = _quadratic_federation(centres)
    model = QuadraticMean(3)
    lam, eta = 4.0, 0.3
    # personal_lr = 1/(1+λ): one inner step solves the prox of ½‖θ−c‖² exactly
    alg = PFedMe(lam=lam, lr=eta, personal_lr=1 / (1 + lam), inner_steps=3, local_rounds=1,
                 batch_size=4, beta=1.0, clients_per_round=5)
    state = alg.init(fed, model, seed=0)
    w0 = torch.tensor(rng.randn(1, 3))
    state = state.replace(models={**state.models, "global": {"theta": w0}})
    new = alg.round(state, fed, model)
    w = w0.numpy()[0]
    prox = (centres + lam * w) / (1 + lam)             # θ̂_i(w), closed form
    grad_f = (lam * (w - prox)).mean(0)                 # ∇F(w) = mean λ(w − θ̂_i), eq. (6)
    np.testing.assert_allclose(new.models["global"]["theta"][0].numpy(), w - eta * grad_f,
                               rtol=0, atol=1e-12)      # exact arithmetic up to rounding
    np.testing.assert_allclose(new.models["personalized"]["theta"].numpy(), prox, atol=1e-12)


def test_uniform_and_weighted_aggregation_coincide_for_equal_sizes():
    centres = np.random.RandomState(1).randn(4, 2)
    fed = _quadratic_federation(centres)
    model = QuadraticMean(2)
    kw = dict(lam=3.0, lr=0.1, personal_lr=0.2, inner_steps=2, local_rounds=2, batch_size=3,
              clients_per_round=2)
    a = PFedMe(aggregation="uniform", **kw)
    b = PFedMe(aggregation="weighted", **kw)
    sa = a.round(a.init(fed, model, 0), fed, model)
    sb = b.round(b.init(fed, model, 0), fed, model)
    torch.testing.assert_close(sa.models["global"]["theta"], sb.models["global"]["theta"])


def test_beta_extrapolates_between_old_and_averaged_model():
    centres = np.random.RandomState(2).randn(3, 2)
    fed = _quadratic_federation(centres)
    model = QuadraticMean(2)
    kw = dict(lam=3.0, lr=0.1, personal_lr=0.2, inner_steps=2, local_rounds=2, batch_size=3,
              clients_per_round=3)
    s0 = PFedMe(**kw).init(fed, model, 0)
    s0 = s0.replace(models={**s0.models, "global": {"theta": torch.ones(1, 2, dtype=torch.float64)}})
    avg = PFedMe(beta=1.0, **kw).round(s0, fed, model).models["global"]["theta"]
    ext = PFedMe(beta=2.5, **kw).round(s0, fed, model).models["global"]["theta"]
    torch.testing.assert_close(ext, -1.5 * torch.ones(1, 2, dtype=torch.float64) + 2.5 * avg)


def test_fedavg_on_iid_quadratic_reaches_the_optimum():
    rng = np.random.RandomState(0)
    c = np.array([3.0, -2.0, 1.0])
    xs = [c + rng.randn(200, 3) for _ in range(5)]
    ys = [np.zeros(200, dtype=np.int64) for _ in xs]
    fed = Federation.from_client_arrays(xs, ys, num_classes=2, device="cpu", dtype=torch.float64)
    alg = FedAvg(lr=0.1, local_rounds=5, batch_size=20, clients_per_round=5)
    model = QuadraticMean(3)
    state = alg.init(fed, model, seed=0)
    for _ in range(60):
        state = alg.round(state, fed, model)
    optimum = fed.train.x.mean(0)  # minimiser of Σ_i n_i f_i(θ) = pooled train mean
    err = float((state.models["global"]["theta"][0] - optimum).abs().max())
    # constant-step SGD noise: per-coordinate std ≈ sqrt(lr σ² / (2 B S)) ≈ 0.022; 0.15 ≈ 7 std
    assert err < 0.15, err


@pytest.mark.parametrize("kwargs", [dict(lam=0), dict(lam=-1), dict(inner_steps=0),
                                    dict(local_rounds=0), dict(batch_size=0),
                                    dict(clients_per_round=0), dict(aggregation="median"),
                                    dict(beta=0)])
def test_bad_hyperparameters(kwargs):
    with pytest.raises(ValueError):
        PFedMe(**kwargs)


def test_more_sampled_than_clients_is_an_error(small_fed):
    with pytest.raises(ValueError, match="clients_per_round"):
        PFedMe(clients_per_round=7).init(small_fed, MLR(10, 4), 0)


def test_client_tiles_give_the_same_round(monkeypatch):
    # local training runs in tiles of CLIENT_TILE clients; tiling must not change a number
    import algorithms.methods.regularized.pfedme as pfedme_module
    from algorithms.engine.models import MLR
    from algorithms.methods.regularized.pfedme import PFedMe
    from synthetic import fedprox

    fed = fedprox.federation(0.5, 0.5, num_clients=7, dim=6, num_classes=3, seed=0,
                             size_multiplier=1, device="cpu", dtype=torch.float64)
    model = MLR(6, 3)
    alg = PFedMe(local_rounds=3, clients_per_round=3)
    state = alg.init(fed, model, 0)
    whole = alg.round(state, fed, model)
    monkeypatch.setattr(pfedme_module, "CLIENT_TILE", 3)   # tiles of 3, 3 and 1 clients
    tiled = alg.round(state, fed, model)
    for name, params in whole.models.items():
        for k, v in params.items():
            assert torch.equal(tiled.models[name][k], v), (name, k)


def test_trained_models_are_contiguous():
    # the tiles train in prox_layout's class-major weights; the state gets the usual layout
    fed, model = _tiny_fed(), MLR(6, 3)
    alg = PFedMe(local_rounds=2, batch_size=4, clients_per_round=3)
    state = alg.round(alg.init(fed, model, 0), fed, model)
    assert all(v.is_contiguous() for p in state.models.values() for v in p.values())


def test_two_torch_threads_give_the_one_thread_round_bit_for_bit(monkeypatch):
    # with 2 torch threads the tiles run on 2 Python threads (steps.map_tiles), each tile
    # exactly as with one thread: the same numbers, and the caller's thread count restored
    import algorithms.methods.regularized.pfedme as pfedme_module

    fed, model = _tiny_fed(), MLR(6, 3)
    alg = PFedMe(local_rounds=3, batch_size=4, clients_per_round=3)
    state = alg.init(fed, model, 0)
    monkeypatch.setattr(pfedme_module, "CLIENT_TILE", 2)   # tiles of 2, 2, 2 and 1 clients
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = alg.round(alg.round(state, fed, model), fed, model)
        torch.set_num_threads(2)
        two = alg.round(alg.round(state, fed, model), fed, model)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    for name, params in one.models.items():
        for k, v in params.items():
            assert torch.equal(two.models[name][k], v), (name, k)


# ---- lazy mini-batches (issue 15: N = 100,000 gathered R·N·|D|·d floats at once) ----------

def _tiny_fed():
    return fedprox.federation(0.5, 0.5, num_clients=7, dim=6, num_classes=3, seed=0,
                              size_multiplier=1, device="cpu", dtype=torch.float64)


def _gathers(monkeypatch, local_rounds):
    """Element counts of every batch gather the engine makes in one pFedMe round."""
    import algorithms.methods.regularized.pfedme as pfedme_module
    from algorithms.engine.contract import LazyRows

    sizes = []
    take = LazyRows.take

    def counting(source, index):
        out = take(source, index)
        sizes.append(out.numel())
        return out

    monkeypatch.setattr(LazyRows, "take", staticmethod(counting))
    monkeypatch.setattr(pfedme_module, "CLIENT_TILE", 3)   # tiles of 3, 3 and 1 clients
    fed, model = _tiny_fed(), MLR(6, 3)
    alg = PFedMe(local_rounds=local_rounds, batch_size=4, clients_per_round=3)
    alg.round(alg.init(fed, model, 0), fed, model)
    return sizes


def test_batches_are_gathered_one_local_round_of_one_tile_at_a_time(monkeypatch):
    # x [tile=3, B=4, d=6] and y [3, 4] per (tile, round): the largest gather is one tile's
    # batch of one local round whatever R is; all gathers together are still every batch
    for r in (2, 6):
        sizes = _gathers(monkeypatch, r)
        assert max(sizes) == 3 * 4 * 6, (r, sizes)
        assert len(sizes) == 2 * 3 * r                       # (x, y) × 3 tiles × R rounds
        assert sum(sizes) == r * 7 * 4 * (6 + 1)             # R·N·|D|·(d + 1) elements


def test_lazy_batches_give_the_same_round_bit_for_bit(monkeypatch):
    # the eager gather (every round's [R, N, B, d] at once) as the reference: difference 0
    fed, model = _tiny_fed(), MLR(6, 3)
    alg = PFedMe(local_rounds=4, batch_size=4, clients_per_round=3)
    lazy = eager = alg.init(fed, model, 0)
    for _ in range(2):
        lazy = alg.round(lazy, fed, model)
        with monkeypatch.context() as m:
            m.setattr(PFedMe, "lazy_batches", False)
            eager = alg.round(eager, fed, model)
    for name, params in eager.models.items():
        for k, v in params.items():
            assert torch.equal(lazy.models[name][k], v), (name, k)


def test_lazy_rows_index_like_the_gathered_tensor():
    from algorithms.engine.contract import LazyRows, lazy_gather

    fed = _tiny_fed()
    index = fed.sample_batches(3, 4, torch.Generator().manual_seed(1))
    x, y = fed.train.gather(index)
    lx, ly = lazy_gather(fed.train, index)
    assert lx.shape == x.shape and ly.shape == y.shape and len(lx) == 3
    for key in (1, -1, (slice(None), slice(2, 5))):
        got = lx[key]
        got = got[0] if isinstance(got, LazyRows) else got     # keeps the round axis: pick one
        want = x[key][0] if isinstance(lx[key], LazyRows) else x[key]
        assert isinstance(got, torch.Tensor) and torch.equal(got, want), key
    assert isinstance(lx[:-1], LazyRows) and torch.equal(lx[:-1][1], x[1])
    assert torch.equal(ly[2], y[2])


# ---- train_clients="sampled": only the S sampled clients train (issue 15) -----------------

def _rounds(alg, fed, model, rounds=3):
    state, out = alg.init(fed, model, 0), []
    for _ in range(rounds):
        state = alg.round(state, fed, model)
        out.append(state)
    return out


def test_sampled_training_keeps_the_global_model_and_the_sampled_rows_bit_for_bit():
    """The global model of every round is that of ``train_clients="all"``; a round's sampled
    clients get the rows ``"all"`` gives them, every other client keeps its rows."""
    from algorithms.engine.base import round_generator, sample_clients

    fed, model = _tiny_fed(), MLR(6, 3)
    full = _rounds(PFedMe(local_rounds=3, batch_size=4, clients_per_round=3), fed, model)
    part = _rounds(PFedMe(local_rounds=3, batch_size=4, clients_per_round=3,
                          train_clients="sampled"), fed, model)
    before = PFedMe(local_rounds=3, batch_size=4, clients_per_round=3).init(fed, model, 0)
    for t, (a, b) in enumerate(zip(full, part)):
        for k, v in a.models["global"].items():
            assert torch.equal(b.models["global"][k], v), (t, k)
        gen = round_generator(0, t)
        fed.skip_batches(3, 4, gen)
        chosen = sample_clients(fed.num_clients, 3, gen)
        others = torch.tensor([i for i in range(fed.num_clients) if i not in set(chosen.tolist())])
        for name in ("personalized", "local"):
            for k, v in a.models[name].items():
                assert torch.equal(b.models[name][k][chosen], v[chosen]), (t, name, k)
                assert torch.equal(b.models[name][k][others], before.models[name][k][others])
                assert not torch.equal(b.models[name][k], v)      # the others did not train
        before = b


def test_sampled_training_with_every_client_sampled_is_the_full_round():
    fed, model = _tiny_fed(), MLR(6, 3)
    full = _rounds(PFedMe(local_rounds=2, batch_size=4, clients_per_round=7), fed, model)
    part = _rounds(PFedMe(local_rounds=2, batch_size=4, clients_per_round=7,
                          train_clients="sampled"), fed, model)
    for a, b in zip(full, part):
        for name, params in a.models.items():
            for k, v in params.items():
                assert torch.equal(b.models[name][k], v), (name, k)


def test_sampled_training_trains_only_the_sampled_clients(monkeypatch):
    """What the option is for: ``local_update`` sees S clients, not N."""
    seen = []
    original = PFedMe.local_update

    def spy(self, model, w_global, x, y):
        seen.append(x.shape[1])
        return original(self, model, w_global, x, y)

    monkeypatch.setattr(PFedMe, "local_update", spy)
    fed, model = _tiny_fed(), MLR(6, 3)
    for train_clients, want in (("all", 7), ("sampled", 3)):
        seen.clear()
        alg = PFedMe(local_rounds=2, batch_size=4, clients_per_round=3,
                     train_clients=train_clients)
        alg.round(alg.init(fed, model, 0), fed, model)
        assert seen == [want], train_clients


def test_sampled_training_client_by_client_equals_the_engine():
    from algorithms.reference_loop import client_by_client_round

    fed, model = _tiny_fed(), MLR(6, 3)
    alg = PFedMe(local_rounds=2, batch_size=4, clients_per_round=3, train_clients="sampled")
    a = b = alg.init(fed, model, 1)
    for _ in range(2):
        a, b = alg.round(a, fed, model), client_by_client_round(alg, b, fed, model)
    for name, params in a.models.items():
        for k, v in params.items():
            torch.testing.assert_close(b.models[name][k], v, rtol=0, atol=1e-12)


def test_help_of_s_does_not_contradict_train_clients():
    """``pflt run --algorithm pfedme --help`` said S's clients are aggregated while "all
    clients train" — false with ``train_clients='sampled'`` (only the S train)."""
    import dataclasses

    helps = {f.name: f.metadata["help"] for f in dataclasses.fields(PFedMe)}
    assert "train_clients='sampled'" in helps["clients_per_round"]
    assert "sampled" in helps["train_clients"]
