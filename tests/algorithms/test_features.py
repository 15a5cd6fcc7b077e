"""algorithms/engine/features.py: body features against each model's forward, the batched class
statistics against per-client loops, the all-rows batch against each client's rows."""

import pytest
import torch

from algorithms.engine.features import (all_rows_index, class_counts, class_means, class_sums,
                                 feature_dim, features, head_keys, linear_logits, valid_rows,
                                 within_class_cov)
from algorithms.engine.models import CNN, MLP, MLR


@pytest.mark.parametrize("model", [MLR(16, 3), MLP(16, 3, hidden=(5, 4)),
                                   CNN(1, 16, 3, channels=(2, 3), hidden=6)],
                         ids=["mlr", "mlp", "cnn"])
def test_forward_is_the_linear_head_of_the_features(model):
    # float64 products in another layout (matmul vs baddbmm): rounding only
    x = torch.randn(3, 5, 256 if isinstance(model, CNN) else 16, dtype=torch.float64)
    params = model.init(3, seed=1, dtype=torch.float64, same=False)
    z = features(model, params, x)
    assert z.shape == (3, 5, feature_dim(model))
    w, b = (params[k] for k in head_keys(model))
    torch.testing.assert_close(linear_logits(z, w, b), model.forward(params, x),
                               rtol=0, atol=1e-12)
    # the check can fail: the features without the last ReLU do not give the forward
    if not isinstance(model, MLR):
        assert (z >= 0).all()
        bad = z - 0.5                                   # a shifted representation
        assert not torch.allclose(linear_logits(bad, w, b), model.forward(params, x))


def _loop_stats(z, y, mask, c):
    counts = torch.zeros(z.shape[0], c, dtype=z.dtype)
    sums = torch.zeros(z.shape[0], c, z.shape[2], dtype=z.dtype)
    for i in range(z.shape[0]):
        for s in range(z.shape[1]):
            if mask[i, s]:
                counts[i, y[i, s]] += 1
                sums[i, y[i, s]] += z[i, s]
    means = sums / counts.clamp(min=1)[..., None]
    cov = torch.zeros(z.shape[0], z.shape[2], z.shape[2], dtype=z.dtype)
    for i in range(z.shape[0]):
        for s in range(z.shape[1]):
            if mask[i, s]:
                d = z[i, s] - means[i, y[i, s]]
                cov[i] += torch.outer(d, d)
        cov[i] /= max(int(mask[i].sum()), 1)
    return counts, sums, means, cov


def test_class_statistics_equal_per_client_loops():
    g = torch.Generator().manual_seed(0)
    z = torch.randn(4, 9, 3, generator=g, dtype=torch.float64)
    y = torch.randint(0, 5, (4, 9), generator=g)
    mask = torch.rand(4, 9, generator=g) < 0.7
    counts, sums = class_sums(z, y, mask, 5)
    want = _loop_stats(z, y, mask, 5)
    torch.testing.assert_close(counts, want[0], rtol=0, atol=0)
    torch.testing.assert_close(class_counts(y, mask, 5).double(), want[0], rtol=0, atol=0)
    torch.testing.assert_close(sums, want[1], rtol=0, atol=1e-14)
    means = class_means(counts, sums)
    torch.testing.assert_close(means, want[2], rtol=0, atol=1e-14)
    torch.testing.assert_close(within_class_cov(z, y, mask, means), want[3], rtol=0, atol=1e-14)
    # the masked rows really are left out: counting them changes the sums
    assert not torch.allclose(class_sums(z, y, torch.ones_like(mask), 5)[1], sums)


def test_all_rows_batch_is_every_row_of_each_client_once(fed):
    clients = torch.tensor([1, 4, 5])
    index = all_rows_index(fed, clients)
    counts = fed.train.counts[clients]
    assert index.shape == (1, 3, int(counts.max()))
    valid = valid_rows(counts, index.shape[2])
    for j, i in enumerate(clients.tolist()):
        o, n = int(fed.train.offsets[i]), int(fed.train.counts[i])
        assert index[0, j][valid[j]].tolist() == list(range(o, o + n))
        assert (index[0, j][~valid[j]] == o + n - 1).all()      # padding: the last row
