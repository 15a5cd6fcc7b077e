"""Oracles of the clustered family, hard assignments: CFL (moved from its test), IFCA, CGPFL
and CGPFL-Heur (CGPFL is also checked against its oracle form with a fixed assignment by
:mod:`verification.checks.engine_oracle`); the soft ones are in
:mod:`verification.oracles.clustered_soft`.  One client at a time, autograd, float64; the
round's draws are the engine's (same generator, same order, or the method's
``first_phase`` where the oracle says so)."""

from __future__ import annotations

import itertools

import numpy as np
import torch

from verification.oracles import common as o
from verification.oracles.registry import Oracle, algorithm, models_of, register_oracle, stepwise


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
    client by client.  Every client i starts from its context model ω̃_{i,0} = ω_{k(i)};
    for r < R: θ ← θ − η(∇f̃_i(θ) + λ(θ − ω̃)) S times on the round's r-th mini-batch (θ
    warm-started), then ω̃ ← ω̃ − β c (ω̃ − θ) (c = λ for the documented default
    ``local_step="pfedme"``, 2/N for ``"paper"``, or ``local_scale``).  Server: in
    ``select_round`` K̂ and its labels from :func:`pfl_theory.cgpfl.select_k` on the uploads
    ω̃_{i,R} (or θ̃_i with ``select_on="personalized"``), the contexts entering step
    4 are the means of the members' old context models (Ω^t J^t P^{t+1}); in the other
    rounds the labels are k-means matched to Ω^t.  The clustering is the oracle's own
    (:mod:`verification.oracles.kmeans_plain`: plain k-means++ and Lloyd, brute-force
    matching, its own e(K)); shared reading: the seeds and the documented rules of the
    engine's solver (the paper leaves them open), not its code.  Step 4 per context k with members
    C_k: ω_k ← (1 − α) ω_k + α mean_{i∈C_k} ω̃_{i,R}; an empty context keeps its model."""
    from verification.oracles.kmeans_plain import aligned, plain_kmeans, plain_select_k

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
        flat = torch.stack([o.flat(w) for w in locals_])
        if heur and t == alg.select_round:
            k_max = min(alg.k_max or max(1, n // 2), n)
            chosen = flat if alg.select_on == "uploads" else \
                torch.stack([o.flat(th) for th in thetas])
            k_new, sel = plain_select_k(chosen.numpy(), mu=alg.mu or alg.mu_rule,
                                 sizes=fed.train.counts.double().numpy(), k_max=k_max,
                                 restarts=alg.kmeans_restarts, seed=seed % 2**31)
            new_labels = [int(v) for v in sel]
            prev = [o.mean([omega[labels[i]] for i in range(n) if new_labels[i] == j])
                    for j in range(k_new)]
        else:
            centres = torch.stack([o.flat(w) for w in omega]).numpy()
            lab, cen, _ = plain_kmeans(flat.numpy(), len(omega), restarts=alg.kmeans_restarts,
                                       seed=seed % 2**32)
            new_labels = [int(v) for v in aligned(lab, cen, centres)]
            k_new, prev = len(omega), omega
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
        out.append({**{f"context/{k}": torch.cat([omega[labels[i]][k] for i in range(n)])
                       for k in omega[0]},
                    **{f"personalized/{k}": torch.cat([th[k] for th in thetas])
                       for k in thetas[0]},
                    **{f"local/{k}": torch.cat([w[k] for w in locals_]) for k in locals_[0]}})
    return out


def _cgpfl_observe(alg, state, fed, model):
    """Every client's context model ω_{k(i)} (not the labels: K identical initial contexts
    make the label of a cluster a tie that float64 rounding breaks either way; the
    partition and the models are what the algorithm computes), θ̃_i and ω̃_{i,R}."""
    context, labels = state.models["context"], state.tensors["assignment"]
    return {**{f"context/{k}": v[labels] for k, v in context.items()},
            **models_of("personalized", "local")(alg, state, fed, model)}


def _with(*tensors, models=()):
    def observe(alg, state, fed, model):
        return {**models_of(*models)(alg, state, fed, model),
                **{t: state.tensors[t].double() for t in tensors}}
    return observe


register_oracle(Oracle(
    "cfl", "CFL (Sattler et al., IEEE TNNLS 2020)",
    "Algorithm 2 with the optimal bipartition of Algorithm 1 (brute force)",
    algorithm("cfl", eps1=1e9, eps2=0.0, split_after=1, lr=0.3, local_rounds=4, batch_size=6,
          clients_per_round=5), cfl_setting,
    stepwise(cfl_round, _with("assignment", models=("clusters",))),
    _with("assignment", models=("clusters",))))

register_oracle(Oracle(
    "ifca", "IFCA (Ghosh et al., NeurIPS 2020)", "Algorithm 1, model averaging",
    algorithm("ifca", num_contexts=3, lr=0.1, local_rounds=3, batch_size=5, clients_per_round=4),
    o.default_setting, ifca_trajectory, _ifca_observe))

register_oracle(Oracle(
    "cgpfl", "CGPFL (Tang, Guo, Guo, IJCAI 2022)",
    "Algorithm 1: S prox steps, local generalized step, k-means, step 4 with α",
    algorithm("cgpfl", num_contexts=2, lam=2.0, personal_lr=0.1, inner_steps=2, lr=0.05,
          alpha=0.8, local_rounds=2, batch_size=5, kmeans_restarts=3), o.default_setting,
    cgpfl_heur_trajectory, _cgpfl_observe))

register_oracle(Oracle(
    "cgpfl-heur", "CGPFL (Tang, Guo, Guo, IJCAI 2022)",
    "Algorithm 1 with K̂ = argmin e(K) chosen in round 0",
    algorithm("cgpfl-heur", lam=2.0, personal_lr=0.1, inner_steps=2, lr=0.05, alpha=0.8,
          local_rounds=2, batch_size=5, kmeans_restarts=3, k_max=4, select_round=0),
    o.default_setting, cgpfl_heur_trajectory, _cgpfl_observe))
