import math

import numpy as np
import pytest
import torch
from hypothesis import given, strategies as st

import algorithms.engine.evaluation as evaluation
from algorithms.engine.evaluation import (blocked_layout, evaluate, evaluate_models, summarize,
                                   tail_size)
from algorithms.engine.models import DNN, MLP, MLR
from synthetic.federation import Federation


@given(st.lists(st.floats(0, 1), min_size=1, max_size=80))
def test_low5_le_mean_le_top5(values):
    acc = torch.tensor(values, dtype=torch.float64)
    s = summarize(acc, torch.ones_like(acc))
    assert s["low5"] <= s["mean"] + 1e-12 <= s["top5"] + 2e-12


def test_summaries_hand_sized():
    acc = torch.tensor([0.1, 0.5, 0.9, 1.0] + [0.6] * 16, dtype=torch.float64)   # N = 20 -> tail of ceil(1.0) = 1
    counts = torch.tensor([10, 30, 30, 30] + [0] * 16)
    s = summarize(acc, counts)
    assert tail_size(20) == 1 and tail_size(21) == 2 and tail_size(1) == 1
    assert s["low5"] == 0.1 and s["top5"] == 1.0
    assert math.isclose(s["mean"], (0.1 + 0.5 + 0.9 + 1.0 + 0.6 * 16) / 20)
    assert math.isclose(s["weighted"], (1 + 15 + 27 + 30) / 100)


def test_evaluate_matches_a_per_client_loop():
    rng = np.random.RandomState(0)
    sizes = [7, 40, 3]
    xs = [rng.randn(n, 4) for n in sizes]
    ys = [rng.randint(0, 3, n) for n in sizes]
    fed = Federation.from_client_arrays(xs, ys, num_classes=3, device="cpu", dtype=torch.float64)
    model = MLR(4, 3)
    params = model.init(3, seed=0, dtype=torch.float64, same=False)
    acc, loss = evaluate(model, params, fed.test, block=4)
    for i in range(3):
        o, c = int(fed.test.offsets[i]), int(fed.test.counts[i])
        logits = fed.test.x[o:o + c] @ params["fc.weight"][i] + params["fc.bias"][i]
        y = fed.test.y[o:o + c]
        assert math.isclose(float(acc[i]), float((logits.argmax(1) == y).double().mean()))
        ce = torch.nn.functional.cross_entropy(logits, y)
        assert math.isclose(float(loss[i]), float(ce), rel_tol=1e-12)


def _loop_metrics(model, params, split):
    """Independent per-client loop: torch.argmax and F.cross_entropy on each client."""
    accs, losses = [], []
    for i in range(split.num_clients):
        o, c = int(split.offsets[i]), int(split.counts[i])
        p = {k: v[i if v.shape[0] > 1 else 0][None] for k, v in params.items()}
        logits = model.forward(p, split.x[o:o + c][None])[0]
        y = split.y[o:o + c]
        accs.append(float((logits.argmax(1) == y).double().mean()))
        losses.append(float(torch.nn.functional.cross_entropy(logits, y)))
    return torch.tensor(accs, dtype=torch.float64), torch.tensor(losses, dtype=torch.float64)


def _federation(sizes=(7, 40, 3, 130, 2, 19), dim=5, classes=4, seed=0):
    rng = np.random.RandomState(seed)
    xs = [rng.randn(n, dim) for n in sizes]
    ys = [rng.randint(0, classes, n) for n in sizes]
    return Federation.from_client_arrays(xs, ys, num_classes=classes, device="cpu",
                                         dtype=torch.float64)


@pytest.mark.parametrize("cache", [True, False])
@pytest.mark.parametrize("block", [None, 1, 3, 8, 256])
@pytest.mark.parametrize("model", [MLR(5, 4), DNN(5, 4, hidden=6)])
def test_fused_evaluation_matches_a_per_client_loop(model, block, cache, monkeypatch):
    # personalized [N], global [1] and local [N] together, as pFedMe's runner asks; with the
    # blocked copy kept between calls (the default) and gathered per group (CACHE_BYTES = 0)
    if not cache:
        monkeypatch.setattr(evaluation, "CACHE_BYTES", 0)
    fed = _federation()
    n = fed.num_clients
    models = {"personalized": model.init(n, seed=1, dtype=torch.float64, same=False),
              "global": model.init(1, seed=2, dtype=torch.float64),
              "local": model.init(n, seed=3, dtype=torch.float64, same=False)}
    for split in (fed.train, fed.test):
        got = evaluate_models(model, models, split, block=block)
        assert list(got) == list(models)
        for name, params in models.items():
            acc, loss = _loop_metrics(model, params, split)
            torch.testing.assert_close(got[name][0], acc, rtol=0, atol=1e-12)
            # float64 throughout; log_softmax vs cross_entropy differ by rounding only
            torch.testing.assert_close(got[name][1], loss, rtol=1e-12, atol=1e-12)


