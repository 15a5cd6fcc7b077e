"""CGPFL / CGPFL-Heur (algorithms/methods/clustered/cgpfl.py): reductions, identities, recorded diagnostics.

Golden values come from independent code: the engine's pFedMe, a per-client scalar loop
(verification.experiments.cgpfl.reference_local_round), numpy cluster means, the paper's
matrices in pfl_theory.cgpfl_matrices, autograd, and brute-force counting."""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import algorithms.methods.clustered.cgpfl as cg
from algorithms.engine.base import flatten
from algorithms.methods.clustered.cgpfl import CGPFL, CGPFLHeur
from algorithms.engine.models import build_model
from algorithms.methods.regularized.pfedme import PFedMe
from pfl_theory import cgpfl_matrices as mats
from verification.experiments.cgpfl import (global_update_rhs, planted_federation,
                                            reference_local_round)

F64 = torch.float64
SMALL = dict(num_clients=8, k0=2, dim=5, size_range=(20, 30))
HP = dict(lam=12.0, personal_lr=0.05, inner_steps=3, lr=0.02, local_scale=12.0,
          local_rounds=3, batch_size=5)


@pytest.fixture(scope="module")
def planted():
    pl = planted_federation(**SMALL, seed=0)
    return pl, build_model("mlr", pl.fed)


def _rounds(alg, fed, model, t, seed=0):
    s = alg.init(fed, model, seed)
    states = [s]
    for _ in range(t):
        s = alg.round(s, fed, model)
        states.append(s)
    return states


@pytest.mark.parametrize("mapping", ["default", "local_scale=lambda", "paper 2/N"])
def test_k1_equals_pfedme(planted, mapping):
    pl, model = planted
    fed, n, eta, lam = pl.fed, pl.fed.num_clients, 0.01, 12.0
    scale = {"default": dict(lr=eta), "local_scale=lambda": dict(local_scale=lam, lr=eta),
             "paper 2/N": dict(local_step="paper", lr=eta * lam * n / 2)}[mapping]  # β·2/N = ηλ
    a = CGPFL(num_contexts=1, lam=lam, personal_lr=0.05, inner_steps=3, alpha=0.8,
              local_rounds=3, batch_size=5, **scale)
    b = PFedMe(lam=lam, lr=eta, personal_lr=0.05, inner_steps=3, local_rounds=3, batch_size=5,
               beta=0.8, clients_per_round=n, aggregation="uniform")
    sa, sb = a.init(fed, model, 7), b.init(fed, model, 7)
    for _ in range(4):
        sa, sb = a.round(sa, fed, model), b.round(sb, fed, model)
        # float64; the paper mapping differs from ηλ by one rounding of β·2/N
        torch.testing.assert_close(sa.models["context"], sb.models["global"], rtol=1e-12, atol=1e-14)
        torch.testing.assert_close(sa.models["personalized"], sb.models["personalized"],
                                   rtol=1e-12, atol=1e-14)


def test_alpha1_context_is_cluster_mean(planted):
    pl, model = planted
    s0, s1, s2 = _rounds(CGPFL(num_contexts=2, alpha=1.0, **HP), pl.fed, model, 2)
    ups = flatten(s2.models["local"]).numpy()
    lab = s2.tensors["assignment"].numpy()
    means = np.stack([ups[lab == k].mean(0) for k in range(2)])
    np.testing.assert_allclose(flatten(s2.models["context"]).numpy(), means, rtol=1e-12, atol=1e-14)


