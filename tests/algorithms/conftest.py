"""Fixtures shared by the layer-wise algorithm tests (decoupled baselines, PPFE)."""

import pytest
import torch

from synthetic.permuted_labels import permuted_label_federation


@pytest.fixture(scope="module")
def fed():
    """6 clients, 4 clusters, 3 per client, labels permuted per client: chance ≈ 1/3."""
    return permuted_label_federation(num_clients=6, num_clusters=4, classes_per_client=3, dim=6,
                                     size_range=(40, 60), separation=2.0, noise=0.7, seed=1,
                                     device="cpu", dtype=torch.float64)
