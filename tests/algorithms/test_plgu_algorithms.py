"""Tests of algorithms/methods/sam/plgu_lf.py, plgu_grep.py, pfedhn.py (docs/formulas.md §D.3–D.7, §E.D5–D6).

References are independent: per-client scalar loops with their own autograd calls and
hand-written SAM/LWSAM perturbations (not algorithms.methods.sam.sam), FedAvg/FedRep from their own
modules, closed forms for a linear hypernetwork, finite differences for the HN products."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from algorithms.engine.base import round_generator, sample_clients
from algorithms.engine.heads import fedrep_update, partial_sgd
from algorithms.methods.decoupled.fedrep import FedRep
from algorithms.methods.averaging.fedavg import FedAvg
from algorithms.engine.models import DNN
from algorithms.methods.sam.pfedhn import PFedHN, PLGUGHN, hn_forward, hn_vjp, init_hypernetwork
from algorithms.methods.sam.plgu_grep import PLGUGRep
from algorithms.methods.sam.plgu_lf import PLGULF, FedSAM
from algorithms.engine.runner import run
from synthetic.federation import Federation

F64 = torch.float64


def planted(n_clients=8, size=60, classes=4, dim=5, seed=0, equal=False):
    """Class-conditional Gaussians (means 3·e_c), each client holding 2 of the classes."""
    rng = np.random.RandomState(seed)
    means = 3.0 * np.eye(classes, dim)
    xs, ys = [], []
    for i in range(n_clients):
        n = size if equal else size + 10 * (i % 3)
        y = rng.choice([i % classes, (i + 1) % classes], size=n)
        xs.append(means[y] + rng.randn(n, dim))
        ys.append(y.astype(np.int64))
    return Federation.from_client_arrays(xs, ys, num_classes=classes, seed=seed,
                                         device="cpu", dtype=F64)


@pytest.fixture(scope="module")
def fed():
    return planted()


@pytest.fixture(scope="module")
def model():
    return DNN(5, 4, hidden=6)


def rounds(alg, fed, model, t, seed=3):
    state = alg.init(fed, model, seed)
    for _ in range(t):
        state = alg.round(state, fed, model)
    return state


def draws(fed, state, steps, batch, s):
    gen = round_generator(state.seed, state.round)
    batches = fed.sample_batches(steps, batch, gen)
    chosen = sample_clients(fed.num_clients, s, gen)
    return fed.train.gather(batches[:, chosen]), chosen


def grad1(model, params1, x, y):
    """One client's gradient (params [1, ...], x [B, ...]) by its own autograd call."""
    leaves = {k: v.detach().clone().requires_grad_(True) for k, v in params1.items()}
    loss = model.per_client_loss(leaves, x[None], y[None]).sum()
    return dict(zip(leaves, torch.autograd.grad(loss, list(leaves.values()))))


def norm(d):
    return torch.sqrt(sum((v ** 2).sum() for v in d.values()))


# ---------------------------------------------------------------- FedSAM
def test_fedsam_rho0_equals_fedavg_exactly(fed, model):
    a = rounds(FedSAM(rho=0.0, local_rounds=3, batch_size=5, clients_per_round=5), fed, model, 3)
    b = rounds(FedAvg(local_rounds=3, batch_size=5, clients_per_round=5), fed, model, 3)
    assert all(torch.equal(a.models["global"][k], b.models["global"][k]) for k in b.models["global"])


def test_fedsam_round_matches_scalar_sam_loop(fed, model):
    alg = FedSAM(rho=0.1, local_rounds=3, batch_size=5, clients_per_round=4, lr=0.1)
    s0 = alg.init(fed, model, 1)
    s1 = alg.round(s0, fed, model)
    (x, y), chosen = draws(fed, s0, 3, 5, 4)
    finals, w0 = [], s0.models["global"]
    for j in range(chosen.numel()):
        w = {k: v.clone() for k, v in w0.items()}
        for r in range(3):
            g = grad1(model, w, x[r, j], y[r, j])
            eps = {k: 0.1 * g[k] / norm(g) for k in g}            # eq. 3, p = 2
            g2 = grad1(model, {k: w[k] + eps[k] for k in w}, x[r, j], y[r, j])
            w = {k: w[k] - 0.1 * g2[k] for k in w}
        finals.append(w)
    n = fed.train.counts[chosen].to(F64)
    ref = {k: sum(n[j] * finals[j][k] for j in range(len(finals))) / n.sum() for k in w0}
    for k in ref:
        torch.testing.assert_close(s1.models["global"][k], ref[k], rtol=1e-12, atol=1e-12)  # float64 reorder