def test_blocked_copy_is_kept_and_renewed_when_the_data_change():
    fed = _federation()
    split, model = fed.test, MLR(5, 4)
    params = model.init(fed.num_clients, seed=5, dtype=torch.float64, same=False)
    first = blocked_layout(split, 8)
    assert blocked_layout(split, 8) is first                 # kept: no second copy
    assert blocked_layout(split, 16) is not first            # another block size: new copy
    evaluate(model, params, split, block=8)
    split.x.mul_(-2.0)                                       # in place: same storage
    split.y.copy_(split.y.flip(0))
    acc, loss = evaluate(model, params, split, block=8)      # must not read the old copy
    ref_acc, ref_loss = _loop_metrics(model, params, split)
    torch.testing.assert_close(acc, ref_acc, rtol=0, atol=1e-12)
    torch.testing.assert_close(loss, ref_loss, rtol=1e-12, atol=1e-12)


def test_no_copy_above_the_budget(monkeypatch):
    fed = _federation()
    x_bytes = fed.test.x.numel() * fed.test.x.element_size()
    monkeypatch.setattr(evaluation, "CACHE_BYTES", x_bytes)   # the padded copy is larger
    assert blocked_layout(fed.test, 8) is None
    assert "_eval_layout" not in fed.test.__dict__


def test_loss_only_equals_the_full_evaluation():
    fed = _federation()
    model = MLR(5, 4)
    models = {"p": model.init(fed.num_clients, seed=6, dtype=torch.float64, same=False),
              "g": model.init(1, seed=7, dtype=torch.float64)}
    full = evaluate_models(model, models, fed.train)
    loss_only = evaluate_models(model, models, fed.train, accuracy=False)
    for name in models:
        assert loss_only[name][0] is None
        assert torch.equal(loss_only[name][1], full[name][1])


def test_float32_evaluation_matches_the_loop():
    fed = _federation().to(dtype=torch.float32)
    model = MLR(5, 4)
    params = model.init(fed.num_clients, seed=4, same=False)
    acc, loss = evaluate(model, params, fed.train)
    ref_acc, ref_loss = _loop_metrics(model, params, fed.train)
    torch.testing.assert_close(acc, ref_acc, rtol=0, atol=1e-12)
    # float32 logits, per-block sums of <= 256 rows in float32: ~1e-6 relative
    torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-6)


def test_ties_follow_argmax_first_index():
    # all-zero weights: every class ties, argmax predicts class 0, so accuracy is the
    # share of label 0 (a "correct if the label reaches the maximum" rule would give 1)
    fed = _federation()
    model = MLR(5, 4)
    zero = {k: torch.zeros_like(v) for k, v in model.init(1, dtype=torch.float64).items()}
    acc, loss = evaluate(model, zero, fed.test)
    for i in range(fed.num_clients):
        o, c = int(fed.test.offsets[i]), int(fed.test.counts[i])
        assert float(acc[i]) == float((fed.test.y[o:o + c] == 0).double().mean())
    torch.testing.assert_close(loss, torch.full_like(loss, math.log(4)))


def test_shared_parameters_are_evaluated_once():
    calls = []

    class Counting(MLP):
        def forward(self, params, x):
            calls.append(x.shape)
            return super().forward(params, x)

    fed = _federation()
    model = Counting(5, 4, hidden=(3,))
    p = model.init(fed.num_clients, seed=0, dtype=torch.float64, same=False)
    both = evaluate_models(model, {"a": p, "b": p}, fed.test, block=512)
    assert len(calls) == 1  # one group, one forward for the two names
    assert torch.equal(both["a"][0], both["b"][0])


def test_bad_leading_dimension():
    fed = _federation()
    model = MLR(5, 4)
    with pytest.raises(ValueError, match="leading dimension"):
        evaluate_models(model, {"m": model.init(2, dtype=torch.float64)}, fed.test)


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@cuda
def test_cuda_evaluation_equals_cpu():
    fed = _federation()
    model = MLR(5, 4)
    models = {"p": model.init(fed.num_clients, seed=1, dtype=torch.float64, same=False),
              "g": model.init(1, seed=2, dtype=torch.float64)}
    cpu = evaluate_models(model, models, fed.test)
    dev = evaluate_models(model, {k: {n: v.cuda() for n, v in p.items()} for k, p in models.items()},
                          fed.to("cuda").test)
    for k in models:
        torch.testing.assert_close(dev[k][0].cpu(), cpu[k][0], rtol=0, atol=1e-12)
        torch.testing.assert_close(dev[k][1].cpu(), cpu[k][1], rtol=1e-10, atol=1e-10)


