"""PPFE for neural networks (algorithms/methods/ppfe/ppfe.py, ppfe_reduction.py, ppfe_ensemble.py):
stage schedule, Remark 3 (one stage + fixed head = FedRep), progressive heads, reductions,
reweighting (eq. 7), weighted sampling, ensemble (eq. 8), communication, ablation flags."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from algorithms.methods.decoupled.fedrep import FedRep
from algorithms.engine.evaluation import evaluate
from algorithms.engine.models import DNN
from algorithms.methods.ppfe.ppfe import PPFE
from algorithms.methods.ppfe.ppfe_ensemble import ensemble_accuracy, ensemble_scores, weighted_batches
from algorithms.engine.models import MLP
from algorithms.methods.ppfe.ppfe_reduction import stage_rounds
from algorithms.engine.runner import run
from synthetic.permuted_labels import permuted_label_federation

WIDTHS = (6, 8, 8, 6, 4)     # MLP: 4 layers → progressive stages 0..3 (+ stage 4 all personal)
BUDGET = 16                  # rounds; default fractions 30/50/40/40 → [3, 5, 4, 4]


@pytest.fixture(scope="module")
def mlp():
    return MLP(6, 4, hidden=WIDTHS[1:-1])


def _ppfe(**kw):
    return PPFE(**{"lr": 0.1, "clients_per_round": 3, "total_rounds": BUDGET, "local_rounds": 4,
                   "head_steps": 4, **kw})


def _at_stage(alg, fed, model, stage, seed=0):
    """State right after the first round of ``stage``."""
    rounds = sum(alg.schedule(model)[:stage]) + 1
    return run(alg, fed, model, rounds=rounds, seed=seed, progress=False, eval_every=10**6).state


# ---- schedule -------------------------------------------------------------------------

def test_default_schedule_is_the_papers():
    assert stage_rounds(160, [30, 50, 40, 40], 4) == [30, 50, 40, 40]
    assert stage_rounds(16, [30, 50, 40, 40], 4) == [3, 5, 4, 4]   # 1 + ⌊12·f⌋, remainders


@given(total=st.integers(4, 500), fr=st.lists(st.floats(0.1, 10), min_size=4, max_size=6))
def test_schedule_sums_to_budget_and_is_proportional(total, fr):
    t = len(fr)
    rounds = stage_rounds(total, fr, t) if total >= t else None
    if rounds is None:
        return
    assert sum(rounds) == total and min(rounds) >= 1
    for r, f in zip(rounds, fr):      # 1 reserved + share of the rest, rounding moves ≤ 1
        assert abs(r - (1 + (total - t) * f / sum(fr))) < 1 + 1e-9


def test_schedule_validation_and_stage_clipping():
    with pytest.raises(ValueError, match="stage fractions"):
        PPFE(stages=5)
    with pytest.raises(ValueError, match="total_rounds"):
        PPFE(total_rounds=3)
    with pytest.raises(ValueError, match="reduction"):
        PPFE(reduction="prune")
    dnn = DNN(6, 4, hidden=5)          # 2 layers → at most 3 progressive stages
    assert PPFE().num_stages(dnn) == 3 and PPFE(fixed_head=1).num_stages(dnn) == 4
    assert sum(PPFE(total_rounds=40).schedule(dnn)) == 40


# ---- Remark 3 and invariants ----------------------------------------------------------

@pytest.mark.parametrize("k,reduction", [(1, "svd"), (2, "mask")])
def test_one_stage_fixed_head_equals_fedrep(fed, mlp, k, reduction):
    common = dict(lr=0.1, clients_per_round=3, local_rounds=3, head_steps=2, batch_size=7)
    ppfe = PPFE(stages=1, stage_fractions="1", fixed_head=k, total_rounds=4, reduction=reduction,
                full_last_round=False, **common)
    rep = FedRep(head_layers=k, **common)
    a = run(ppfe, fed, mlp, rounds=4, seed=3, progress=False, eval_every=100).state
    b = run(rep, fed, mlp, rounds=4, seed=3, progress=False, eval_every=100).state
    pa, pb = ppfe.evaluated(a)["stage"], rep.evaluated(b)["personalized"]
    assert pa.keys() == pb.keys()
    for key in pa:
        assert torch.equal(pa[key], pb[key]), key


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_progressive_heads_body_shared_heads_personal(fed, mlp, stage):
    alg = _ppfe(reduction="none")
    state = _at_stage(alg, fed, mlp, stage)
    assert alg.stored_stage(state) == stage
    head_layers = {k.split(".")[0] for k in state.models["heads"]}
    assert head_layers == {f"fc{l}" for l in range(5 - stage, 5)}
    p = alg.evaluated(state)["stage"]
    for k in state.models["body"]:
        assert bool((p[k] == p[k][:1]).all())
    assert not bool((p["fc4.weight"] == p["fc4.weight"][:1]).all())
    assert all(f"stage{t}" in state.models for t in range(stage))


def test_deterministic_same_seed(fed, mlp):
    alg = _ppfe(reduction="mask")
    a = _at_stage(alg, fed, mlp, 2, seed=9)
    b = _at_stage(alg, fed, mlp, 2, seed=9)
    for name in a.models:
        for k in a.models[name]:
            assert torch.equal(a.models[name][k], b.models[name][k])
    for k in a.tensors:
        assert torch.equal(a.tensors[k], b.tensors[k])


def test_learns_planted_problem_above_chance(fed):
    wide = MLP(6, 4, hidden=(16, 16, 8))     # the narrow test MLP learns too slowly at 16 rounds
    alg = _ppfe(lr=0.3, local_rounds=8, head_steps=8)
    res = run(alg, fed, wide, rounds=BUDGET, seed=0, eval_every=BUDGET, progress=False)
    # chance ≈ 1/3 (3 classes per client)
    assert res.history.last()["ensemble_accuracy"] > 0.6


# ---- reweighting and ensemble ---------------------------------------------------------

def test_reweighting_normalised_and_matches_eq7(fed, mlp):
    beta = 0.8
    alg = _ppfe(inverse_temperature=beta, reduction="none")
    before = run(alg, fed, mlp, rounds=alg.schedule(mlp)[0], seed=0, progress=False,
                 eval_every=100).state
    after = alg.advance(before, fed, mlp)
    w0, w1 = before.tensors["weights"], after.tensors["weights"]
    prev = alg.stage_model(before)
    for i in range(fed.num_clients):   # independent scalar loop over each client's samples
        o, n = int(fed.train.offsets[i]), int(fed.train.counts[i])
        x, y = fed.train.x[o:o + n], fed.train.y[o:o + n]
        logits = mlp.forward({k: v[i:i + 1] for k, v in prev.items()}, x[None])[0]
        miss = (logits.argmax(-1) != y).double()
        expect = w0[o:o + n] * torch.exp(beta * miss)
        expect = expect / expect.sum()
        torch.testing.assert_close(w1[o:o + n], expect, rtol=1e-12, atol=0)  # float64 rounding
        assert abs(float(w1[o:o + n].sum()) - 1) < 1e-12 and bool((w1 >= 0).all())
        eps = min(max(float((w0[o:o + n] * miss).sum()), 1e-10), 1 - 1e-10)   # the documented clip
        expect_alpha = max(0.0, math.log((1 - eps) / eps) + math.log(4 - 1))      # SAMME, C = 4
        assert abs(float(after.tensors["alphas"][0, i]) - expect_alpha) < 1e-9


def test_no_reweighting_keeps_uniform_weights(fed, mlp):
    alg = _ppfe(reweighting=False)
    state = _at_stage(alg, fed, mlp, 2)
    for i in range(fed.num_clients):
        o, n = int(fed.train.offsets[i]), int(fed.train.counts[i])
        torch.testing.assert_close(state.tensors["weights"][o:o + n],
                                   torch.full((n,), 1.0 / n, dtype=torch.float64))


def test_weighted_batches_follow_the_weights(fed):
    w = torch.zeros(fed.train.y.shape[0], dtype=torch.float64)
    o0 = int(fed.train.offsets[0])
    w[o0:o0 + 3] = torch.tensor([0.7, 0.2, 0.1], dtype=torch.float64)
    for i in range(1, fed.num_clients):
        o, n = int(fed.train.offsets[i]), int(fed.train.counts[i])
        w[o:o + n] = 1.0 / n
    idx = weighted_batches(fed.train, w, 200, 100, torch.Generator().manual_seed(0))
    assert idx.shape == (200, fed.num_clients, 100)
    freq = torch.bincount(idx[:, 0].flatten() - o0, minlength=3).double() / 20000
    # 20000 draws: standard error ≤ 0.0033, so 0.02 is > 6 standard errors
    assert torch.allclose(freq[:3], torch.tensor([0.7, 0.2, 0.1], dtype=torch.float64), atol=0.02)
    lo, hi = fed.train.offsets, fed.train.offsets + fed.train.counts
    assert bool(((idx >= lo[None, :, None]) & (idx < hi[None, :, None])).all())


def test_ensemble_scores_hand_sized():
    # 2 stages, 1 client, 1 sample, 3 classes: stage 0 votes class 0, stage 1 votes class 2
    z0 = torch.tensor([[2.0, 0.0, 1.0]])
    z1 = torch.tensor([[0.0, 1.0, 3.0]])
    clients = torch.tensor([0])
    h = ensemble_scores([z0, z1], torch.tensor([[0.5], [1.5]]), clients, "votes")
    assert h.tolist() == [[0.5, 0.0, 1.5]]
    h = ensemble_scores([z0, z1], torch.tensor([[2.0], [1.0]]), clients, "logits")
    assert h.tolist() == [[4.0, 1.0, 5.0]]
    h = ensemble_scores([z0, z1], torch.tensor([[0.0], [0.0]]), clients, "votes")  # fallback: equal
    assert h.tolist() == [[1.0, 0.0, 1.0]]


def test_single_stage_ensemble_equals_stage_model(fed, mlp):
    alg = _ppfe()
    state = run(alg, fed, mlp, rounds=2, seed=0, progress=False, eval_every=100).state
    params = alg.stage_model(state)
    acc_e, summary = ensemble_accuracy(mlp, [params], torch.ones(1, fed.num_clients), fed.test)
    acc_s, loss_s = evaluate(mlp, params, fed.test)
    torch.testing.assert_close(acc_e, acc_s)
    w = fed.test.counts.double()
    # one stage: the α-mixture is the model's softmax, so the loss is its cross-entropy
    assert abs(summary["loss"] - float((loss_s * w).sum() / w.sum())) < 1e-10


def test_beta_rule_alpha_is_samme_update(fed, mlp):
    alg = _ppfe(beta_rule="alpha", reduction="none")
    before = run(alg, fed, mlp, rounds=alg.schedule(mlp)[0], seed=1, progress=False,
                 eval_every=100).state
    after = alg.advance(before, fed, mlp)
    prev, w0, w1 = alg.stage_model(before), before.tensors["weights"], after.tensors["weights"]
    for i in range(fed.num_clients):
        o, n = int(fed.train.offsets[i]), int(fed.train.counts[i])
        logits = mlp.forward({k: v[i:i + 1] for k, v in prev.items()}, fed.train.x[None, o:o + n])[0]
        miss = (logits.argmax(-1) != fed.train.y[o:o + n]).double()
        expect = w0[o:o + n] * torch.exp(float(after.tensors["alphas"][0, i]) * miss)
        torch.testing.assert_close(w1[o:o + n], expect / expect.sum(), rtol=1e-12, atol=0)


def test_float32_federation_keeps_dtype_and_normalisation():
    fed32 = permuted_label_federation(num_clients=5, num_clusters=4, classes_per_client=3, dim=6,
                                      size_range=(40, 60), seed=2, device="cpu",
                                      dtype=torch.float32)
    alg = _ppfe(total_rounds=8, score="loss", ensemble="votes", local_update="joint")
    mlp = MLP(6, 4, hidden=WIDTHS[1:-1])
    state = run(alg, fed32, mlp, rounds=8, seed=0, progress=False, eval_every=8).state
    assert state.tensors["weights"].dtype == torch.float32 == state.tensors["alphas"].dtype
    sums = torch.zeros(fed32.num_clients, dtype=torch.float64)
    sums.index_add_(0, torch.repeat_interleave(torch.arange(5), fed32.train.counts),
                    state.tensors["weights"].double())
    assert torch.allclose(sums, torch.ones(5, dtype=torch.float64), atol=1e-5)  # float32 storage


# ---- reductions -----------------------------------------------------------------------

def test_svd_reduction_rank_and_effective_params(fed, mlp):
    alg = _ppfe(reduction="svd", shrink=0.5)
    state = _at_stage(alg, fed, mlp, 2)          # heads fc3 (8→6), fc4 (6→4); γ² = 1/4
    heads = state.models["heads"]
    for key, (d_in, d_out) in {"fc3.weight": (8, 6), "fc4.weight": (6, 4)}.items():
        r = math.ceil(min(d_in, d_out) / 4)
        s = np.linalg.svd(heads[key].numpy(), compute_uv=False)   # independent: numpy SVD
        assert (s[:, r:] < 1e-10).all() and (s[:, :r].min() > 1e-6)
    d = alg.diagnostics(state, fed, mlp)
    assert d["personal_params"] == 2 * (8 + 6) + 6 + 1 * (6 + 4) + 4


def test_width_and_mask_reductions(fed, mlp):
    state = _at_stage(_ppfe(reduction="width", shrink=0.5), fed, mlp, 2)
    w3 = state.models["heads"]["fc3.weight"]           # reads only the first ⌈8/4⌉ = 2 inputs
    assert bool((w3[:, 2:] == 0).all()) and bool((w3[:, :2] != 0).any())
    alg = _ppfe(reduction="mask", shrink=0.5)
    state = _at_stage(alg, fed, mlp, 2)
    w4 = state.models["heads"]["fc4.weight"]            # fan-in ⌈6/4⌉ = 2 per output unit
    nz = (w4 != 0)
    assert bool((nz.sum(1) == 2).all())
    assert bool((nz == nz[:1]).all())                   # same mask on every client
    d = alg.diagnostics(state, fed, mlp)
    assert d["personal_params"] == 4 * 2 + 6 * 2 + 6 + 4   # fc4: 4·2, fc3: 6 outputs·⌈8/4⌉


def test_no_reduction_keeps_full_heads(fed, mlp):
    alg = _ppfe(reduction="none")
    state = _at_stage(alg, fed, mlp, 2)
    d = alg.diagnostics(state, fed, mlp)
    assert d["personal_params"] == 8 * 6 + 6 + 6 * 4 + 4
    s = np.linalg.svd(state.models["heads"]["fc3.weight"].numpy(), compute_uv=False)
    assert (s.min(1) > 1e-8).all()


@pytest.mark.parametrize("k", [1, 2, 3])
def test_fixed_head_ablation(fed, mlp, k):
    alg = _ppfe(fixed_head=k, reduction="none")
    state = _at_stage(alg, fed, mlp, 3)
    assert {key.split(".")[0] for key in state.models["heads"]} == {f"fc{l}" for l in range(5 - k, 5)}


# ---- communication --------------------------------------------------------------------

def test_communication_accounting(fed, mlp):
    alg = _ppfe()
    sizes = [WIDTHS[l] * WIDTHS[l + 1] + WIDTHS[l + 1] for l in range(4)]
    bounds = np.cumsum([3, 5, 4, 4])
    expect = [0, 0, 0, 0]
    for t in range(BUDGET + 2):                       # two rounds past the budget: last stage
        s = min(int(np.searchsorted(bounds, t, side="right")), 3)
        participants = fed.num_clients if (t + 1) in bounds else 3
        expect[s] += 2 * participants * sum(sizes[:4 - s])
    assert alg.communication(mlp, fed.num_clients, BUDGET + 2) == expect
    state = run(alg, fed, mlp, rounds=BUDGET + 2, seed=0, progress=False, eval_every=100).state
    d = alg.diagnostics(state, fed, mlp)
    assert d["comm_params_total"] == sum(expect)
    assert [d[f"comm_params_stage{t}"] for t in range(4)] == expect
    assert d["shared_params"] == sizes[0]


def test_heads_of_the_ppfe_cnn_span_its_dense_layers_only():
    """PPFE's CNN (cnn3: 2 conv + 3 dense, PPFE §6/App. A.1): progressive stages personalize
    the last 1, 2, 3 dense layers and never a convolution — the 4 stages of the paper even
    when more are asked; a fixed head of 4 layers is refused."""
    from algorithms.engine.models import build_model

    class Images:
        feature_shape, num_classes = (1, 28, 28), 10
    cnn3 = build_model("cnn3", Images())
    assert len(cnn3.layers) == 5 and cnn3.head_span == 3
    alg = _ppfe(stages=6, total_rounds=60, stage_fractions="1,1,1,1,1,1")
    assert alg.num_stages(cnn3) == 4
    heads = [alg.keys_at(s, cnn3)[1] for s in range(4)]
    assert heads[0] == [] and heads[3] == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias",
                                          "fc3.weight", "fc3.bias"]
    assert all(not k.startswith("conv") for h in heads for k in h)
    # the CGPFL CNN sets no span: a layer-wise method may personalize every layer
    assert alg.num_stages(build_model("cnn", Images())) == 5
    from algorithms.testing import planted_images

    fed = planted_images()
    small = build_model("cnn3", fed, hidden=(8, 6))
    assert _ppfe(fixed_head=3).init(fed, small, 0).round == 0
    with pytest.raises(ValueError, match="fixed_head=4 exceeds the 3 layers"):
        _ppfe(fixed_head=4).init(fed, small, 0)


def test_stage_fractions_of_any_finite_size_are_relative_sizes():
    # mutation caught: (total - t) * v / sum(f) overflowing (issue 43: --stage-fractions
    # 1e308,... ended in "cannot convert float infinity to integer")
    assert stage_rounds(8, [1e308, 1e308, 1, 1], 4) == [3, 3, 1, 1]
    assert stage_rounds(160, [1e308, 1, 1, 1], 4) == [157, 1, 1, 1]
    assert stage_rounds(160, [3e307, 5e307, 4e307, 4e307], 4) == [30, 50, 40, 40]
