"""Oracles of the averaging family: FedAvg, Local, FedProx, SCAFFOLD, kNN-Per, FedAvg+FT,
FedBABU.

FedAvg is also checked by ``fedavg.engine_equals_oracle_form``
(:mod:`verification.checks.engine_oracle`, numpy oracle form on quadratic clients, full
batch); its per-client oracle here adds mini-batches and client sampling.
Every oracle runs one client at a time on its own ``[1, ...]`` copy, autograd, float64.
"""

from __future__ import annotations

import torch

from verification.oracles import common as o
from verification.oracles.registry import Oracle, algorithm, models_of, register_oracle, stepwise

FEDAVG = "McMahan et al., AISTATS 2017"
SMALL = dict(lr=0.1, local_rounds=3, batch_size=5, clients_per_round=3)


def _fedavg_locals(alg, state, fed, model, lr=None):
    """The sampled clients' models after R SGD steps from ``w^t`` and the chosen list."""
    batches, chosen = o.draws(state, fed, alg.local_rounds, alg.batch_size,
                              alg.clients_per_round)
    w = state.models["global"]
    lr = alg.lr if lr is None else lr
    return [o.sgd(model, o.copy(w), fed, batches, range(alg.local_rounds), i, lr)
            for i in chosen], chosen


def local_round(alg, state, fed, model):
    """Local training (FedAvg's local step, McMahan et al. 2017, without communication):
    every client takes R SGD steps ``θ_i ← θ_i − η ∇f̃_i(θ_i)`` on its own mini-batches of
    the round (stream 0)."""
    batches = fed.sample_batches(alg.local_rounds, alg.batch_size, state.generator())
    theta = state.models["local"]
    rows = [o.sgd(model, o.row(theta, i), fed, batches, range(alg.local_rounds), i, alg.lr)
            for i in range(fed.num_clients)]
    return state.next({"local": {k: torch.cat([r[k] for r in rows]) for k in theta}})


def fedprox_round(alg, state, fed, model, *, sign=1.0):
    """One FedProx round (Li et al., MLSys 2020, eq. 2 and Algorithm 2), client by client:
    each sampled client runs R steps w ← w − η(∇F̃_k(w) + μ(w − w^t)) with autograd on its
    own [1, ...] copy; the server takes Σ n_k w_k / Σ n_k.  ``sign = −1`` is the
    deliberately wrong variant."""
    batches, chosen = o.draws(state, fed, alg.local_rounds, alg.batch_size,
                              alg.clients_per_round)
    wt = state.models["global"]
    total = sum(int(fed.train.counts[i]) for i in chosen)
    new = {k: torch.zeros_like(v) for k, v in wt.items()}
    for i in chosen:
        w = {k: v.clone() for k, v in wt.items()}
        for r in range(alg.local_rounds):
            x, y = o.batch(fed, batches, r, i)
            g = o.grad(model, w, x, y)
            w = {k: (w[k] - alg.lr * (g[k] + sign * alg.mu * (w[k] - wt[k]))).detach()
                 for k in w}
        for k in new:
            new[k] = new[k] + int(fed.train.counts[i]) / total * w[k]
    return state.next({"global": new})


def scaffold_round(alg, state, fed, model, *, flip=False):
    """One SCAFFOLD round from Algorithm 1, option II (Karimireddy et al., ICML 2020),
    client by client with autograd: y ← y − η_l(g_i(y) − c_i + c) K times,
    c_i⁺ = c_i − c + (x − y)/(Kη_l), x ← x + η_g mean_S Δy (uniform, the paper's; by sample
    counts with ``aggregation="weighted"``), c ← c + (1/N) Σ_S Δc.  ``flip``: the deliberately wrong
    c_i⁺ = c_i + c + (x − y)/(Kη)."""
    batches, chosen = o.draws(state, fed, alg.local_rounds, alg.batch_size,
                              alg.clients_per_round)
    x, c = state.models["global"], state.models["control"]
    ci_all = {k: v.clone() for k, v in state.models["client_control"].items()}
    dys, dcs = [], []
    for i in chosen:
        ci = {k: v[i:i + 1] for k, v in ci_all.items()}
        y = {k: v.clone() for k, v in x.items()}
        for r in range(alg.local_rounds):
            xb, yb = o.batch(fed, batches, r, i)
            g = o.grad(model, y, xb, yb)
            y = {k: (y[k] - alg.lr * (g[k] - ci[k] + c[k])).detach() for k in y}
        sign = 1.0 if flip else -1.0
        plus = {k: ci[k] + sign * c[k] + (x[k] - y[k]) / (alg.local_rounds * alg.lr) for k in ci}
        dys.append({k: y[k] - x[k] for k in y})
        dcs.append({k: plus[k] - ci[k] for k in ci})
        for k in ci_all:
            ci_all[k][i] = plus[k][0]
    w = [int(fed.train.counts[i]) if alg.aggregation == "weighted" else 1 for i in chosen]
    new_x = {k: x[k] + alg.global_lr * sum(wi * d[k] for wi, d in zip(w, dys)) / sum(w)
             for k in x}
    new_c = {k: c[k] + sum(d[k] for d in dcs) / fed.num_clients for k in c}
    return state.next({"global": new_x, "control": new_c, "client_control": ci_all})