# ---------------------------------------------------------------- PLGU-LF
LF = dict(local_rounds=3, batch_size=5, clients_per_round=5, lr=0.1)


def test_plgu_lf_rho0_global_update_is_fedavg_of_sgd_deltas(fed, model):
    alg = PLGULF(rho=0.0, personalized_layers=1, **LF)
    s1 = rounds(alg, fed, model, 1)
    s2 = alg.round(s1, fed, model)
    (x, y), chosen = draws(fed, s1, 3, 5, 5)
    w = s1.models["global"]
    deltas = []
    for j in range(chosen.numel()):
        wj = {k: v.clone() for k, v in w.items()}
        for r in range(3):
            g = grad1(model, wj, x[r, j], y[r, j])
            wj = {k: wj[k] - 0.1 * g[k] for k in wj}
        deltas.append({k: wj[k] - w[k] for k in w})
    for k in w:
        ref = w[k] + sum(d[k] for d in deltas) / len(deltas)   # server: mean of client deltas
        torch.testing.assert_close(s2.models["global"][k], ref, rtol=1e-12, atol=1e-12)  # float64


def test_plgu_lf_D_equals_L_has_no_perturbation(fed, model):
    big = rounds(PLGULF(rho=0.5, personalized_layers=2, **LF), fed, model, 3)
    none = rounds(PLGULF(rho=0.0, personalized_layers=2, **LF), fed, model, 3)
    for name in ("global", "personalized"):
        assert all(torch.equal(big.models[name][k], none.models[name][k]) for k in none.models[name])


def test_plgu_lf_D0_identity_scaling_global_is_fedsam():
    fed = planted(equal=True)  # equal sizes: FedSAM's weighted mean = PLGU's uniform mean
    model = DNN(5, 4, hidden=6)
    lf = rounds(PLGULF(rho=0.2, personalized_layers=0, layer_scaling="identity", **LF), fed, model, 3)
    sam = rounds(FedSAM(rho=0.2, **LF), fed, model, 3)
    for k in sam.models["global"]:
        torch.testing.assert_close(lf.models["global"][k], sam.models["global"][k],
                                   rtol=1e-10, atol=1e-12)  # float64, different summation order


def test_plgu_lf_round_matches_scalar_reference(fed, model):
    """A round with ξ ≠ 0: scores, top-1 layer, layer receive, Alg. 1, mean of deltas."""
    alg = PLGULF(rho=0.3, personalized_layers=1, **LF)
    s1 = rounds(alg, fed, model, 2)
    s2 = alg.round(s1, fed, model)
    (x, y), chosen = draws(fed, s1, 3, 5, 5)
    w = s1.models["global"]
    layers = model.layers
    ws, thetas = [], {}
    for j, i in enumerate(chosen.tolist()):
        th = {k: v[i:i + 1].clone() for k, v in s1.models["personalized"].items()}
        raw = [float(norm({k: th[k] - w[k] for k in g})) / sum(w[k].numel() for k in g) for g in layers]
        xi = [r / sum(raw) for r in raw] if sum(raw) > 0 else [0.0] * len(raw)
        per = int(np.argmax(xi))                       # D = 1; np.argmax takes the first max
        for l, g in enumerate(layers):
            if l != per:
                th.update({k: w[k].clone() for k in g})
        wj = {k: v.clone() for k, v in w.items()}
        for r in range(3):
            g = grad1(model, th, x[r, j], y[r, j])
            th = {k: th[k] - 0.1 * g[k] for k in th}
            gw = grad1(model, wj, x[r, j], y[r, j])
            scale = {k: (0.0 if l == per else xi[l]) for l, grp in enumerate(layers) for k in grp}
            eps = {k: 0.3 * scale[k] * gw[k] / norm(gw) for k in gw}   # eq. 5, p = 2, Λ on L_Uni
            g2 = grad1(model, {k: wj[k] + eps[k] for k in wj}, x[r, j], y[r, j])
            wj = {k: wj[k] - 0.1 * g2[k] for k in wj}
        ws.append(wj)
        thetas[i] = th
    assert any(xi_ > 0 for xi_ in xi)  # the round under test really perturbs
    for k in w:
        ref = w[k] + sum(d[k] - w[k] for d in ws) / len(ws)
        torch.testing.assert_close(s2.models["global"][k], ref, rtol=1e-11, atol=1e-12)  # float64
        for i, th in thetas.items():
            torch.testing.assert_close(s2.models["personalized"][k][i:i + 1], th[k], rtol=1e-11, atol=1e-12)
    untouched = [i for i in range(fed.num_clients) if i not in thetas]
    for k in w:
        assert torch.equal(s2.models["personalized"][k][untouched], s1.models["personalized"][k][untouched])


