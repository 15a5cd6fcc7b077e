"""FedPAC (algorithms/methods/prototypes/fedpac.py): the batched simplex QP against exact active-set
enumeration, a per-client oracle written from the paper (plain loops, float64, the engine's
mini-batch indices, the QPs solved exactly), the mutation it catches, and the reduction
λ = 0 with one client per round = FedRep, bit for bit."""


import pytest
import torch

import algorithms.methods.prototypes.fedpac as fedpac
from algorithms.methods.decoupled.fedrep import FedRep
from algorithms.methods.prototypes.fedpac import FedPAC, project_simplex, simplex_qp
from algorithms.engine.models import DNN
from verification.oracles.prototypes import exact_qp, fedpac_oracle as oracle

C = 4
# the engine's QP stops at a float64 fixed point of FISTA; against the exact KKT solution
# the weights agree to ~1e-13 (measured), and they multiply O(1) heads
ATOL = 1e-9


@pytest.fixture(scope="module")
def model():
    return DNN(6, C, hidden=5)


def _alg(**kw):
    return FedPAC(**{"lam": 1.0, "lr": 0.1, "head_steps": 2, "local_rounds": 3,
                     "batch_size": 5, "clients_per_round": 3, **kw})


def test_simplex_qp_equals_exact_enumeration():
    g = torch.Generator().manual_seed(0)
    for s in (1, 2, 3, 5, 6):
        a = torch.randn(8, s, 3, generator=g, dtype=torch.float64)
        q = torch.bmm(a, a.transpose(1, 2)) + torch.diag_embed(
            0.05 * torch.rand(8, s, generator=g, dtype=torch.float64))
        got = simplex_qp(q)
        for b in range(8):
            torch.testing.assert_close(got[b], exact_qp(q[b]), rtol=0, atol=1e-10)
    # a diagonal Q (identical class statistics, G = 0): α ∝ 1/V
    v = torch.tensor([[1.0, 2.0, 4.0]], dtype=torch.float64)
    torch.testing.assert_close(simplex_qp(torch.diag_embed(v)),
                               (1 / v) / (1 / v).sum(), rtol=0, atol=1e-14)


def test_simplex_qp_sees_a_wrong_projection(monkeypatch):
    # the mutation: clamp-and-renormalise instead of the Euclidean projection
    g = torch.Generator().manual_seed(1)
    a = torch.randn(4, 4, 2, generator=g, dtype=torch.float64)
    q = torch.bmm(a, a.transpose(1, 2)) + 0.01 * torch.eye(4, dtype=torch.float64)
    monkeypatch.setattr(fedpac, "project_simplex",
                        lambda v: v.clamp(min=0) / v.clamp(min=0).sum(-1, keepdim=True))
    bad = fedpac.simplex_qp(q)
    assert max(float((bad[b] - exact_qp(q[b])).abs().max()) for b in range(4)) > 1e-4


def test_project_simplex_is_the_euclidean_projection():
    v = torch.tensor([[0.2, 0.3, 0.5], [2.0, 0.0, 0.0], [0.6, 0.6, -1.0], [-1.0, -2.0, -3.0]],
                     dtype=torch.float64)
    want = torch.tensor([[0.2, 0.3, 0.5], [1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [1.0, 0.0, 0.0]],
                        dtype=torch.float64)
    torch.testing.assert_close(project_simplex(v), want, rtol=0, atol=1e-15)


def _engine(alg, fed, model, seed, rounds):
    s = alg.init(fed, model, seed)
    for _ in range(rounds):
        s = alg.round(s, fed, model)
    return s


def _diff(state, ref):
    body, heads, protos = ref
    d = [float((state.models["shared"][k][0] - v).abs().max()) for k, v in body.items()]
    d += [float((state.models["personal"][k][i] - h[k]).abs().max())
          for i, h in enumerate(heads) for k in h]
    d.append(float((state.models["protos"]["protos"][0] - protos).abs().max()))
    return max(d)


def test_engine_equals_the_per_client_oracle(fed, model):
    alg = _alg()
    ref = oracle(alg, fed, model, seed=5, rounds=2)
    assert _diff(_engine(alg, fed, model, seed=5, rounds=2), ref) <= ATOL


def test_the_oracle_comparison_sees_a_missing_variance_term(fed, model, monkeypatch):
    # the mutation: Q without diag(V) (no variance penalty: each client keeps its own head)
    alg = _alg()
    ref = oracle(alg, fed, model, seed=5, rounds=2)
    original = fedpac.collaboration_matrix
    monkeypatch.setattr(fedpac, "collaboration_matrix", lambda h, v: original(h, 0 * v))
    mutated = _engine(alg, fed, model, seed=5, rounds=2)
    assert _diff(mutated, ref) > 1e-4
    assert _diff(mutated, oracle(alg, fed, model, seed=5, rounds=2, drop_variance=True)) <= ATOL


def test_lambda0_one_client_per_round_is_fedrep(fed, model):
    kw = {"lr": 0.1, "head_steps": 2, "local_rounds": 3, "batch_size": 5, "clients_per_round": 1}
    pac, rep = FedPAC(lam=0.0, **kw), FedRep(**kw)
    a, b = pac.init(fed, model, seed=0), rep.init(fed, model, seed=0)
    for _ in range(3):
        a, b = pac.round(a, fed, model), rep.round(b, fed, model)
    for part in ("shared", "personal"):
        for k, v in b.models[part].items():
            assert torch.equal(a.models[part][k], v), (part, k)
    # with λ > 0 the alignment term changes the body from round 2 on
    c = FedPAC(lam=1.0, **kw).init(fed, model, seed=0)
    for _ in range(3):
        c = FedPAC(lam=1.0, **kw).round(c, fed, model)
    assert not torch.equal(c.models["shared"]["fc1.weight"], b.models["shared"]["fc1.weight"])
