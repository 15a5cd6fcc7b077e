"""The baseline's two evaluations (full-split DataLoader as the public pFedMe code, and
direct slices) give the same per-client numbers, and the engine's evaluation agrees with
them on the same parameters — so the benchmark compares equal work."""

import numpy as np
import torch

from algorithms.engine.evaluation import evaluate_models
from algorithms.engine.models import MLR
from algorithms.methods.regularized.pfedme import PFedMe
from synthetic import fedprox


def test_dataloader_and_sliced_evaluations_agree_with_the_engine(load_script):
    ref_mod = load_script("reference_pfedme")
    fed = fedprox.federation(0.5, 0.5, num_clients=4, seed=0, max_client_size=60,
                             device="cpu")
    alg = PFedMe(local_rounds=2, inner_steps=2, batch_size=5, clients_per_round=2)
    ref = ref_mod.ReferencePFedMe(alg, fed, clients=[0, 2, 3])
    ref.round()                                            # models differ per client now
    loader, sliced = ref.evaluate(), ref.evaluate_sliced()
    for name in ("personalized", "global", "local"):
        assert loader[name].shape == (3, 4)
        assert np.array_equal(loader[name][:, [0, 2]], sliced[name][:, [0, 2]])  # accuracy
        # the loader's loss is mean·n/n: float64 rounding only
        np.testing.assert_allclose(loader[name][:, [1, 3]], sliced[name][:, [1, 3]],
                                   rtol=1e-12)

    def stacked(params_per_client):
        w = torch.stack([p[0].detach().T for p in params_per_client])
        b = torch.stack([p[1].detach() for p in params_per_client])
        return {"fc.weight": w, "fc.bias": b}

    # the engine on the same parameters, clients 0, 2, 3 of a 4-client federation: client 1
    # gets client 0's parameters and is not compared
    rows = [0, 0, 1, 2]
    models = {"personalized": stacked([list(ref.clients[r].model.parameters()) for r in rows]),
              "global": stacked([ref.global_params]),
              "local": stacked([ref.clients[r].local for r in rows])}
    model = MLR(fed.train.x.shape[1], fed.num_classes)
    for column, split in ((0, fed.test), (2, fed.train)):
        got = evaluate_models(model, models, split)
        for name in models:
            acc, loss = (v[[0, 2, 3]].numpy() for v in got[name])
            np.testing.assert_allclose(acc, loader[name][:, column], atol=1e-12)
            # float32 logits from different kernels: ~1e-7 relative
            np.testing.assert_allclose(loss, loader[name][:, column + 1], rtol=1e-5)


def test_optimizer_step_and_inline_step_give_the_same_parameters(load_script):
    """The baseline's inner step as a ``torch.optim.Optimizer`` (as the public code) and
    inline (the optimistic baseline) is the same arithmetic: equal bit for bit."""
    ref_mod = load_script("reference_pfedme")
    fed = fedprox.federation(0.5, 0.5, num_clients=3, seed=0, max_client_size=40,
                             device="cpu")
    alg = PFedMe(local_rounds=3, inner_steps=2, batch_size=5, clients_per_round=2, code_l2=0.01)
    a = ref_mod.ReferencePFedMe(alg, fed, optimizer_step=True)
    b = ref_mod.ReferencePFedMe(alg, fed, optimizer_step=False)
    assert a.clients[0].optimizer is not None and b.clients[0].optimizer is None
    for _ in range(2):
        a.round()
        b.round()
    for p, q in zip(a.global_params, b.global_params):
        assert torch.equal(p, q)
    for ca, cb in zip(a.clients, b.clients):
        for p, q in zip(ca.model.parameters(), cb.model.parameters()):
            assert torch.equal(p, q)
