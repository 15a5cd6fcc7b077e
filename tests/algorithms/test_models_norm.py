"""BatchNormMLP (algorithms/engine/models_norm.py) against torch's own BatchNorm, one client at a
time: training-mode logits, gradients and moved running statistics; evaluation with the
running statistics; every client its own statistics; local_sgd moves the buffers."""

import pytest
import torch
import torch.nn.functional as F

from algorithms.engine.models_norm import BatchNormMLP, buffered_sgd
from algorithms.engine.steps import local_sgd


def _torch_client(params, i, x, train):
    """Client i's forward written with torch.nn.functional (F.linear, F.batch_norm), running
    statistics cloned and moved in place by F.batch_norm as nn.BatchNorm1d does."""
    p = {k: v[i] for k, v in params.items()}
    stats = {k: v.clone() for k, v in p.items() if "running" in k}
    h = x[i]
    h = F.linear(h, p["fc1.weight"].T, p["fc1.bias"])
    h = F.batch_norm(h, stats["bn1.running_mean"], stats["bn1.running_var"], p["bn1.weight"],
                     p["bn1.bias"], training=train, momentum=0.1, eps=1e-5)
    h = torch.relu(h)
    return F.linear(h, p["fc2.weight"].T, p["fc2.bias"]), stats


@pytest.fixture
def setup():
    model = BatchNormMLP(5, 3, hidden=(7,))
    params = model.init(3, seed=2, dtype=torch.float64, same=False)
    gen = torch.Generator().manual_seed(0)
    params["bn1.running_mean"] = torch.randn(3, 7, generator=gen, dtype=torch.float64)
    params["bn1.running_var"] = torch.rand(3, 7, generator=gen, dtype=torch.float64) + 0.5
    params["bn1.weight"] = params["bn1.weight"] + 0.1 * torch.randn(3, 7, generator=gen,
                                                                     dtype=torch.float64)
    x = torch.randn(3, 6, 5, generator=gen, dtype=torch.float64) * torch.tensor([1., 3., .2]
                                                                                 ).view(3, 1, 1)
    y = torch.randint(0, 3, (3, 6), generator=gen)
    return model, params, x, y


def test_training_step_matches_torch_batchnorm_per_client(setup):
    model, params, x, y = setup
    g, loss, moved = model.train_grad(params, x, y)
    for i in range(3):
        leaves = {k: v[i].clone().requires_grad_("running" not in k) for k, v in params.items()}
        logits, stats = _torch_client({k: v.unsqueeze(0) for k, v in leaves.items()}, 0,
                                      x[i:i + 1], train=True)
        ref = F.cross_entropy(logits, y[i])
        ref_g = torch.autograd.grad(ref, [leaves[k] for k in leaves if "running" not in k])
        # float64, the same few ops in another order: ~1e-16
        torch.testing.assert_close(loss[i], ref.detach(), rtol=0, atol=1e-12)
        for k, v in zip([k for k in leaves if "running" not in k], ref_g):
            torch.testing.assert_close(g[k][i], v, rtol=0, atol=1e-12)
        for k in ("bn1.running_mean", "bn1.running_var"):
            torch.testing.assert_close(moved[k][i], stats[k], rtol=0, atol=1e-12)
            assert torch.equal(g[k][i], torch.zeros_like(g[k][i]))


def test_evaluation_uses_the_running_statistics(setup):
    model, params, x, _ = setup
    out = model.forward(params, x)
    for i in range(3):
        ref, _ = _torch_client(params, i, x, train=False)
        torch.testing.assert_close(out[i], ref, rtol=0, atol=1e-12)
    # the statistics matter: other running means give other logits
    shifted = {**params, "bn1.running_mean": params["bn1.running_mean"] + 1}
    assert not torch.allclose(model.forward(shifted, x), out)


def test_statistics_are_each_clients_own(setup):
    model, params, x, y = setup
    same = {k: v[:1].expand_as(v).clone() for k, v in params.items()}
    _, _, moved = model.train_grad(same, x, y)
    m = moved["bn1.running_mean"]
    assert not torch.allclose(m[0], m[1]) and not torch.allclose(m[1], m[2])
    # client 0's statistics do not depend on client 1's data
    x2 = x.clone()
    x2[1] += 5
    _, _, moved2 = model.train_grad(same, x2, y)
    assert torch.equal(moved2["bn1.running_mean"][0], m[0])


def test_local_sgd_moves_the_buffers_and_trains_the_rest(setup):
    model, params, x, y = setup
    xs, ys = torch.stack([x, x.flip(1)]), torch.stack([y, y.flip(1)])
    out = local_sgd(model, params, xs, ys, 0.1)
    ref = buffered_sgd(model, params, xs, ys, 0.1)
    assert all(torch.equal(out[k], ref[k]) for k in out)
    _, _, m1 = model.train_grad(params, x, y)
    step1 = {k: m1[k] if k in m1 else params[k] - 0.1 * model.grad(params, x, y)[0][k]
             for k in params}
    _, _, m2 = model.train_grad(step1, x.flip(1), y.flip(1))
    for k in m2:
        assert torch.equal(out[k], m2[k])
    assert not torch.equal(out["fc1.weight"], params["fc1.weight"])


def test_single_sample_batches_and_bad_momentum_are_refused(setup):
    model, params, x, y = setup
    with pytest.raises(ValueError, match="at least 2"):
        model.grad(params, x[:, :1], y[:, :1])
    with pytest.raises(ValueError, match="momentum"):
        BatchNormMLP(5, 3, momentum=0.0)


def test_layers_group_the_dense_layer_with_its_batchnorm():
    model = BatchNormMLP(4, 3, hidden=(6, 5))
    assert len(model.layers) == 3 and model.layers[-1] == ["fc3.weight", "fc3.bias"]
    assert set(model.norm_keys) == {f"bn{l}.{s}" for l in (1, 2)
                                    for s in ("weight", "bias", "running_mean", "running_var")}
    assert sorted(model.init(1)) == sorted(k for layer in model.layers for k in layer)
