"""The papers' networks pass the contract battery (algorithms/testing.py) under the
algorithms that use them: CGPFL's CNN under FedAvg, PPFE's CNN under PPFE (its heads span
the dense layers), PLGU's ResNet-18-GN (4 channels wide) under FedAvg and PLGU-GRep (slow
tier: its 16 cases take ~50 s on the shared 2-core machine) — on the planted image problem,
on every device present."""

import pytest
import torch

from algorithms.engine.base import registry
from algorithms.testing import CONTRACT, check_contract

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])

CASES = [("fedavg", "cnn", 8), ("ppfe", "cnn3", 8),
         pytest.param("fedavg", "resnet18-gn", 4, marks=pytest.mark.slow),
         pytest.param("plgu-grep", "resnet18-gn", 4, marks=pytest.mark.slow)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("prop", CONTRACT)
@pytest.mark.parametrize("algorithm,model,hidden", CASES)
def test_paper_model_meets_the_contract(algorithm, model, hidden, prop, device):
    result = check_contract(registry()[algorithm], prop, model=model, hidden=hidden,
                            device=device)
    assert result == "ok" or result.startswith("skipped: flwr")


def test_a_broken_model_fails_the_battery(monkeypatch):
    """The battery can fail with a model: a CNN whose gradient is wrong (sign flipped)
    does not learn the planted images."""
    from algorithms.engine.models import CNN

    real = CNN.grad
    monkeypatch.setattr(CNN, "grad", lambda self, p, x, y, out=None: (
        {k: -v for k, v in real(self, p, x, y)[0].items()}, real(self, p, x, y)[1]))
    with pytest.raises(AssertionError, match="accuracy"):
        check_contract(registry()["fedavg"], "learns", model="cnn", hidden=8)
