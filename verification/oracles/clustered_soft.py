"""Oracles of the clustered family, soft collaboration: FedAMP (attention-weighted
messages), FedFomo (first-order weights), FedEM (a mixture of components), moved from their
tests.  One client at a time, autograd, float64; FedAMP's and FedFomo's draws are the
method's ``first_phase`` (its mini-batches and sampled clients)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from verification.oracles import common as o
from verification.oracles.registry import Oracle, algorithm, models_of, per_round, \
    register_oracle, stepwise


def o_forward(p, x):
    """A one-hidden-layer ReLU network written out (the MLP of the oracle settings)."""
    return torch.relu(x @ p["fc1.weight"] + p["fc1.bias"]) @ p["fc2.weight"] + p["fc2.bias"]


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
                        d2 = float(((o.flat(bank[i]) - o.flat(bank[h])) ** 2).sum())
                        xi[h] = alg.alpha / alg.sigma * math.exp(-sign * d2 / alg.sigma)
                xi[i] = 1 - sum(xi)
            else:
                e = {h: math.exp(alg.sigma * float(F.cosine_similarity(
                    o.flat(bank[i]), o.flat(bank[h]), dim=0))) for h in range(fed.num_clients)
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
                dist = float((o.flat(bank[h]) - o.flat(own)).norm())
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


def _bank_observe(alg, state, fed, model):
    return models_of("personalized", "bank")(alg, state, fed, model)


def _with(*tensors, models=()):
    def observe(alg, state, fed, model):
        return {**models_of(*models)(alg, state, fed, model),
                **{t: state.tensors[t].double() for t in tensors}}
    return observe



def _bank(bank):
    return {f"{m}/{k}": torch.stack([b[k] for b in bank]) for m in ("personalized", "bank")
            for k in bank[0]}


register_oracle(Oracle(
    "fedamp", "FedAMP (Huang et al., AAAI 2021)", "Algorithm 1, attention eq. 7",
    algorithm("fedamp", lam=1.0, alpha=0.2, sigma=2.0, lr=0.1, local_rounds=3, batch_size=5,
          clients_per_round=3), o.default_setting, per_round(fedamp_oracle, _bank),
    _bank_observe))

register_oracle(Oracle(
    "fedfomo", "FedFomo (Zhang et al., ICLR 2021)", "first-order weights, eq. 2-3",
    algorithm("fedfomo", lr=0.1, local_rounds=3, batch_size=5, clients_per_round=3,
          val_fraction=0.25), o.default_setting,
    per_round(lambda *a: fedfomo_oracle(*a)[0], _bank), _bank_observe,
    tolerance_reason="float64; first-order gains normalised by their sum over 6 clients "
                     "(~1e-15 relative); a changed step moves the state by > 1e-4"))

register_oracle(Oracle(
    "fedem", "FedEM (Marfoq et al., NeurIPS 2021)", "Algorithm 1 (E-step eq. 5, π eq. 6)",
    algorithm("fedem", num_components=2, lr=0.2, local_rounds=3, batch_size=5,
          clients_per_round=3), o.default_setting,
    stepwise(fedem_round, _with("mixture", models=("components",))),
    _with("mixture", models=("components",))))

