"""Oracles of the prototype family: FedProto, FedPAC, pFedFDA (moved from their tests).
Plain loops over clients and classes, float64, autograd; the draws are the method's
``first_phase`` (its mini-batches and sampled clients).  The settings have ``C`` = 4 classes
and a one-hidden-layer ReLU network (fc1 = body, fc2 = head)."""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F

from verification.oracles import common as o
from verification.oracles.registry import Oracle, register_oracle

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


# ---- pFedFDA -----------------------------------------------------------

def o_features(body, x):
    return torch.relu(x @ body["fc1.weight"][0] + body["fc1.bias"][0])


def o_stats(z, y):
    counts = torch.tensor([float((y == c).sum()) for c in range(C)], dtype=z.dtype)
    means = torch.stack([z[y == c].mean(0) if (y == c).any() else torch.zeros(z.shape[1],
                         dtype=z.dtype) for c in range(C)])
    cov = torch.zeros(z.shape[1], z.shape[1], dtype=z.dtype)
    for s in range(len(y)):
        d = z[s] - means[y[s]]
        cov += torch.outer(d, d)
    return counts, means, cov / max(len(y), 1)


def o_log_prior(counts):
    return torch.log((counts + 1) / (counts.sum() + C))


def o_lda(means, cov, log_prior, eps):
    w = torch.linalg.solve(cov + eps * torch.eye(cov.shape[0], dtype=cov.dtype), means.T)
    b = torch.stack([-0.5 * means[c] @ w[:, c] for c in range(C)]) + log_prior
    return w, b


def o_interp(beta, means, counts, cov, gm, gc, flip=False):
    if flip:                                        # the mutation: β and 1 − β swapped
        beta = 1 - beta
    mu = torch.stack([beta * means[c] + (1 - beta) * gm[c] if counts[c] > 0 else gm[c]
                      for c in range(C)])
    return mu, beta * cov + (1 - beta) * gc


def o_adapt(alg, z, y, gm, gc, flip=False):
    """β by k-fold CV over the grid (first minimum), then the personalized head."""
    grid = [g / (alg.beta_grid - 1) for g in range(alg.beta_grid)] if alg.beta_grid > 1 else [0.0]
    fold = torch.arange(len(y)) % alg.folds
    best, best_loss = None, None
    for beta in grid:
        loss = 0.0
        for f in range(alg.folds):
            tr, te = fold != f, fold == f
            counts, means, cov = o_stats(z[tr], y[tr])
            mu, sigma = o_interp(torch.tensor(beta, dtype=z.dtype), means, counts, cov, gm, gc,
                                 flip)
            w, b = o_lda(mu, sigma, o_log_prior(counts), alg.ridge)
            loss += float(F.cross_entropy(z[te] @ w + b, y[te], reduction="sum"))
        if best_loss is None or loss < best_loss:
            best, best_loss = beta, loss
    beta = torch.tensor(best, dtype=z.dtype)
    counts, means, cov = o_stats(z, y)
    mu, sigma = o_interp(beta, means, counts, cov, gm, gc, flip)
    w, b = o_lda(mu, sigma, o_log_prior(counts), alg.ridge)
    return beta, (w, b), mu, sigma


def o_data(fed, i):
    o, n = int(fed.train.offsets[i]), int(fed.train.counts[i])
    return fed.train.x[o:o + n], fed.train.y[o:o + n]


def pfedfda_oracle(alg, fed, model, seed, rounds, flip=False):
    """pFedFDA (McLaughlin, Su, NeurIPS 2024), Algorithm 1: (body, heads, β, global
    means, global cov) after ``init`` and ``rounds`` rounds, one client at a time: body SGD
    under the fixed global generative (LDA) head, β_i by k-fold cross-validation on the
    client's *training* features over the grid (first minimum), the interpolated
    statistics and head, sample-weighted server means.  Ridge ε and the Laplace prior are
    the method's documented toolkit choices (shared reading)."""
    w0 = model.init(1, seed=seed, dtype=torch.float64)
    body = {k: w0[k] for k in ("fc1.weight", "fc1.bias")}
    n = fed.num_clients
    # init: every client's MLE statistics, pooled by the server
    stats = [o_stats(o_features(body, o_data(fed, i)[0]), o_data(fed, i)[1]) for i in range(n)]
    tot = sum(s[0] for s in stats)
    gm = sum(s[0][:, None] * s[1] for s in stats) / tot.clamp(min=1)[:, None]
    sizes = [float(fed.train.counts[i]) for i in range(n)]
    gc = sum(sz * s[2] for sz, s in zip(sizes, stats)) / sum(sizes)
    heads, betas = [None] * n, [None] * n
    for i in range(n):
        x, y = o_data(fed, i)
        betas[i], heads[i], _, _ = o_adapt(alg, o_features(body, x), y, gm, gc, flip)
    state = alg.init(fed, model, seed)
    for t in range(rounds):
        phase = alg.first_phase(state.replace(round=t), fed, model)   # the same draws
        chosen = phase.clients.tolist()
        batches = phase.batches["sgd"]
        ups = []
        for j, i in enumerate(chosen):
            x, y = o_data(fed, i)
            counts = torch.tensor([float((y == c).sum()) for c in range(C)], dtype=x.dtype)
            wg, bg = o_lda(gm, gc, o_log_prior(counts), alg.ridge)     # the fixed head
            mine = {k: v.clone() for k, v in body.items()}
            for r in range(alg.local_rounds):
                xb, yb = fed.train.x[batches[r, j]], fed.train.y[batches[r, j]]
                leaves = {k: v.detach().requires_grad_(True) for k, v in mine.items()}
                loss = F.cross_entropy(o_features(leaves, xb) @ wg + bg, yb)
                grads = torch.autograd.grad(loss, list(leaves.values()))
                mine = {k: v - alg.lr * g for (k, v), g in zip(mine.items(), grads)}
            betas[i], heads[i], mu, sigma = o_adapt(alg, o_features(mine, x), y, gm, gc, flip)
            ups.append((float(fed.train.counts[i]), mine, mu, sigma))
        total = sum(u[0] for u in ups)
        body = {k: sum(u[0] * u[1][k] for u in ups) / total for k in body}
        gm = sum(u[0] * u[2] for u in ups) / total
        gc = sum(u[0] * u[3] for u in ups) / total
    return body, heads, betas, gm, gc


