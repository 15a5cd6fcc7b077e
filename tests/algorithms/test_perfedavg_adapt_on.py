"""Per-FedAvg's ``adapt_on="test"`` option (the public pFedMe code's evaluation)."""

import pytest
import torch

from algorithms.engine.base import broadcast
from algorithms.engine.models import build_model
from algorithms.methods.regularized.perfedavg import PerFedAvg
from verification.experiments.cgpfl import planted_federation

KW = dict(lr=0.1, inner_lr=0.05, variant="fo", clients_per_round=4, local_rounds=2,
          batch_size=5)


def test_adapt_on_test_is_an_alpha_then_beta_step_on_test_batches():
    fed = planted_federation(8, 2, dim=6, size_range=(20, 30), seed=1).fed
    model = build_model("mlr", fed)
    honest, leaky = PerFedAvg(**KW), PerFedAvg(adapt_on="test", **KW)
    a = honest.round(honest.init(fed, model, 0), fed, model)
    s0 = leaky.init(fed, model, 0)
    b = leaky.round(s0, fed, model)
    for k in a.models["global"]:  # training is untouched: only the evaluated model differs
        assert torch.equal(a.models["global"][k], b.models["global"][k])
    # independent reimplementation of the two test-batch steps from the same stream
    gen = s0.generator(1)  # the evaluation stream of the round that produced b
    counts, offsets = fed.test.counts, fed.test.offsets
    w = broadcast(b.models["global"], fed.num_clients)
    for step in (KW["inner_lr"], KW["lr"]):
        u = torch.rand((fed.num_clients, KW["batch_size"]), generator=gen, dtype=torch.float64)
        idx = torch.stack([offsets[i] + torch.clamp((u[i] * counts[i]).long(), max=counts[i] - 1)
                           for i in range(fed.num_clients)])
        assert bool((idx >= offsets[:, None]).all() and (idx < (offsets + counts)[:, None]).all())
        x, y = fed.test.x[idx], fed.test.y[idx]
        g, _ = model.grad(w, x, y)
        w = {k: w[k] - step * g[k] for k in w}
    for k in w:
        assert torch.allclose(b.models["personalized"][k], w[k], rtol=0, atol=1e-12)
        assert not torch.allclose(a.models["personalized"][k], w[k])


def test_adapt_on_rejects_unknown_value():
    with pytest.raises(ValueError, match="adapt_on"):
        PerFedAvg(adapt_on="validation")
