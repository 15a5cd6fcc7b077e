"""Tests of paper_figures/plgu_poor_clients.py helpers (the full make() is run by `pflt figures`)."""

from __future__ import annotations

import numpy as np
import torch

from paper_figures.plgu_poor_clients import CLASSES, DIM, MLP, federation, stats


def test_federation_is_label_skewed_and_seeded():
    fed = federation(num_clients=12, seed=1)
    assert fed.num_clients == 12 and fed.num_classes == CLASSES and fed.feature_shape == (DIM,)
    y, off, cnt = fed.train.y.numpy(), fed.train.offsets.numpy(), fed.train.counts.numpy()
    for i in range(12):
        assert len(np.unique(y[off[i]:off[i] + cnt[i]])) <= 3   # 3 classes per client
    again = federation(num_clients=12, seed=1)
    assert torch.equal(fed.train.x, again.train.x) and torch.equal(fed.test.y, again.test.y)


def test_mlp_layers_and_forward_match_a_manual_loop():
    model = MLP(4, 3, hidden=5, depth=3)
    assert len(model.layers) == 4
    p = model.init(2, seed=0, dtype=torch.float64, same=False)
    x = torch.randn(2, 6, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    out = model.forward(p, x)
    for i in range(2):   # independent per-client loop
        h = x[i]
        for j in range(4):
            h = h @ p[f"fc{j}.weight"][i] + p[f"fc{j}.bias"][i]
            h = torch.relu(h) if j < 3 else h
        torch.testing.assert_close(out[i], h)


def test_stats_golden_values():
    acc = np.linspace(0.0, 1.0, 21)                   # ceil(0.05·21) = 2 clients per tail
    mean, low, top = stats(acc)
    assert np.allclose([mean, low, top], [0.5, 0.025, 0.975], atol=1e-12)  # float64 sums