def knnper_predictions(alg, fed, global_params, num_classes):
    """Per-client test accuracy and mean loss of p = λ p_kNN + (1 − λ) p_w (Marfoq et al.,
    ICML 2022, eqs. 3–4), one client and one test sample at a time (sorting all
    distances), for an MLR (features = inputs).  The datastore is the client's *training*
    rows; the test split is only queried."""
    w = {k: v[0] for k, v in global_params.items()}
    accs, losses = [], []
    for i in range(fed.num_clients):
        s, n = int(fed.train.offsets[i]), int(fed.train.counts[i])
        store, labels = fed.train.x[s:s + n].flatten(1), fed.train.y[s:s + n]
        s, m = int(fed.test.offsets[i]), int(fed.test.counts[i])
        correct, loss = 0, 0.0
        for j in range(m):
            z, y = fed.test.x[s + j].flatten(), int(fed.test.y[s + j])
            d2 = ((store - z) ** 2).sum(1)
            order = torch.argsort(d2)[:alg.neighbours]
            kern = torch.exp(-d2[order] / (z.numel() * alg.scale))
            p_knn = torch.zeros(num_classes, dtype=torch.float64)
            for h, weight in zip(order.tolist(), kern):
                p_knn[labels[h]] += weight
            p_knn = p_knn / kern.sum()
            p_w = torch.softmax(z @ w["fc.weight"] + w["fc.bias"], 0)
            p = alg.lam * p_knn + (1 - alg.lam) * p_w
            correct += int(int(torch.argmax(p)) == y)
            # the documented floor: log p at least log(smallest normal)
            loss -= float(torch.log(p[y].clamp(min=torch.finfo(p.dtype).tiny)))
        accs.append(correct / m)
        losses.append(loss / m)
    return torch.tensor(accs, dtype=torch.float64), torch.tensor(losses, dtype=torch.float64)


def fedavg_round(alg, state, fed, model):
    """FedAvg (McMahan et al. 2017): R local SGD steps per sampled client, then
    ``Σ n_i w_i / Σ n_i`` (kNN-Per trains exactly so)."""
    locals_, chosen = _fedavg_locals(alg, state, fed, model)
    return state.next({**state.models, "global": o.mean(
        locals_, [int(fed.train.counts[i]) for i in chosen])}, state.tensors)


def _knnper_trajectory(alg, fed, model, seed, rounds):
    state, out = alg.init(fed, model, seed), []
    for _ in range(rounds):
        state = fedavg_round(alg, state, fed, model)
        acc, loss = knnper_predictions(alg, fed, state.models["global"], fed.num_classes)
        out.append({"global": state.models["global"]["fc.weight"], "acc": acc, "loss": loss})
    return out


def _knnper_observe(alg, state, fed, model):
    from algorithms.engine.evaluation import evaluate

    acc, loss = evaluate(model, alg.evaluated(state)["personalized"], fed.test)
    return {"global": state.models["global"]["fc.weight"], "acc": acc.double(), "loss": loss}


