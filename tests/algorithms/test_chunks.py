"""Tests of algorithms/engine/chunks.py: the client chunk sized from a memory budget."""

import pytest
import torch

from algorithms.engine import chunks
from algorithms.engine.models import DNN, CNN
from algorithms.testing import planted


def test_the_chunk_grows_with_the_budget_and_vanishes_when_all_fit():
    fed = planted(None)                                  # 6 clients
    model = DNN(5, 3, hidden=8)
    per = chunks.client_bytes(model, fed, 10)
    assert chunks.chunk_for_budget(model, fed, 10, budget=per) == 1
    assert chunks.chunk_for_budget(model, fed, 10, budget=3 * per) == 3
    assert chunks.chunk_for_budget(model, fed, 10, budget=1) == 1     # never below one client
    assert chunks.chunk_for_budget(model, fed, 10, budget=6 * per) is None


def test_the_estimate_counts_activations_per_sample():
    """Per client: 6 parameter copies plus 2 × |D| × the bytes autograd saves for one sample;
    for the CNN those are at least its first convolution's output (C₁ × 12² floats before
    pooling, 4 bytes each)."""
    fed = planted("cnn", dtype=torch.float32)            # 16 × 16 images
    model = CNN(1, 16, 3, channels=(4, 6), hidden=8)
    act = chunks.activation_bytes(model, fed)
    assert act >= 4 * 12 * 12 * 4
    params = sum(v.numel() for v in model.init(1).values()) * 4
    assert chunks.client_bytes(model, fed, 10) == 6 * params + 2 * 10 * act
    assert chunks.client_bytes(model, fed, 20) > chunks.client_bytes(model, fed, 10)


def test_a_bad_budget_is_refused():
    fed = planted(None)
    with pytest.raises(ValueError, match="positive"):
        chunks.chunk_for_budget(DNN(5, 3), fed, 10, budget=0)


def test_default_budget_is_half_the_available_memory(monkeypatch, tmp_path):
    assert chunks.default_budget() > 0
    monkeypatch.setattr("builtins.open", lambda *a, **k: (_ for _ in ()).throw(OSError()))
    assert chunks.default_budget() == chunks.FALLBACK_BUDGET


def test_the_parameters_are_not_counted_as_activations():
    """ResNet-18-GN on 8×8 images: its 11 M parameters (45 MB), which every convolution
    saves for its backward, are not activations of a sample (those are well under 1 MB)."""
    from algorithms.engine.models_resnet import ResNet18GN
    from synthetic.federation import Federation
    import numpy as np

    rng = np.random.RandomState(0)
    fed = Federation.from_client_arrays([rng.randn(4, 3, 8, 8).astype(np.float32)],
                                        [rng.randint(0, 10, 4)], num_classes=10,
                                        dtype=torch.float32)
    act = chunks.activation_bytes(ResNet18GN(3, 8, 10, width=64), fed)
    assert 0 < act < 2 ** 20