def test_plgu_lf_printed_exponent_changes_the_run(fed, model):
    a = rounds(PLGULF(rho=0.3, exponent="corrected", **LF), fed, model, 3)
    b = rounds(PLGULF(rho=0.3, exponent="printed", **LF), fed, model, 3)
    assert not torch.equal(a.models["global"]["fc1.weight"], b.models["global"]["fc1.weight"])


# ---------------------------------------------------------------- PLGU-GRep
GR = dict(head_steps=2, batch_size=5, clients_per_round=5, lr=0.1)


def test_plgu_grep_rho0_is_fedrep_plus_one_sgd_step(fed, model):
    alg = PLGUGRep(rho=0.0, **GR)
    s1 = rounds(alg, fed, model, 2)
    s2 = alg.round(s1, fed, model)
    (x, y), chosen = draws(fed, s1, 3, 5, 5)
    body, head = list(s1.models["shared"]), list(s1.models["personal"])
    params = {**{k: v.expand(5, *v.shape[1:]) for k, v in s1.models["shared"].items()},
              **{k: v[chosen] for k, v in s1.models["personal"].items()}}
    p = fedrep_update(model, params, head, body, x, y, head_steps=2, lr=0.1)   # FedRep, 1 body step
    p = partial_sgd(model, p, body, x[2:], y[2:], 0.1)                          # the extra φ step
    for k in body:
        torch.testing.assert_close(s2.models["shared"][k], p[k].mean(0, keepdim=True),
                                   rtol=1e-12, atol=1e-12)  # float64
    for k in head:
        assert torch.equal(s2.models["personal"][k][chosen], p[k])
    # and FedRep's own round with local_rounds = 1 uses the same draws
    fr = FedRep(local_rounds=1, head_layers=1, **GR).round(s1.replace(models={
        "shared": s1.models["shared"], "personal": s1.models["personal"]}), fed, model)
    for k in head:
        assert torch.equal(fr.models["personal"][k], s2.models["personal"][k])


def test_plgu_grep_perturbation_only_after_first_participation(fed, model):
    n = fed.num_clients
    kw = dict(GR, clients_per_round=n)          # everyone participates every round
    a0 = rounds(PLGUGRep(rho=0.5, **kw), fed, model, 1)
    b0 = rounds(PLGUGRep(rho=0.0, **kw), fed, model, 1)
    assert all(torch.equal(a0.models["shared"][k], b0.models["shared"][k]) for k in a0.models["shared"])
    a1, b1 = rounds(PLGUGRep(rho=0.5, **kw), fed, model, 2), rounds(PLGUGRep(rho=0.0, **kw), fed, model, 2)
    assert not torch.equal(a1.models["shared"]["fc1.weight"], b1.models["shared"]["fc1.weight"])


