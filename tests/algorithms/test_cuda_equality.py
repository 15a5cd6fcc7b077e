"""One round of every registered algorithm in float64 gives the same state on CUDA as on
the CPU (same seed, same planted data): the engine keeps its randomness on CPU generators
and nothing in a round depends on the device but the kernels' summation order.  Skipped
without CUDA (benchmarks/gpu_check.sh runs it on a GPU machine)."""

import pytest
import torch

from algorithms.engine.base import State, registry
from algorithms.engine.models import DNN
from algorithms.testing import build, planted_federation

CUDA = torch.cuda.is_available()
#: float64; one round is a few hundred kernel calls whose reductions (matmul, sums) order
#: their terms differently on the GPU: ~1e-15 relative each, so 1e-10 leaves 10^5 of margin
#: and still catches any real difference (another sample, another step: ≥ 1e-4)
ATOL = 1e-10


def state_difference(a: State, b: State) -> float:
    """Largest |a − b| over every model and tensor of two states (``inf`` when their names,
    shapes or integer entries differ); ``b`` may live on another device."""
    if sorted(a.models) != sorted(b.models) or sorted(a.tensors) != sorted(b.tensors) \
            or any(sorted(a.models[m]) != sorted(b.models[m]) for m in a.models):
        return float("inf")
    pairs = [(a.models[m][k], b.models[m][k]) for m in a.models for k in a.models[m]]
    pairs += [(a.tensors[k], b.tensors[k]) for k in a.tensors]
    worst = 0.0
    for x, y in pairs:
        y = y.cpu()
        if x.shape != y.shape:
            return float("inf")
        if not x.is_floating_point():
            if not torch.equal(x.cpu(), y):
                return float("inf")
            continue
        if x.numel():
            worst = max(worst, float((x.cpu() - y).abs().max()))
    return worst


def _one_round(name: str, device: str) -> State:
    alg = build(registry()[name])
    fed, model = planted_federation(device=device), DNN(5, 3, hidden=8)
    return alg.round(alg.init(fed, model, 3), fed, model)


@pytest.mark.skipif(not CUDA, reason="no CUDA device on this machine")
@pytest.mark.parametrize("name", sorted(registry()))
def test_one_round_on_cuda_equals_cpu(name):
    cpu, cuda = _one_round(name, "cpu"), _one_round(name, "cuda")
    assert next(iter(next(iter(cuda.models.values())).values())).is_cuda
    assert state_difference(cpu, cuda) <= ATOL


def test_the_difference_sees_another_round_and_another_seed():
    """The comparison can fail: two rounds against one, or another seed, are far apart."""
    alg = build(registry()["fedavg"])
    fed, model = planted_federation(), DNN(5, 3, hidden=8)
    one = alg.round(alg.init(fed, model, 3), fed, model)
    assert state_difference(one, _one_round("fedavg", "cpu")) == 0.0
    assert state_difference(one, alg.round(one, fed, model)) > 1e-4
    other = alg.round(alg.init(fed, model, 4), fed, model)
    assert state_difference(one, other) > 1e-4