@cuda
def test_cuda_pfedme_round_syncs_do_not_grow_with_steps():
    # no host synchronisation per client or per step: the number of syncs in a round is
    # the same for R = 1 and R = 8 local rounds (K = 5 steps each)
    import warnings

    from algorithms.methods.regularized.pfedme import PFedMe

    fed = _federation().to("cuda", torch.float32)
    model = MLR(5, 4)

    def syncs(rounds):
        alg = PFedMe(local_rounds=rounds, clients_per_round=2)
        state = alg.init(fed, model, 0)
        alg.round(state, fed, model)            # warm-up (lazy CUDA initialisation)
        torch.cuda.set_sync_debug_mode("warn")
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                alg.round(state, fed, model)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        return len(caught)
    assert syncs(1) == syncs(8)


def _scrambled(fed_split):
    """The same clients stored out of order with a gap: offsets not in client order."""
    from synthetic.federation import Split
    n = fed_split.num_clients
    order = list(range(n))[::-1]
    xs, ys, offsets, at = [], [], [], 3            # 3 leading rows owned by no client
    xs.append(fed_split.x[:3]), ys.append(fed_split.y[:3])
    off = [0] * n
    for i in order:
        o, c = int(fed_split.offsets[i]), int(fed_split.counts[i])
        off[i] = at
        xs.append(fed_split.x[o:o + c]), ys.append(fed_split.y[o:o + c])
        at += c
    return Split(torch.cat(xs), torch.cat(ys), torch.tensor(off), fed_split.counts.clone())


@pytest.mark.parametrize("scrambled", [False, True])
@pytest.mark.parametrize("model", [MLR(5, 4), DNN(5, 4, hidden=6), MLP(5, 4, hidden=(3,))])
def test_shared_models_take_the_flat_path_and_match_the_loop(model, scrambled, monkeypatch):
    # every model shared ([1, ...]): no blocks; rows read in place (client order) or gathered
    # (out of order, with rows owned by no client), one product per chunk of rows
    monkeypatch.setattr(evaluation, "GROUP_BYTES", 5 * 8 * 7)   # chunks of 256 rows: several
    fed = _federation(sizes=(7, 400, 3, 130, 2, 190))
    split = _scrambled(fed.train) if scrambled else fed.train
    models = {"global": model.init(1, seed=2, dtype=torch.float64),
              "other": model.init(1, seed=5, dtype=torch.float64)}
    calls = []
    monkeypatch.setattr(evaluation, "_evaluate_shared",
                        lambda *a, _f=evaluation._evaluate_shared: calls.append(1) or _f(*a))
    got = evaluate_models(model, models, split)
    assert calls == [1]
    blocked = evaluate_models(model, models, split, block=8)   # the per-block path
    for name, params in models.items():
        acc, loss = _loop_metrics(model, params, split)
        torch.testing.assert_close(got[name][0], acc, rtol=0, atol=1e-12)
        torch.testing.assert_close(got[name][1], loss, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(got[name][1], blocked[name][1], rtol=1e-12, atol=1e-12)


def test_flat_path_owner_mutation_is_caught(monkeypatch):
    # a wrong owner (rows credited one client later) must disagree with the loop
    fed = _federation()
    model = MLR(5, 4)
    g = {"g": model.init(1, seed=2, dtype=torch.float64)}
    owner, rows = evaluation.row_owners(fed.test)
    monkeypatch.setattr(evaluation, "row_owners",
                        lambda split: (torch.roll(owner, 1), rows))
    got = evaluate_models(model, g, fed.test)["g"][1]
    _, loss = _loop_metrics(model, g["g"], fed.test)
    assert not torch.allclose(got, loss, rtol=1e-6, atol=1e-6)


def test_wide_layers_are_evaluated_in_smaller_groups_with_the_same_result(monkeypatch):
    """ACTIVATION_BYTES caps a group's [rows, width] activations: one block per group gives
    the same per-client numbers (the per-block sums do not depend on the grouping)."""
    fed = _federation()
    model = DNN(5, 4, hidden=64)
    models = {"p": model.init(fed.num_clients, seed=6, dtype=torch.float64, same=False)}
    default = evaluate_models(model, models, fed.train, block=8)
    calls = []
    real = evaluation._Stacked.logits

    def counted(self, clients, x):
        calls.append(x.shape[0])
        return real(self, clients, x)
    monkeypatch.setattr(evaluation._Stacked, "logits", counted)
    monkeypatch.setattr(evaluation, "ACTIVATION_BYTES", 1)
    grouped = evaluate_models(model, models, fed.train, block=8)
    assert calls and max(calls) == 1            # one block per group
    for a, b in zip(default["p"], grouped["p"]):
        assert torch.equal(a, b)