def test_plgu_grep_printed_eq13_ignores_rho_and_takes_two_g_steps(fed, model):
    a = PLGUGRep(rho=0.7, eq13="printed", **GR)
    s1 = rounds(a, fed, model, 2)
    s2 = a.round(s1, fed, model)
    s2b = PLGUGRep(rho=0.0, eq13="printed", **GR).round(s1, fed, model)
    assert all(torch.equal(s2.models["shared"][k], s2b.models["shared"][k]) for k in s2.models["shared"])
    (x, y), chosen = draws(fed, s1, 3, 5, 5)
    params = {**{k: v.expand(5, *v.shape[1:]) for k, v in s1.models["shared"].items()},
              **{k: v[chosen] for k, v in s1.models["personal"].items()}}
    body = list(s1.models["shared"])
    p = partial_sgd(model, params, list(s1.models["personal"]), x[:2], y[:2], 0.1)
    g, _ = model.grad(p, x[2], y[2])
    for k in body:
        torch.testing.assert_close(s2.models["shared"][k], (p[k] - 0.2 * g[k]).mean(0, keepdim=True),
                                   rtol=1e-12, atol=1e-12)  # float64


# ---------------------------------------------------------------- pFedHN / PLGU-GHN
HN = dict(local_rounds=3, batch_size=5, clients_per_round=4, lr=0.1, hn_lr=1.0,
          embed_dim=3, hn_hidden=7)


def test_hn_vjp_matches_finite_differences(model):
    gen = torch.Generator().manual_seed(0)
    hn = init_hypernetwork(model.init(1, dtype=F64), embed_dim=3, hidden=4, layers=1, gen=gen)
    v = torch.randn(2, 3, generator=gen, dtype=F64)
    out = hn_forward(hn, v)
    delta = {k: torch.randn(o.shape, generator=gen, dtype=F64) for k, o in out.items()}
    g_hn, g_v = hn_vjp(hn, v, delta)

    def surrogate(h, vv):
        o = hn_forward(h, vv)
        return float(sum((o[k] * delta[k]).sum() for k in o))

    h = 1e-6
    for key in ("mlp0.weight", "out:fc2.bias.bias", "out:fc1.weight.weight"):
        idx = (0,) + tuple(0 for _ in hn[key].shape[1:])
        plus = {k: t.clone() for k, t in hn.items()}
        plus[key][idx] += h
        minus = {k: t.clone() for k, t in hn.items()}
        minus[key][idx] -= h
        fd = (surrogate(plus, v) - surrogate(minus, v)) / (2 * h)
        assert abs(fd - float(g_hn[key][idx])) < 1e-7  # central differences, float64, h = 1e-6
    vp, vm = v.clone(), v.clone()
    vp[1, 2] += h
    vm[1, 2] -= h
    assert abs((surrogate(hn, vp) - surrogate(hn, vm)) / (2 * h) - float(g_v[1, 2])) < 1e-7


def test_plgu_ghn_rho0_equals_pfedhn(fed, model):
    a = rounds(PLGUGHN(rho=0.0, **HN), fed, model, 3)
    b = rounds(PFedHN(**HN), fed, model, 3)
    for name in a.models:
        assert all(torch.equal(a.models[name][k], b.models[name][k]) for k in a.models[name])


