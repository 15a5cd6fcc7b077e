"""Oracle of pFedFDA (McLaughlin, Su, NeurIPS 2024), moved from its test: plain loops over
clients, classes, folds and β values, float64, autograd; the draws are the method's
``first_phase``.  The setting has ``C`` = 4 classes and a one-hidden-layer ReLU network
(fc1 = body)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from verification.oracles import common as o
from verification.oracles.registry import Oracle, algorithm, per_round, register_oracle

C = o.CLASSES


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
    algorithm("pfedfda", lr=0.05, local_rounds=3, batch_size=5, clients_per_round=3, folds=2,
          beta_grid=5), _fda_setting, per_round(pfedfda_oracle, _fda_ref), _fda_observe,
    tolerance_reason="float64 sums of a few hundred terms in another order, Cholesky vs LU "
                     "solves of well-conditioned (ridge >= 1) matrices: ~1e-15 relative"))
