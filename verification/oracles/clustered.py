"""Oracles of the clustered family: CFL, FedAMP, FedEM, FedFomo (moved from their tests),
IFCA, CGPFL and CGPFL-Heur (CGPFL is also checked against its oracle form with a fixed
assignment by :mod:`verification.checks.engine_oracle`).  One client at a time, autograd, float64; the
round's draws are the engine's (same generator, same order, or the method's
``first_phase`` where the oracle says so)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch
import torch.nn.functional as F

from verification.oracles import common as o
from verification.oracles.registry import Oracle, models_of, register_oracle, stepwise


def o_forward(p, x):
    """A one-hidden-layer ReLU network written out (the MLP of the oracle settings)."""
    return torch.relu(x @ p["fc1.weight"] + p["fc1.bias"]) @ p["fc2.weight"] + p["fc2.bias"]


def o_flat(p):
    return torch.cat([v.flatten() for v in p.values()])


# ---- CFL ------------------------------------------------------------------------------

def brute_force_bipartition(sim: torch.Tensor) -> torch.Tensor:
    """argmin over all bipartitions of the largest cross similarity (the side without 0)."""
    m = sim.shape[0]
    best, side = None, None
    for bits in itertools.product([False, True], repeat=m - 1):
        mask = torch.tensor((False, *bits))
        if not mask.any():
            continue
        cross = float(sim[~mask][:, mask].max())
        if best is None or cross < best:
            best, side = cross, mask
    return side


def cfl_round(alg, state, fed, model, *, cut="weakest"):
    """One CFL round (Sattler, Müller, Samek, IEEE TNNLS 2020, Algorithm 2), client by
    client: SGD from the cluster model by autograd; per cluster the weighted mean update
    norm and the largest update norm against ε1, ε2; split by brute force over every
    bipartition (Algorithm 1's optimum; ``cut="strongest"``: the wrong variant, the most
    similar pair apart); new clusters appended in order; weighted means."""
    batches, chosen = o.draws(state, fed, alg.local_rounds, alg.batch_size,
                              alg.clients_per_round)
    clusters = [{k: v[j:j + 1] for k, v in state.models["clusters"].items()}
                for j in range(next(iter(state.models["clusters"].values())).shape[0])]
    labels = state.tensors["assignment"].clone()
    theta, delta = {}, {}
    for i in chosen:
        start = clusters[int(labels[i])]
        w = o.sgd(model, o.copy(start), fed, batches, range(alg.local_rounds), i, alg.lr)
        theta[i] = w
        delta[i] = torch.cat([(w[k] - start[k]).flatten() for k in w])
    for c in range(len(clusters)):
        members = [i for i in chosen if int(labels[i]) == c]
        if len(members) < 3 or state.round < alg.split_after:
            continue
        n = torch.tensor([float(fed.train.counts[i]) for i in members], dtype=torch.float64)
        mean = sum(n[j] / n.sum() * delta[i] for j, i in enumerate(members))
        largest = max(float(delta[i].norm()) for i in members)
        if float(mean.norm()) < alg.eps1 and largest > alg.eps2:
            d = torch.stack([delta[i] for i in members])
            sim = (d @ d.T) / (d.norm(dim=1)[:, None] * d.norm(dim=1)[None, :])
            side = brute_force_bipartition(sim if cut == "weakest" else -sim)
            clusters.append(dict(clusters[c]))
            for j, i in enumerate(members):
                if side[j]:
                    labels[i] = len(clusters) - 1
    for c in range(len(clusters)):
        members = [i for i in chosen if int(labels[i]) == c]
        if members:
            tot = sum(int(fed.train.counts[i]) for i in members)
            clusters[c] = {k: sum(int(fed.train.counts[i]) / tot * theta[i][k] for i in members)
                           for k in clusters[c]}
    stacked = {k: torch.cat([c[k] for c in clusters]) for k in clusters[0]}
    return state.next({"clusters": stacked}, {"assignment": labels})


def cfl_setting(seed):
    """6 clients in two groups whose labels are swapped (incongruent), MLR."""
    from algorithms.engine.models import MLR
    from synthetic.federation import Federation

    rng = np.random.RandomState(7 + seed)
    centres = np.array([[2.0, 0, 0], [0, 2.0, 0], [0, 0, 2.0]])
    xs, ys = [], []
    for i in range(6):
        y = rng.randint(0, 3, 25 + 3 * i)
        xs.append(centres[y] + 0.5 * rng.randn(len(y), 3))
        ys.append(y if i % 2 == 0 else (y + 1) % 3)
    return (Federation.from_client_arrays(xs, ys, num_classes=3, seed=2, device="cpu",
                                          dtype=torch.float64), MLR(3, 3))


# ---- FedAMP, FedFomo: banks of client models ------------------------------------------

def fedamp_oracle(alg, fed, model, seed, rounds, sign=1.0):
    """FedAMP (Huang et al., AAAI 2021), Algorithm 1 / HeurFedAMP: client models after
    ``rounds`` rounds.  Per sampled client, ξ_ih = (α/σ) exp(−‖w_i − w_h‖²/σ) (eq. 7 with
    A(x) = 1 − exp(−x/σ)), ξ_ii = 1 − Σ ξ_ih (heuristic: a cosine softmax, ξ_ii fixed),
    u_i = Σ_h ξ_ih w_h, then R SGD steps on f_i(w) + λ/(2α)‖w − u_i‖².  Draws: the
    method's ``first_phase`` (its batches, its sampled clients).  ``sign = −1``: the
    mutation (attention grows with distance)."""
    w0 = model.init(1, seed=seed, dtype=torch.float64)
    bank = [{k: v[0].clone() for k, v in w0.items()} for _ in range(fed.num_clients)]
    state = alg.init(fed, model, seed)
    for t in range(rounds):
        phase = alg.first_phase(state.replace(round=t), fed, model)
        new = {}
        for j, i in enumerate(phase.clients.tolist()):
            xi = [0.0] * fed.num_clients
            if alg.attention == "fedamp":
                for h in range(fed.num_clients):
                    if h != i:
                        d2 = float(((o_flat(bank[i]) - o_flat(bank[h])) ** 2).sum())
                        xi[h] = alg.alpha / alg.sigma * math.exp(-sign * d2 / alg.sigma)
                xi[i] = 1 - sum(xi)
            else:
                e = {h: math.exp(alg.sigma * float(F.cosine_similarity(
                    o_flat(bank[i]), o_flat(bank[h]), dim=0))) for h in range(fed.num_clients)
                    if h != i}
                for h in e:
                    xi[h] = (1 - alg.self_weight) * e[h] / sum(e.values())
                xi[i] = alg.self_weight
            u = {k: sum(xi[h] * bank[h][k] for h in range(fed.num_clients)) for k in bank[i]}
            w = {k: v.clone() for k, v in u.items()}
            for r in range(alg.local_rounds):
                idx = phase.batches["sgd"][r, j]
                leaves = {k: v.detach().requires_grad_(True) for k, v in w.items()}
                loss = F.cross_entropy(o_forward(leaves, fed.train.x[idx]), fed.train.y[idx])
                loss = loss + alg.lam / (2 * alg.alpha) * sum(((leaves[k] - u[k]) ** 2).sum()
                                                              for k in u)
                grads = torch.autograd.grad(loss, list(leaves.values()))
                w = {k: v - alg.lr * g for (k, v), g in zip(w.items(), grads)}
            new[i] = w
        bank = [new.get(i, bank[i]) for i in range(fed.num_clients)]
    return bank


def fedfomo_oracle(alg, fed, model, seed, rounds, clip=True):
    """FedFomo (Zhang et al., ICLR 2021), first-order model optimization: client models
    after ``rounds`` rounds, and whether some weight was positive.  Each sampled client
    holds out the last ⌈f n⌉ rows of its *training* split as validation, weighs every other
    client's model by max(0, (L_val(w_i) − L_val(w_h)) / ‖w_h − w_i‖) normalised to sum 1,
    moves w_i + Σ_h ω_h (w_h − w_i), then R SGD steps on mini-batches of the remaining
    training rows (the method's ``first_phase`` draws them).  ``clip=False``: the mutation
    (negative first-order gains kept)."""
    w0 = model.init(1, seed=seed, dtype=torch.float64)
    bank = [{k: v[0].clone() for k, v in w0.items()} for _ in range(fed.num_clients)]
    state = alg.init(fed, model, seed)
    positive_seen = False
    for t in range(rounds):
        phase = alg.first_phase(state.replace(round=t), fed, model)
        new = {}
        for j, i in enumerate(phase.clients.tolist()):
            s, n = int(fed.train.offsets[i]), int(fed.train.counts[i])
            n_val = min(math.ceil(n * alg.val_fraction), n - 1) if n >= 2 else 0
            xv, yv = fed.train.x[s + n - n_val:s + n], fed.train.y[s + n - n_val:s + n]

            def val_loss(p):
                return float(F.cross_entropy(o_forward(p, xv), yv)) if n_val else 0.0

            own = bank[i]
            weights = {}
            for h in range(fed.num_clients):
                if h == i:
                    continue
                dist = float((o_flat(bank[h]) - o_flat(own)).norm())
                gain = (val_loss(own) - val_loss(bank[h])) / dist if dist > 0 else 0.0
                weights[h] = max(0.0, gain) if clip else gain
            total = sum(weights.values())
            if total > 0 or (not clip and total != 0):
                weights = {h: v / total for h, v in weights.items()}
            positive_seen |= any(v > 0 for v in weights.values())
            p = {k: own[k] + sum(v * (bank[h][k] - own[k]) for h, v in weights.items())
                 for k in own}
            for r in range(alg.local_rounds):
                idx = phase.batches["sgd"][r, j]
                if not bool((idx < s + n - n_val).all() and (idx >= s).all()):
                    raise AssertionError("FedFomo drew a mini-batch outside the training part")
                leaves = {k: v.detach().requires_grad_(True) for k, v in p.items()}
                loss = F.cross_entropy(o_forward(leaves, fed.train.x[idx]), fed.train.y[idx])
                grads = torch.autograd.grad(loss, list(leaves.values()))
                p = {k: v - alg.lr * g for (k, v), g in zip(p.items(), grads)}
            new[i] = p
        bank = [new.get(i, bank[i]) for i in range(fed.num_clients)]
    return bank, positive_seen


def _bank_trajectory(final):
    """A per-round trajectory from ``final(alg, fed, model, seed, rounds) -> bank``: the
    bank after 1, 2, … rounds (each re-run from the start; the settings are tiny)."""
    def trajectory(alg, fed, model, seed, rounds):
        out = []
        for r in range(1, rounds + 1):
            bank = final(alg, fed, model, seed, r)
            out.append({f"{m}/{k}": torch.stack([b[k] for b in bank])
                        for m in ("personalized", "bank") for k in bank[0]})
        return out
    return trajectory


# ---- FedEM ----------------------------------------------------------------------------

def fedem_round(alg, state, fed, model, *, weighted=True):
    """One FedEM round (Marfoq et al., NeurIPS 2021, Algorithm 1), client by client: the
    E-step (eq. 5) q[s, m] ∝ π_im exp(−ℓ_m(s)) and π_i = mean_s q[s] (eq. 6) on every local
    training sample, R q-weighted SGD steps per component (q looked up by sample index),
    sample-weighted server mean.  ``weighted=False``: the wrong variant that drops q from
    the components' loss."""
    batches, chosen = o.draws(state, fed, alg.local_rounds, alg.batch_size,
                              alg.clients_per_round)
    comps = state.models["components"]
    m = alg.num_components
    pi = state.tensors["mixture"].clone()
    total = sum(int(fed.train.counts[i]) for i in chosen)
    mean = {k: torch.zeros_like(v) for k, v in comps.items()}
    for i in chosen:
        s, n = int(fed.train.offsets[i]), int(fed.train.counts[i])
        x, y = fed.train.x[s:s + n], fed.train.y[s:s + n]
        loss = torch.stack([F.cross_entropy(o_forward({k: v[j] for k, v in comps.items()}, x),
                                            y, reduction="none") for j in range(m)], 1)
        q = pi[i] * torch.exp(-loss)
        q = q / q.sum(1, keepdim=True)
        for j in range(m):
            theta = {k: v[j].clone() for k, v in comps.items()}
            for r in range(alg.local_rounds):
                idx = batches[r, i] - s                       # local sample indices
                leaves = {k: v.requires_grad_(True) for k, v in theta.items()}
                per = F.cross_entropy(o_forward(leaves, x[idx]), y[idx], reduction="none")
                obj = (q[idx, j] * per).mean() if weighted else per.mean()
                grads = torch.autograd.grad(obj, list(leaves.values()))
                theta = {k: (theta[k] - alg.lr * g).detach() for k, g in zip(theta, grads)}
            for k in mean:
                mean[k][j] = mean[k][j] + n / total * theta[k]
        pi[i] = q.mean(0)
    return state.next({"components": mean}, {"mixture": pi})


# ---- IFCA -----------------------------------------------------------------------------

def ifca_estimate(model, clusters, fed) -> torch.Tensor:
    """ĵ(i) = argmin_j f_i(θ_j) on client i's whole *training* split (ties: lowest j)."""
    k = next(iter(clusters.values())).shape[0]
    out = []
    for i in range(fed.num_clients):
        s, n = int(fed.train.offsets[i]), int(fed.train.counts[i])
        x, y = fed.train.x[s:s + n][None], fed.train.y[s:s + n][None]
        losses = [float(o.loss(model, o.row(clusters, j), x, y)) for j in range(k)]
        out.append(min(range(k), key=lambda j: (losses[j], j)))
    return torch.tensor(out)


def ifca_trajectory(alg, fed, model, seed, rounds):
    """IFCA (Ghosh et al., NeurIPS 2020), Algorithm 1, model averaging: cluster estimate
    on the training loss, R SGD steps from θ_ĵ(i) per sampled client, per-cluster
    sample-weighted mean (the engine's documented weighting; uniform in the paper, equal
    for equal sizes), a cluster without clients keeps its model; the estimate is redone
    after the round.  Starts from the data-free ``server_init`` (K independent draws)."""
    state = alg.server_init(fed, model, seed)
    clusters = state.models["clusters"]
    labels = ifca_estimate(model, clusters, fed)
    out = []
    for _ in range(rounds):
        batches, chosen = o.draws(state, fed, alg.local_rounds, alg.batch_size,
                                  alg.clients_per_round)
        trained = {i: o.sgd(model, o.row(clusters, int(labels[i])), fed, batches,
                            range(alg.local_rounds), i, alg.lr) for i in chosen}
        new = o.copy(clusters)
        for j in range(alg.num_contexts):
            members = [i for i in chosen if int(labels[i]) == j]
            if members:
                mean = o.mean([trained[i] for i in members],
                              [int(fed.train.counts[i]) for i in members])
                for k in new:
                    new[k][j] = mean[k][0]
        clusters = new
        labels = ifca_estimate(model, clusters, fed)
        state = state.next({"clusters": clusters})
        out.append({**{f"clusters/{k}": v for k, v in clusters.items()},
                    "assignment": labels.double()})
    return out


def _ifca_observe(alg, state, fed, model):
    return {**{f"clusters/{k}": v for k, v in state.models["clusters"].items()},
            "assignment": state.tensors["assignment"].double()}


# ---- CGPFL-Heur -----------------------------------------------------------------------

def cgpfl_heur_trajectory(alg, fed, model, seed, rounds):
    """CGPFL (Tang, Guo, Guo, IJCAI 2022, Algorithm 1; K contexts, P^0 round-robin i mod K)
    and CGPFL-Heur (Algorithm 1 with K̂ = argmin e(K), §A.9 of the toolkit's formulas),
    client by client.  Every client i starts from its context
    model ω̃_{i,0} = ω_{k(i)}; for r < R: θ ← θ − η(∇f̃_i(θ) + λ(θ − ω̃)) S times on the
    round's r-th mini-batch (θ warm-started), then ω̃ ← ω̃ − β c (ω̃ − θ) (c = λ, the
    documented ``local_step="pfedme"``).  Server: in ``select_round`` K̂ and its labels from
    :func:`pfl_theory.cgpfl.select_k` on the uploads ω̃_{i,R}, the contexts entering step
    4 are the means of the members' old context models (Ω^t J^t P^{t+1}); in the other
    rounds the labels are k-means (:func:`pfl_theory.kmeans.kmeans`) matched to Ω^t
    (:func:`pfl_theory.kmeans.align_result`).  Shared reading: the clustering solver and its
    seeds are the engine's (the paper leaves them open).  Step 4 per context k with members
    C_k: ω_k ← (1 − α) ω_k + α mean_{i∈C_k} ω̃_{i,R}; an empty context keeps its model."""
    from pfl_theory.cgpfl import RELATIVE_MU, select_k
    from pfl_theory.kmeans import align_result, kmeans

    state = alg.init(fed, model, seed)
    n = fed.num_clients
    heur = alg.name == "cgpfl-heur"
    k0 = 1 if heur else alg.num_contexts
    omega = [o.row(state.models["context"], 0) for _ in range(k0)]
    labels = [i % k0 for i in range(n)]
    c = alg.lam if alg.local_scale <= 0 and alg.local_step == "pfedme" else \
        (alg.local_scale or 2.0 / n)
    out = []
    for t in range(rounds):
        batches = fed.sample_batches(alg.local_rounds, alg.batch_size, state.generator())
        thetas, locals_ = [], []
        for i in range(n):
            w = o.copy(omega[labels[i]])
            theta = o.copy(w)
            for r in range(alg.local_rounds):
                x, y = o.batch(fed, batches, r, i)
                for _ in range(alg.inner_steps):
                    g = o.grad(model, theta, x, y)
                    theta = {k: (theta[k] - alg.personal_lr * (g[k] + alg.lam * (theta[k] - w[k])))
                             .detach() for k in theta}
                w = {k: w[k] - alg.lr * c * (w[k] - theta[k]) for k in w}
            thetas.append(theta)
            locals_.append(w)
        flat = torch.stack([o_flat_any(w) for w in locals_])
        if heur and t == alg.select_round:
            k_max = min(alg.k_max or max(1, n // 2), n)
            sel = select_k(flat.numpy(), mu=alg.mu or RELATIVE_MU,
                           m=fed.train.counts.double().numpy(), k_max=k_max,
                           restarts=alg.kmeans_restarts, seed=seed % 2**31)
            new_labels = [int(v) for v in sel.clusterings[sel.k_hat - 1].labels]
            k_new = sel.k_hat
            prev = [o.mean([omega[labels[i]] for i in range(n) if new_labels[i] == j])
                    for j in range(k_new)]
        else:
            centres = torch.stack([o_flat_any(w) for w in omega])
            res = align_result(kmeans(flat, len(omega), restarts=alg.kmeans_restarts,
                                      seed=seed % 2**32), centres)
            new_labels, k_new, prev = [int(v) for v in res.labels], len(omega), omega
        omega = []
        for j in range(k_new):
            members = [locals_[i] for i in range(n) if new_labels[i] == j]
            if members:
                mean = o.mean(members)
                omega.append({k: (1 - alg.alpha) * prev[j][k] + alg.alpha * mean[k]
                              for k in prev[j]})
            else:
                omega.append(prev[j])
        labels = new_labels
        state = state.next(state.models)
        out.append({**{f"context/{k}": torch.cat([w[k] for w in omega]) for k in omega[0]},
                    **{f"personalized/{k}": torch.cat([th[k] for th in thetas])
                       for k in thetas[0]},
                    **{f"local/{k}": torch.cat([w[k] for w in locals_]) for k in locals_[0]},
                    "assignment": torch.tensor(labels, dtype=torch.float64)})
    return out


def o_flat_any(p):
    """A one-row parameter dict ``[1, ...]`` as a flat vector (the engine's key order)."""
    return torch.cat([v.reshape(-1) for v in p.values()])


def _cgpfl_observe(alg, state, fed, model):
    return {**models_of("context", "personalized", "local")(alg, state, fed, model),
            "assignment": state.tensors["assignment"].double()}


def _make(name, **kw):
    def make():
        from algorithms.engine.base import get_algorithm
        return get_algorithm(name)(**kw)
    return make


def _with(*tensors, models=()):
    def observe(alg, state, fed, model):
        return {**models_of(*models)(alg, state, fed, model),
                **{t: state.tensors[t].double() for t in tensors}}
    return observe


def _bank_observe(alg, state, fed, model):
    return models_of("personalized", "bank")(alg, state, fed, model)


register_oracle(Oracle(
    "cfl", "CFL (Sattler et al., IEEE TNNLS 2020)",
    "Algorithm 2 with the optimal bipartition of Algorithm 1 (brute force)",
    _make("cfl", eps1=1e9, eps2=0.0, split_after=1, lr=0.3, local_rounds=4, batch_size=6,
          clients_per_round=5), cfl_setting,
    stepwise(cfl_round, _with("assignment", models=("clusters",))),
    _with("assignment", models=("clusters",))))

register_oracle(Oracle(
    "fedamp", "FedAMP (Huang et al., AAAI 2021)", "Algorithm 1, attention eq. 7",
    _make("fedamp", lam=1.0, alpha=0.2, sigma=2.0, lr=0.1, local_rounds=3, batch_size=5,
          clients_per_round=3), o.default_setting, _bank_trajectory(fedamp_oracle),
    _bank_observe))

register_oracle(Oracle(
    "fedfomo", "FedFomo (Zhang et al., ICLR 2021)", "first-order weights, eq. 2-3",
    _make("fedfomo", lr=0.1, local_rounds=3, batch_size=5, clients_per_round=3,
          val_fraction=0.25), o.default_setting,
    _bank_trajectory(lambda *a: fedfomo_oracle(*a)[0]), _bank_observe,
    tolerance_reason="float64; first-order gains normalised by their sum over 6 clients "
                     "(~1e-15 relative); a changed step moves the state by > 1e-4"))

register_oracle(Oracle(
    "fedem", "FedEM (Marfoq et al., NeurIPS 2021)", "Algorithm 1 (E-step eq. 5, π eq. 6)",
    _make("fedem", num_components=2, lr=0.2, local_rounds=3, batch_size=5,
          clients_per_round=3), o.default_setting,
    stepwise(fedem_round, _with("mixture", models=("components",))),
    _with("mixture", models=("components",))))

register_oracle(Oracle(
    "ifca", "IFCA (Ghosh et al., NeurIPS 2020)", "Algorithm 1, model averaging",
    _make("ifca", num_contexts=3, lr=0.1, local_rounds=3, batch_size=5, clients_per_round=4),
    o.default_setting, ifca_trajectory, _ifca_observe))

register_oracle(Oracle(
    "cgpfl", "CGPFL (Tang, Guo, Guo, IJCAI 2022)",
    "Algorithm 1: S prox steps, local generalized step, k-means, step 4 with α",
    _make("cgpfl", num_contexts=2, lam=2.0, personal_lr=0.1, inner_steps=2, lr=0.05,
          alpha=0.8, local_rounds=2, batch_size=5, kmeans_restarts=3), o.default_setting,
    cgpfl_heur_trajectory, _cgpfl_observe))

register_oracle(Oracle(
    "cgpfl-heur", "CGPFL (Tang, Guo, Guo, IJCAI 2022)",
    "Algorithm 1 with K̂ = argmin e(K) chosen in round 0",
    _make("cgpfl-heur", lam=2.0, personal_lr=0.1, inner_steps=2, lr=0.05, alpha=0.8,
          local_rounds=2, batch_size=5, kmeans_restarts=3, k_max=3, select_round=0),
    o.default_setting, cgpfl_heur_trajectory, _cgpfl_observe))