def test_plgu_ghn_linear_hypernetwork_closed_form(fed, model):
    """hn_layers = 0: w_i = v_i W + b is linear in φ, so the SAM gradient for φ equals pFedHN's
    and only v moves differently: v_i^GHN − v_i^HN = −α ε_W · Δ_i with ε = ρ g/‖g‖."""
    kw = dict(HN, hn_layers=0)
    s0 = PFedHN(**kw).init(fed, model, 5)
    a, b = PLGUGHN(rho=0.4, **kw).round(s0, fed, model), PFedHN(**kw).round(s0, fed, model)
    for k in b.models["hypernetwork"]:
        torch.testing.assert_close(a.models["hypernetwork"][k], b.models["hypernetwork"][k],
                                   rtol=1e-12, atol=1e-13)  # float64, same linear products
    (x, y), chosen = draws(fed, s0, 3, 5, 4)
    hn, v = s0.models["hypernetwork"], s0.models["embeddings"]["v"][chosen]
    w0 = hn_forward(hn, v)
    deltas = {}
    for j in range(4):   # independent local SGD per client
        wj = {k: w0[k][j:j + 1].clone() for k in w0}
        for r in range(3):
            g = grad1(model, wj, x[r, j], y[r, j])
            wj = {k: wj[k] - 0.1 * g[k] for k in wj}
        deltas[j] = {k: w0[k][j] - wj[k][0] for k in w0}
    gW = {k: sum(torch.tensordot(v[j], deltas[j][k], dims=0) for j in range(4)) / 4 for k in w0}
    gb = {k: sum(deltas[j][k] for j in range(4)) / 4 for k in w0}
    gnorm = torch.sqrt(sum((gW[k] ** 2).sum() + (gb[k] ** 2).sum() for k in w0))
    for j, i in enumerate(chosen.tolist()):
        diff = -HN["hn_lr"] * sum((0.4 * gW[k] / gnorm * deltas[j][k]).flatten(1).sum(1) for k in w0)
        torch.testing.assert_close(a.models["embeddings"]["v"][i] - b.models["embeddings"]["v"][i],
                                   diff, rtol=1e-8, atol=1e-12)  # float64 difference of two updates


# ---------------------------------------------------------------- all five: learn, determinism, metrics
ALGS = [FedSAM(rho=0.05, **LF), PLGULF(rho=0.05, **LF), PLGUGRep(rho=0.05, **GR),
        PFedHN(**HN), PLGUGHN(rho=0.05, **HN)]


@pytest.mark.parametrize("alg", ALGS, ids=lambda a: a.name)
def test_learns_planted_problem_deterministically_with_ordered_metrics(alg, fed, model):
    res = run(alg, fed, model, rounds=15, eval_every=5, progress=False, seed=2)
    again = run(alg, fed, model, rounds=15, eval_every=5, progress=False, seed=2)
    for name in res.state.models:
        assert all(torch.equal(res.state.models[name][k], again.state.models[name][k])
                   for k in res.state.models[name])
    last = res.history.last()
    main = "global" if alg.name == "fedsam" else "personalized"
    assert last[f"{main}_accuracy"] > 0.6   # chance is 0.25 (4 classes); 2 classes per client
    for e in res.history.entries:
        for name in alg.evaluated(res.state):
            acc = np.array(e[f"{name}_client_accuracy"])
            assert e[f"{name}_accuracy_low5"] <= e[f"{name}_accuracy_mean"] <= e[f"{name}_accuracy_top5"]
            assert e[f"{name}_accuracy_low5"] == pytest.approx(acc.min(), abs=1e-6)  # 1 client; history rounds to 6 digits
            assert e[f"{name}_accuracy_top5"] == pytest.approx(acc.max(), abs=1e-6)


def test_state_keeps_dtype(model):
    fed32 = planted().to(dtype=torch.float32)
    for alg in ALGS:
        s = rounds(alg, fed32, model, 1)
        assert all(v.dtype == torch.float32 for p in s.models.values() for v in p.values())


def test_validation_errors(fed, model):
    with pytest.raises(ValueError, match="personalized_layers"):
        PLGULF(personalized_layers=3, **LF).init(fed, model, 0)
    with pytest.raises(ValueError, match="head_layers"):
        PLGUGRep(head_layers=2, **GR).init(fed, model, 0)
    with pytest.raises(ValueError, match="exponent"):
        FedSAM(exponent="p-1")
    with pytest.raises(ValueError, match="eq13"):
        PLGUGRep(eq13="g")
    with pytest.raises(ValueError, match="rho"):
        PLGUGHN(rho=-1.0)
    with pytest.raises(ValueError, match="p must"):
        PLGULF(p_norm=1.0)
    with pytest.raises(ValueError, match="layer_scaling"):
        PLGULF(layer_scaling="none")
    with pytest.raises(ValueError, match="clients_per_round"):
        PFedHN(clients_per_round=99).init(fed, model, 0)