def test_alpha_half_matches_paper_aggregation(planted):
    pl, model = planted
    s0, s1, s2 = _rounds(CGPFL(num_contexts=2, alpha=0.5, **HP), pl.fed, model, 2)
    p = mats.assignment_matrix(s2.tensors["assignment"].numpy(), 2)
    want = mats.global_aggregation(flatten(s1.models["context"]).numpy(),
                                   flatten(s2.models["local"]).numpy(), p, alpha=0.5)
    np.testing.assert_allclose(flatten(s2.models["context"]).numpy(), want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("alpha,local_scale", [(1.0, 12.0), (0.6, 0.0)])
def test_global_update_identity_when_stable(planted, alpha, local_scale):
    """ICLR eq. (6) against a per-client loop, in rounds where P^{t+1} = P^t Q^t."""
    pl, model = planted
    hp = {**HP, "local_scale": local_scale, "lr": HP["lr"] if local_scale else 1.0,
          "local_step": "pfedme" if local_scale else "paper"}
    alg = CGPFL(num_contexts=2, alpha=alpha, **hp)
    states = _rounds(alg, pl.fed, model, 4)
    checked = 0
    for s, s_next in zip(states[1:], states[2:]):
        if not torch.equal(s.tensors["assignment"], s_next.tensors["assignment"]):
            continue
        ups, h = reference_local_round(alg, s, pl.fed, model)
        np.testing.assert_allclose(flatten(s_next.models["local"]).numpy(), ups.numpy(),
                                   rtol=1e-11, atol=1e-13)  # loop vs batched: rounding only
        rhs = global_update_rhs(alg, s, s_next, h)
        np.testing.assert_allclose(flatten(s_next.models["context"]).numpy(), rhs.numpy(),
                                   rtol=1e-11, atol=1e-13)
        checked += 1
    assert checked >= 2


def test_recorded_transition_and_distance(planted):
    pl, model = planted
    states = _rounds(CGPFL(num_contexts=3, **HP), pl.fed, model, 3)
    for s, s_next in zip(states, states[1:]):
        old, new = s.tensors["assignment"].numpy(), s_next.tensors["assignment"].numpy()
        q = s_next.tensors["transition"].numpy()
        brute = np.array([[np.sum((old == a) & (new == b)) / max(np.sum(new == b), 1)
                           for b in range(3)] for a in range(3)])
        np.testing.assert_allclose(q, brute, atol=1e-15)
        nonempty = np.bincount(new, minlength=3) > 0
        np.testing.assert_allclose(q.sum(0)[nonempty], 1.0, atol=1e-14)  # column-stochastic
        assert float(s_next.tensors["q_distance"]) == pytest.approx(np.linalg.norm(q - np.eye(3)))


def test_grad_and_gap_diagnostics_match_autograd(planted):
    """With R = 1 the recorded θ̃ is the personalized model; ‖∇G_K‖²/K by autograd of
    G_k(ω) = (K/N) Σ_{i∈C_k} ‖θ̃_i − ω_k‖²."""
    pl, model = planted
    k, n = 2, pl.fed.num_clients
    alg = CGPFL(num_contexts=k, **{**HP, "local_rounds": 1})
    s0, s1, s2 = _rounds(alg, pl.fed, model, 2)
    omega = flatten(s1.models["context"]).clone().requires_grad_(True)
    theta = flatten(s2.models["personalized"])
    lab = s1.tensors["assignment"]
    g_total = (k / n) * ((theta - omega[lab]) ** 2).sum()  # Σ_k G_k
    grad = torch.autograd.grad(g_total, omega)[0]
    assert float(s2.tensors["grad_G_sq_over_K"]) == pytest.approx(float((grad ** 2).sum() / k), rel=1e-12)
    gap = ((theta - omega.detach()[lab]) ** 2).sum(1).mean()
    assert float(s2.tensors["personal_gap_sq"]) == pytest.approx(float(gap), rel=1e-12)


def test_empty_cluster_keeps_its_model(planted, monkeypatch):
    pl, model = planted
    alg = CGPFL(num_contexts=2, **HP)
    s0, s1 = _rounds(alg, pl.fed, model, 1)

    class AllZero:
        def __init__(self, n):
            self.labels = torch.zeros(n, dtype=torch.long)

    monkeypatch.setattr(cg, "align_result", lambda res, old: AllZero(pl.fed.num_clients))
    s2 = alg.round(s1, pl.fed, model)
    torch.testing.assert_close({k: v[1] for k, v in s2.models["context"].items()},
                               {k: v[1] for k, v in s1.models["context"].items()}, rtol=0, atol=0)
    assert float(s2.tensors["transition"][:, 1].sum()) == 0.0  # empty column of P^{t+1}


def test_deterministic_and_initial_assignment(planted):
    pl, model = planted
    alg = CGPFL(num_contexts=3, **HP)
    a, b = _rounds(alg, pl.fed, model, 2, seed=3), _rounds(alg, pl.fed, model, 2, seed=3)
    assert a[0].tensors["assignment"].tolist() == [i % 3 for i in range(pl.fed.num_clients)]
    for k in a[-1].models["context"]:
        assert torch.equal(a[-1].models["context"][k], b[-1].models["context"][k])


def test_heur_freezes_khat_and_finds_k0(monkeypatch):
    pl = planted_federation(16, 3, dim=20, size_range=(40, 80), seed=2)
    model = build_model("mlr", pl.fed)
    import pfl_theory.cgpfl as theory

    calls = []
    real = theory.select_k
    monkeypatch.setattr(theory, "select_k", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    alg = CGPFLHeur(mu=200.0, **{**HP, "inner_steps": 5, "local_rounds": 5, "batch_size": 20})
    states = _rounds(alg, pl.fed, model, 3)
    assert len(calls) == 1  # e(K) solved once, in round 0
    khat = [int(s.tensors["k_hat"]) for s in states[1:]]
    assert khat == [3, 3, 3]
    assert all(int(s.tensors["num_contexts"]) == 3 for s in states[1:])
    assert states[1].tensors["e_values"].shape == (8,)  # K = 1 … N/2


def test_heur_default_mu_is_the_widest_band(monkeypatch):
    # the default μ = 0 means select_k's rule mu_rule (default "widest-band"; "relative" =
    # 1/cost(1)); an explicit μ is passed through in the models' units
    pl = planted_federation(12, 2, dim=10, size_range=(40, 60), seed=1)
    model = build_model("mlr", pl.fed)
    import pfl_theory.cgpfl as theory

    mus, real = [], theory.select_k
    monkeypatch.setattr(theory, "select_k", lambda *a, **kw: mus.append(kw["mu"]) or real(*a, **kw))
    hp = {**HP, "inner_steps": 2, "local_rounds": 2, "batch_size": 20}
    for alg in (CGPFLHeur(**hp), CGPFLHeur(mu_rule="relative", **hp), CGPFLHeur(mu=200.0, **hp)):
        states = _rounds(alg, pl.fed, model, 1)
    assert mus == [theory.WIDEST_BAND_MU, theory.RELATIVE_MU, 200.0]
    # K̂'s band of μ is recorded and contains the μ used
    d = CGPFLHeur(**hp).diagnostics(_rounds(CGPFLHeur(**hp), pl.fed, model, 1)[-1], None, None)
    assert d["mu_band_lo"] <= d["mu"] < d["mu_band_hi"]
    with pytest.raises(ValueError, match="mu"):
        CGPFLHeur(mu=-1.0)
    with pytest.raises(ValueError, match="mu_rule"):
        CGPFLHeur(mu_rule="elbow")


LABELS = st.lists(st.integers(0, 3), min_size=12, max_size=12)


@given(LABELS, LABELS)
def test_matrix_builders_match_paper_matrices(old, new):
    old, new = np.array(old), np.array(new)
    old[:4], new[:4] = range(4), range(4)  # every cluster non-empty
    p = cg.assignment_matrix(torch.as_tensor(new), 4, F64).numpy()
    np.testing.assert_allclose(p, mats.assignment_matrix(new, 4), atol=0)
    q = cg.transition(torch.as_tensor(old), torch.as_tensor(new), 4, 4, F64).numpy()
    np.testing.assert_allclose(q, mats.transition_matrix(old, new, 4), atol=1e-15)
    np.testing.assert_allclose(p.sum(0), 1.0, atol=1e-15)  # column-stochastic
    assert ((p > 0).sum(1) == 1).all()  # one non-zero per row
    j = mats.indicator_matrix(old, 4)
    np.testing.assert_allclose(j @ mats.assignment_matrix(old, 4), np.eye(4), atol=1e-15)


@pytest.mark.parametrize("cls", [CGPFL, CGPFLHeur])
def test_lazy_batches_give_the_same_rounds_bit_for_bit(monkeypatch, cls):
    # every client trains, so the engine gathers one local round at a time (LazyRows);
    # the eager gather of all R rounds at once is the reference: difference 0
    from algorithms.engine.contract import LazyRows
    from algorithms.engine.models import MLR
    from synthetic import fedprox

    fed = fedprox.federation(0.5, 0.5, num_clients=8, dim=6, num_classes=3, seed=0,
                             size_multiplier=1, device="cpu", dtype=torch.float64)
    model, alg = MLR(6, 3), cls(local_rounds=3, batch_size=4)
    sizes = []
    take = LazyRows.take
    monkeypatch.setattr(LazyRows, "take",
                        staticmethod(lambda s, i: sizes.append(i.numel()) or take(s, i)))
    lazy = eager = alg.init(fed, model, 0)
    for _ in range(2):
        lazy = alg.round(lazy, fed, model)
        with monkeypatch.context() as m:
            m.setattr(cls, "lazy_batches", False)
            eager = alg.round(eager, fed, model)
    assert max(sizes) == 8 * 4                      # one round's [N, B] indices per gather
    for name, params in eager.models.items():
        for k, v in params.items():
            assert torch.equal(lazy.models[name][k], v), (name, k)
    for k, v in eager.tensors.items():
        assert torch.equal(lazy.tensors[k], v), k