def finetuned_round(alg, state, fed, model, *, fedbabu: bool):
    """FedAvg+FT (the PPFE paper's Table 1 baseline) or FedBABU (Oh et al., ICLR 2022,
    Algorithm 1): FedBABU's sampled clients take R SGD steps on the body with the random
    head ψ⁰ fixed, the server takes the uniform mean of the bodies (the paper's); FedAvg+FT
    is FedAvg.  Then every client fine-tunes the new global model ``finetune_steps`` SGD
    steps (rate ``finetune_lr``) on the head (FedBABU's default) or all parameters
    (FedAvg+FT's), on mini-batches of the round's stream 1 (the documented reading)."""
    layers = model.layers
    head = [k for layer in layers[len(layers) - alg.head_layers:] for k in layer]
    if fedbabu:
        batches, chosen = o.draws(state, fed, alg.local_rounds, alg.batch_size,
                                  alg.clients_per_round)
        w = {**state.models["body"], **state.models["head"]}
        body = [k for k in w if k not in head]
        locals_ = [o.sgd(model, o.copy(w), fed, batches, range(alg.local_rounds), i, alg.lr,
                         keys=body) for i in chosen]
        weights = [int(fed.train.counts[i]) for i in chosen] \
            if alg.aggregation == "weighted" else None
        new_body = o.mean([{k: m[k] for k in body} for m in locals_], weights)
        models = {"body": new_body, "head": state.models["head"]}
        glob = {**new_body, **state.models["head"]}
        glob = {k: glob[k] for k in w}
    else:
        glob = fedavg_round(alg, state, fed, model).models["global"]
        models = {"global": glob}
    keys = head if alg.finetune_part == "head" else list(glob)
    ft = fed.sample_batches(alg.finetune_steps, alg.batch_size, state.generator(1))
    rows = [o.sgd(model, o.copy(glob), fed, ft, range(alg.finetune_steps), i,
                  alg.finetune_lr, keys=keys) for i in range(fed.num_clients)]
    models["personalized"] = {k: torch.cat([r[k] for r in rows]) for k in glob}
    return state.next(models)



register_oracle(Oracle(
    "fedavg", FEDAVG, "R local SGD steps on mini-batches, S of N clients, Σ n_i w_i / Σ n_i",
    algorithm("fedavg", **SMALL), o.default_setting,
    stepwise(fedavg_round, models_of("global")), models_of("global")))

register_oracle(Oracle(
    "local", FEDAVG, "R local SGD steps per client, no communication",
    algorithm("local", lr=0.1, local_rounds=3, batch_size=5), o.default_setting,
    stepwise(local_round, models_of("local")), models_of("local")))

register_oracle(Oracle(
    "fedprox", "FedProx (Li et al., MLSys 2020)", "eq. 2 and Algorithm 2",
    algorithm("fedprox", mu=0.7, **SMALL), o.default_setting,
    stepwise(fedprox_round, models_of("global")), models_of("global")))

register_oracle(Oracle(
    "scaffold", "SCAFFOLD (Karimireddy et al., ICML 2020)", "Algorithm 1, option II",
    algorithm("scaffold", global_lr=0.8, **SMALL), o.default_setting,
    stepwise(scaffold_round, models_of("global", "control", "client_control")),
    models_of("global", "control", "client_control")))


def _mlr_setting(seed):
    from algorithms.engine.models import MLR

    fed, _ = o.default_setting(seed)
    return fed, MLR(o.DIM, o.CLASSES)


register_oracle(Oracle(
    "knnper", "kNN-Per (Marfoq et al., ICML 2022)",
    "FedAvg training; eqs. 3-4 predictor on the training-row datastore",
    algorithm("knnper", lam=0.5, neighbours=4, **SMALL), _mlr_setting, _knnper_trajectory,
    _knnper_observe,
    tolerance_reason="float64; cdist and softmax vs direct sums of a few dozen terms "
                     "(~1e-15); accuracies compared exactly"))

for _name, _babu in (("fedavg-ft", False), ("fedbabu", True)):
    register_oracle(Oracle(
        _name, "FedBABU (Oh et al., ICLR 2022)" if _babu else f"FedAvg+FT ({FEDAVG}; PPFE "
        "Table 1)", "Algorithm 1 (random fixed head, body averaged) + head fine-tuning"
        if _babu else "FedAvg + full local fine-tuning",
        algorithm(_name, finetune_steps=2, finetune_lr=0.05, **SMALL), o.default_setting,
        stepwise(lambda a, s, f, m, _b=_babu: finetuned_round(a, s, f, m, fedbabu=_b),
                 models_of(*(("body", "head", "personalized") if _babu
                             else ("global", "personalized")))),
        models_of(*(("body", "head", "personalized") if _babu
                    else ("global", "personalized")))))
