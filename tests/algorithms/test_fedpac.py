"""FedPAC (algorithms/methods/prototypes/fedpac.py): the batched simplex QP against exact active-set
enumeration, a per-client oracle written from the paper (plain loops, float64, the engine's
mini-batch indices, the QPs solved exactly), the mutation it catches, and the reduction
λ = 0 with one client per round = FedRep, bit for bit."""

import itertools

import pytest
import torch
import torch.nn.functional as F

import algorithms.methods.prototypes.fedpac as fedpac
from algorithms.methods.decoupled.fedrep import FedRep
from algorithms.methods.prototypes.fedpac import FedPAC, project_simplex, simplex_qp
from algorithms.engine.models import DNN

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


def exact_qp(q):
    """min αᵀqα on the simplex by enumerating supports (on each support the stationary
    point of the equality-constrained problem; the best non-negative one is optimal)."""
    s = q.shape[0]
    best, value = None, None
    for r in range(1, s + 1):
        for idx in itertools.combinations(range(s), r):
            # the KKT system [[2 q_S, 1], [1ᵀ, 0]] [α; ν] = [0; 1] (regular even when q_S is
            # singular, e.g. the zero row of a client's own distance without variance)
            kkt = torch.zeros(r + 1, r + 1, dtype=q.dtype)
            kkt[:r, :r] = 2 * q[list(idx)][:, list(idx)]
            kkt[:r, r] = kkt[r, :r] = 1
            rhs = torch.zeros(r + 1, dtype=q.dtype)
            rhs[r] = 1
            try:
                a = torch.linalg.solve(kkt, rhs)[:r]
            except RuntimeError:
                continue
            if (a < 0).any():
                continue
            full = torch.zeros(s, dtype=q.dtype)
            full[list(idx)] = a
            v = float(full @ q @ full)
            if value is None or v < value:
                best, value = full, v
    return best


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


# ---- the per-client oracle -------------------------------------------------------------

def o_features(p, x):
    return torch.relu(x @ p["fc1.weight"] + p["fc1.bias"])


def o_statistics(z, y):
    n, d = len(y), z.shape[1]
    h = torch.zeros(C, d, dtype=z.dtype)
    v = 0.0
    for c in range(C):
        zc = z[y == c]
        if len(zc) == 0:
            continue
        p, mu = len(zc) / n, zc.mean(0)
        h[c] = p * mu
        v += p * float((zc * zc).sum(1).mean()) - p * p * float(mu @ mu)
    return h, v / n


def o_sgd(p, keys, x, y, lr, protos=None, known=None, lam=0.0):
    leaves = {k: v.detach().requires_grad_(k in keys) for k, v in p.items()}
    z = o_features(leaves, x)
    loss = F.cross_entropy(z @ leaves["fc2.weight"] + leaves["fc2.bias"], y)
    if protos is not None and any(known):
        reg = sum(((z[b] - protos[y[b]]) ** 2).sum() for b in range(len(y)) if known[int(y[b])])
        loss = loss + lam * reg / (len(y) * z.shape[1])
    grads = torch.autograd.grad(loss, [leaves[k] for k in keys])
    return {**p, **{k: p[k] - lr * g for k, g in zip(keys, grads)}}


def oracle(alg, fed, model, seed, rounds, drop_variance=False):
    w0 = model.init(1, seed=seed, dtype=torch.float64)
    body = {k: w0[k][0] for k in ("fc1.weight", "fc1.bias")}
    heads = [{k: w0[k][0].clone() for k in ("fc2.weight", "fc2.bias")}
             for _ in range(fed.num_clients)]
    d = w0["fc2.weight"].shape[1]
    protos, known = torch.zeros(C, d, dtype=torch.float64), [False] * C
    state = alg.init(fed, model, seed)
    tau = alg.head_steps
    for t in range(rounds):
        phase = alg.first_phase(state.replace(round=t), fed, model)
        chosen = phase.clients.tolist()
        ups = []
        for j, i in enumerate(chosen):
            o, n = int(fed.train.offsets[i]), int(fed.train.counts[i])
            xa, ya = fed.train.x[o:o + n], fed.train.y[o:o + n]
            h, v = o_statistics(o_features(body, xa), ya)
            p = {**body, **heads[i]}
            for r in range(tau + alg.local_rounds):
                idx = phase.batches["sgd"][r, j]
                x, y = fed.train.x[idx], fed.train.y[idx]
                if r < tau:
                    p = o_sgd(p, ["fc2.weight", "fc2.bias"], x, y, alg.lr)
                else:
                    p = o_sgd(p, ["fc1.weight", "fc1.bias"], x, y, alg.lr, protos, known, alg.lam)
            ups.append((n, p, o_features(p, xa), ya, h, 0.0 if drop_variance else v))
        total = sum(u[0] for u in ups)
        body = {k: sum(u[0] * u[1][k] for u in ups) / total for k in body}
        counts, sums = torch.zeros(C, dtype=torch.float64), torch.zeros(C, d, dtype=torch.float64)
        for u in ups:
            for s in range(len(u[3])):
                counts[u[3][s]] += 1
                sums[u[3][s]] += u[2][s]
        for c in range(C):
            if counts[c] > 0:
                protos[c], known[c] = sums[c] / counts[c], True
        m = len(ups)
        for a, i in enumerate(chosen):
            q = torch.zeros(m, m, dtype=torch.float64)
            for j in range(m):
                for k in range(m):
                    q[j, k] = sum(float((ups[a][4][c] - ups[j][4][c]) @ (ups[a][4][c] - ups[k][4][c]))
                                  for c in range(C)) + (ups[j][5] if j == k else 0.0)
            alpha = exact_qp(q)
            heads[i] = {k: sum(alpha[j] * ups[j][1][k] for j in range(m)) for k in heads[i]}
    return body, heads, protos


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
