"""Oracles of the prototype family: FedProto, FedPAC (moved from their tests; pFedFDA in
:mod:`verification.oracles.pfedfda`).
Plain loops over clients and classes, float64, autograd; the draws are the method's
``first_phase`` (its mini-batches and sampled clients).  The settings have ``C`` = 4 classes
and a one-hidden-layer ReLU network (fc1 = body, fc2 = head)."""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F

from verification.oracles import common as o
from verification.oracles.registry import Oracle, algorithm, per_round, register_oracle

C = o.CLASSES


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


# ---- FedPAC ------------------------------------------------------------

def pac_features(p, x):
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
    z = pac_features(leaves, x)
    loss = F.cross_entropy(z @ leaves["fc2.weight"] + leaves["fc2.bias"], y)
    if protos is not None and any(known):
        reg = sum(((z[b] - protos[y[b]]) ** 2).sum() for b in range(len(y)) if known[int(y[b])])
        loss = loss + lam * reg / (len(y) * z.shape[1])
    grads = torch.autograd.grad(loss, [leaves[k] for k in keys])
    return {**p, **{k: p[k] - lr * g for k, g in zip(keys, grads)}}


def fedpac_oracle(alg, fed, model, seed, rounds, drop_variance=False):
    """FedPAC (Xu, Tong, Huang, ICLR 2023), Algorithm 1, one client at a time: τ head steps
    then body steps with the prototype regulariser λ·mean‖z − c_y‖² (known classes only),
    the clients' feature statistics (h_i, V_i) under the round's starting body on their
    *training* data, the sample-weighted body mean, count-weighted prototypes, and each
    client's head the QP-optimal combination (eq. 9) of the participants' heads, the QP
    solved exactly by enumeration of its supports (:func:`exact_qp`).  The draws are the
    method's ``first_phase``.  ``drop_variance``: the mutation (Q without diag(V)).
    Returns (body, heads, prototypes)."""
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
            h, v = o_statistics(pac_features(body, xa), ya)
            p = {**body, **heads[i]}
            for r in range(tau + alg.local_rounds):
                idx = phase.batches["sgd"][r, j]
                x, y = fed.train.x[idx], fed.train.y[idx]
                if r < tau:
                    p = o_sgd(p, ["fc2.weight", "fc2.bias"], x, y, alg.lr)
                else:
                    p = o_sgd(p, ["fc1.weight", "fc1.bias"], x, y, alg.lr, protos, known, alg.lam)
            ups.append((n, p, pac_features(p, xa), ya, h, 0.0 if drop_variance else v))
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


# ---- FedProto ----------------------------------------------------------

def proto_features(p, x):
    return torch.relu(x @ p["fc1.weight"] + p["fc1.bias"])


def fedproto_oracle(alg, fed, model, seed, rounds, sign=1.0):
    """FedProto (Tan et al., AAAI 2022), Algorithm 1: client models and global prototypes
    after ``rounds`` rounds, one client at a time: R SGD steps on CE + λ·mean‖z − c̄_y‖²
    (known classes), then the client's per-class feature sums over its *training* rows
    (eq. 5), averaged by class counts at the server (eq. 6).  Draws: the method's
    ``first_phase``.
    ``sign = -1``: the mutation (the regulariser pushes features away)."""
    n = fed.num_clients
    w0 = model.init(1, seed=seed, dtype=torch.float64)
    models = [{k: v[0].clone() for k, v in w0.items()} for _ in range(n)]
    d = w0["fc2.weight"].shape[1]
    protos = torch.zeros(C, d, dtype=torch.float64)
    known = [False] * C
    state = alg.init(fed, model, seed)
    for t in range(rounds):
        phase = alg.first_phase(state.replace(round=t), fed, model)
        counts, sums = torch.zeros(C, dtype=torch.float64), torch.zeros(C, d, dtype=torch.float64)
        for j, i in enumerate(phase.clients.tolist()):
            p = models[i]
            for r in range(alg.local_rounds):
                idx = phase.batches["sgd"][r, j]
                x, y = fed.train.x[idx], fed.train.y[idx]
                leaves = {k: v.detach().requires_grad_(True) for k, v in p.items()}
                z = proto_features(leaves, x)
                loss = F.cross_entropy(z @ leaves["fc2.weight"] + leaves["fc2.bias"], y)
                if any(known):
                    reg = 0.0
                    for b in range(len(y)):
                        if known[int(y[b])]:
                            reg = reg + ((z[b] - protos[y[b]]) ** 2).sum()
                    loss = loss + sign * alg.lam * reg / (len(y) * d)
                grads = torch.autograd.grad(loss, list(leaves.values()))
                p = {k: v - alg.lr * g for (k, v), g in zip(p.items(), grads)}
            models[i] = p
            o, m = int(fed.train.offsets[i]), int(fed.train.counts[i])
            z = proto_features(p, fed.train.x[o:o + m])
            for s in range(m):                               # eq. 5, summed; eq. 6 below
                counts[fed.train.y[o + s]] += 1
                sums[fed.train.y[o + s]] += z[s]
        for c in range(C):
            if counts[c] > 0:
                protos[c] = sums[c] / counts[c]
                known[c] = True
    return models, protos, known


# ---- registration ---------------------------------------------------------------------

def _proto_ref(ref):
    models, protos, known = ref
    return {**{f"personalized/{k}": torch.stack([m[k] for m in models]) for k in models[0]},
            "protos": protos, "known": torch.tensor(known, dtype=torch.float64)}


def _proto_observe(alg, state, fed, model):
    return {**{f"personalized/{k}": v for k, v in state.models["personalized"].items()},
            "protos": state.models["protos"]["protos"][0],
            "known": state.models["protos"]["known"][0].double()}


def _pac_ref(ref):
    body, heads, protos = ref
    return {**{f"shared/{k}": v for k, v in body.items()},
            **{f"personal/{k}": torch.stack([h[k] for h in heads]) for k in heads[0]},
            "protos": protos}


def _pac_observe(alg, state, fed, model):
    return {**{f"shared/{k}": v[0] for k, v in state.models["shared"].items()},
            **{f"personal/{k}": v for k, v in state.models["personal"].items()},
            "protos": state.models["protos"]["protos"][0]}


register_oracle(Oracle(
    "fedproto", "FedProto (Tan et al., AAAI 2022)", "Algorithm 1, eqs. 5-6",
    algorithm("fedproto", lam=1.0, lr=0.1, local_rounds=4, batch_size=5, clients_per_round=3),
    o.default_setting, per_round(fedproto_oracle, _proto_ref), _proto_observe))

register_oracle(Oracle(
    "fedpac", "FedPAC (Xu, Tong, Huang, ICLR 2023)", "Algorithm 1, eqs. 8-9 (QP solved exactly)",
    algorithm("fedpac", lam=1.0, lr=0.1, head_steps=2, local_rounds=3, batch_size=5,
          clients_per_round=3), o.default_setting, per_round(fedpac_oracle, _pac_ref),
    _pac_observe, tolerance=1e-8,
    tolerance_reason="a solver: the engine's simplex QP stops at a float64 fixed point of "
                     "FISTA, ~1e-13 from the exact KKT solution of the oracle (measured), "
                     "times O(1) heads; 1e-8 leaves room and is far below a changed step"))