# ---- registration ---------------------------------------------------------------------

def _per_round(final, quantities):
    """A trajectory from ``final(alg, fed, model, seed, rounds)`` (re-run for 1 … rounds)."""
    def trajectory(alg, fed, model, seed, rounds):
        return [quantities(final(alg, fed, model, seed, r)) for r in range(1, rounds + 1)]
    return trajectory



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


def _fda_ref(ref):
    body, heads, betas, gm, gc = ref
    return {**{f"body/{k}": v for k, v in body.items()},
            "head/fc2.weight": torch.stack([h[0] for h in heads]),
            "head/fc2.bias": torch.stack([h[1] for h in heads]),
            "beta": torch.stack(betas), "means": gm, "cov": gc}


def _fda_observe(alg, state, fed, model):
    return {**{f"body/{k}": v for k, v in state.models["body"].items()},
            **{f"head/{k}": v for k, v in state.models["head"].items()},
            "beta": state.tensors["beta"], "means": state.models["stats"]["means"][0],
            "cov": state.models["stats"]["cov"][0]}


def _make(name, **kw):
    def make():
        from algorithms.engine.base import get_algorithm
        return get_algorithm(name)(**kw)
    return make


register_oracle(Oracle(
    "fedproto", "FedProto (Tan et al., AAAI 2022)", "Algorithm 1, eqs. 5-6",
    _make("fedproto", lam=1.0, lr=0.1, local_rounds=4, batch_size=5, clients_per_round=3),
    o.default_setting, _per_round(fedproto_oracle, _proto_ref), _proto_observe))

register_oracle(Oracle(
    "fedpac", "FedPAC (Xu, Tong, Huang, ICLR 2023)", "Algorithm 1, eqs. 8-9 (QP solved exactly)",
    _make("fedpac", lam=1.0, lr=0.1, head_steps=2, local_rounds=3, batch_size=5,
          clients_per_round=3), o.default_setting, _per_round(fedpac_oracle, _pac_ref),
    _pac_observe, tolerance=1e-8,
    tolerance_reason="a solver: the engine's simplex QP stops at a float64 fixed point of "
                     "FISTA, ~1e-13 from the exact KKT solution of the oracle (measured), "
                     "times O(1) heads; 1e-8 leaves room and is far below a changed step"))


def _fda_setting(seed):
    """6 clients sharing 4 class means, each shifted by its own offset (the cross-validated
    β then differs between clients)."""
    import numpy as np

    from algorithms.engine.models import MLP
    from synthetic.federation import Federation

    rng = np.random.RandomState(4 + seed)
    means = 2.0 * rng.randn(C, o.DIM)
    xs, ys = [], []
    for i, n in enumerate([9, 14, 20, 12, 16, 11]):
        y = rng.randint(0, C, n)
        xs.append(means[y] + 0.8 * i * rng.randn(1, o.DIM) + rng.randn(n, o.DIM))
        ys.append(y)
    return (Federation.from_client_arrays(xs, ys, num_classes=C, seed=0, device="cpu",
                                          dtype=torch.float64), MLP(o.DIM, C, hidden=(5,)))


register_oracle(Oracle(
    "pfedfda", "pFedFDA (McLaughlin, Su, NeurIPS 2024)", "Algorithm 1 (CV of β_i, LDA head)",
    _make("pfedfda", lr=0.05, local_rounds=3, batch_size=5, clients_per_round=3, folds=2,
          beta_grid=5), _fda_setting, _per_round(pfedfda_oracle, _fda_ref), _fda_observe,
    tolerance_reason="float64 sums of a few hundred terms in another order, Cholesky vs LU "
                     "solves of well-conditioned (ridge >= 1) matrices: ~1e-15 relative"))
