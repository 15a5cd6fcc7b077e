"""Oracles of the decoupled (body/head) family: FedRep, FedPer, LG-FedAvg (new), FedALA,
FedBN, FedRoD (moved from their tests).  One client at a time, autograd, float64; the body
is every layer but the last ``head_layers`` (``model.layers``)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from verification.oracles import common as o
from verification.oracles.registry import Oracle, algorithm, models_of, register_oracle, stepwise

SMALL = dict(lr=0.1, local_rounds=3, batch_size=5, clients_per_round=3)


def head_keys(model, head_layers):
    return [k for layer in model.layers[len(model.layers) - head_layers:] for k in layer]


def decoupled_round(alg, state, fed, model):
    """FedRep (Collins et al., ICML 2021, Algorithm 1), FedPer (Arivazhagan et al., arXiv
    1912.00818) and LG-FedAvg (Liang et al., arXiv 2001.01523), by ``alg.name``.  Each
    sampled client assembles (server part, own part): FedRep takes ``head_steps`` SGD steps
    on its head ψ_i with the body fixed on the round's first mini-batches, then
    ``local_rounds`` steps on the body with the new head fixed; FedPer and LG-FedAvg take
    ``local_rounds`` joint steps.  The server averages the shared part (FedRep/FedPer: the
    body; LG-FedAvg: the head) uniformly over the sampled clients (the papers'; ``weighted``
    by sample counts if so configured); the other part stays on the client."""
    fedrep = alg.name == "fedrep"
    steps = alg.head_steps + alg.local_rounds if fedrep else alg.local_rounds
    batches, chosen = o.draws(state, fed, steps, alg.batch_size, alg.clients_per_round)
    shared, personal = state.models["shared"], o.copy(state.models["personal"])
    head = head_keys(model, alg.head_layers)
    uploads = []
    for i in chosen:
        p = {**o.copy(shared), **o.row(personal, i)}
        p = {k: p[k] for layer in model.layers for k in layer}
        if fedrep:
            body = [k for k in p if k not in head]
            p = o.sgd(model, p, fed, batches, range(alg.head_steps), i, alg.lr, keys=head)
            p = o.sgd(model, p, fed, batches, range(alg.head_steps, steps), i, alg.lr, keys=body)
        else:
            p = o.sgd(model, p, fed, batches, range(steps), i, alg.lr)
        uploads.append({k: p[k] for k in shared})
        for k in personal:
            personal[k][i] = p[k][0]
    weights = [int(fed.train.counts[i]) for i in chosen] if alg.aggregation == "weighted" \
        else None
    return state.next({"shared": o.mean(uploads, weights), "personal": personal})


def fedala_round(alg, state, fed, model, *, clip=True):
    """One FedALA round (Zhang et al., AAAI 2023, Algorithm 1), client by client: W by
    autograd on L(Θ_i + (Θ − Θ_i) ⊙ W) (eq. 4; lower layers = Θ), clipped to [0, 1]
    (eq. 5; ``clip=False``: the wrong variant), ala_start_steps in the client's first ALA,
    none while Θ_i = Θ on the higher layers; R SGD steps; FedAvg's weighted mean.  The ALA
    mini-batches are the round's stream 1 (the documented reading)."""
    batches, chosen = o.draws(state, fed, alg.local_rounds, alg.batch_size,
                              alg.clients_per_round)
    chosen = torch.tensor(chosen)
    most = max(alg.ala_steps, alg.ala_start_steps)
    ala_b = fed.sample_batches(most, alg.batch_size, state.generator(1))[:, chosen] \
        if most else None
    theta = {k: v[0] for k, v in state.models["global"].items()}
    locals_ = {k: v.clone() for k, v in state.models["local"].items()}
    weights = {k: v.clone() for k, v in state.models["ala_weights"].items()}
    started = state.tensors["ala_started"].clone()
    total = sum(int(fed.train.counts[i]) for i in chosen)
    mean = {k: torch.zeros_like(v) for k, v in theta.items()}

    def loss(p, x, y):
        return F.cross_entropy(model.forward({k: v[None] for k, v in p.items()}, x[None])[0], y)

    for j, i in enumerate(chosen.tolist()):
        loc = {k: v[i] for k, v in locals_.items()}
        w = {k: v[i].clone() for k, v in weights.items()}
        differs = any(bool((theta[k] != loc[k]).any()) for k in w)
        steps = 0 if not differs else (alg.ala_steps if started[i] else alg.ala_start_steps)
        for s in range(steps):
            x, y = fed.train.gather(ala_b[s, j])
            leaves = {k: v.clone().requires_grad_(True) for k, v in w.items()}
            mixed = {k: loc[k] + (theta[k] - loc[k]) * leaves[k] if k in w else theta[k]
                     for k in theta}
            grads = torch.autograd.grad(loss(mixed, x, y), list(leaves.values()))
            w = {k: (w[k] - alg.ala_lr * g) for k, g in zip(w, grads)}
            w = {k: v.clamp(0, 1) if clip else v for k, v in w.items()}
        p = {k: (loc[k] + (theta[k] - loc[k]) * w[k] if k in w else theta[k]).detach()
             for k in theta}
        for r in range(alg.local_rounds):
            x, y = fed.train.gather(batches[r, i])
            leaves = {k: v.clone().requires_grad_(True) for k, v in p.items()}
            grads = torch.autograd.grad(loss(leaves, x, y), list(leaves.values()))
            p = {k: p[k] - alg.lr * g for k, g in zip(p, grads)}
        for k in locals_:
            locals_[k][i] = p[k]
        for k in weights:
            weights[k][i] = w[k]
        started[i] = 1.0 if differs else started[i]
        for k in mean:
            mean[k] = mean[k] + int(fed.train.counts[i]) / total * p[k]
    return state.next({"global": {k: v.unsqueeze(0) for k, v in mean.items()}, "local": locals_,
                       "ala_weights": weights}, {"ala_started": started})


def fedbn_round(alg, state, fed, model, *, average_bn=False):
    """One FedBN round (Li et al., ICLR 2021, Algorithm 1), client by client: the full
    network of client k (server layers + own BN entries), R steps of SGD with F.batch_norm
    in training mode (running statistics moved in place), then the uniform mean of the
    non-BN layers.  ``average_bn``: the wrong variant that averages the BN affine parameters
    and statistics too (FedAvg)."""
    batches, chosen = o.draws(state, fed, alg.local_rounds, alg.batch_size,
                              alg.clients_per_round)
    shared = state.models["global"]
    local = {k: v.clone() for k, v in state.models["local_norm"].items()}
    nets = []
    for i in chosen:
        p = {**{k: v[0].clone() for k, v in shared.items()},
             **{k: v[i].clone() for k, v in local.items()}}
        for r in range(alg.local_rounds):
            x, y = o.batch(fed, batches, r, i)
            leaves = {k: v.detach().requires_grad_("running" not in k) for k, v in p.items()}
            h = F.linear(x[0], leaves["fc1.weight"].T, leaves["fc1.bias"])
            h = F.batch_norm(h, p["bn1.running_mean"], p["bn1.running_var"], leaves["bn1.weight"],
                             leaves["bn1.bias"], training=True, momentum=0.1, eps=1e-5)
            logits = F.linear(torch.relu(h), leaves["fc2.weight"].T, leaves["fc2.bias"])
            trained = [k for k in p if "running" not in k]
            grads = torch.autograd.grad(F.cross_entropy(logits, y[0]), [leaves[k] for k in trained])
            for k, g in zip(trained, grads):
                p[k] = (p[k] - alg.lr * g).detach()
        nets.append(p)
    mean = {k: sum(net[k] for net in nets) / len(nets) for k in nets[0]}
    for i, net in zip(chosen, nets):
        for k in local:
            local[k][i] = mean[k] if average_bn else net[k]
    return state.next({"global": {k: mean[k].unsqueeze(0) for k in shared}, "local_norm": local})


def fedrod_round(alg, state, fed, model, *, balanced=True):
    """One FedRoD round (Chen & Chao, ICLR 2022, eqs. 6–7, Algorithm 1), client by client:
    DNN written out (h = relu(x W1 + b1)), BSM loss CE(h W_G + b_G + log π, y) with π from
    np.bincount of the client's *training* labels (``balanced=False``: the wrong variant
    with plain CE), personalized loss CE(z_G + h W_P + b_P, y) with h, z_G detached; then
    Σ n_i θ_i / Σ n_i."""
    batches, chosen = o.draws(state, fed, alg.local_rounds, alg.batch_size,
                              alg.clients_per_round)
    g0 = {**state.models["body"], **state.models["generic_head"]}
    heads = {k: v.clone() for k, v in state.models["personal_head"].items()}
    total = sum(int(fed.train.counts[i]) for i in chosen)
    mean = {k: torch.zeros_like(v) for k, v in g0.items()}
    for i in chosen:
        s, c = int(fed.train.offsets[i]), int(fed.train.counts[i])
        with np.errstate(divide="ignore"):
            counts = np.bincount(fed.train.y[s:s + c].numpy(), minlength=fed.num_classes)
            log_pi = torch.tensor(np.log(counts / c))
        w = {k: v[0].clone() for k, v in g0.items()}
        wp, bp = heads["fc2.weight"][i].clone(), heads["fc2.bias"][i].clone()
        for r in range(alg.local_rounds):
            x, y = fed.train.gather(batches[r, i])
            p = {k: v.detach().requires_grad_(True) for k, v in w.items()}
            h = torch.relu(x @ p["fc1.weight"] + p["fc1.bias"])
            zg = h @ p["fc2.weight"] + p["fc2.bias"]
            grads = torch.autograd.grad(F.cross_entropy(zg + log_pi if balanced else zg, y),
                                        list(p.values()))
            lw, lb = wp.clone().requires_grad_(True), bp.clone().requires_grad_(True)
            loss_p = F.cross_entropy(zg.detach() + h.detach() @ lw + lb, y)
            gw, gb = torch.autograd.grad(loss_p, [lw, lb])
            w = {k: (w[k] - alg.lr * g).detach() for (k, g) in zip(w, grads)}
            wp, bp = wp - alg.personal_lr * gw, bp - alg.personal_lr * gb
        heads["fc2.weight"][i], heads["fc2.bias"][i] = wp, bp
        for k in mean:
            mean[k] = mean[k] + c / total * w[k]
    return state.next({"body": {k: mean[k] for k in ("fc1.weight", "fc1.bias")},
                       "generic_head": {k: mean[k] for k in ("fc2.weight", "fc2.bias")},
                       "personal_head": heads}, state.tensors)



def _bn_setting(seed):
    from algorithms.engine.models_norm import BatchNormMLP

    fed, _ = o.default_setting(seed)
    return fed, BatchNormMLP(o.DIM, o.CLASSES, hidden=(5,))


def _ala_observe(alg, state, fed, model):
    return {**models_of("global", "local", "ala_weights")(alg, state, fed, model),
            "ala_started": state.tensors["ala_started"]}


_DECOUPLED = models_of("shared", "personal")
for _name, _extra in (("fedrep", {"head_steps": 2}), ("fedper", {}), ("lgfedavg", {})):
    register_oracle(Oracle(
        _name, {"fedrep": "FedRep (Collins et al., ICML 2021)",
                "fedper": "FedPer (Arivazhagan et al., arXiv 1912.00818)",
                "lgfedavg": "LG-FedAvg (Liang et al., arXiv 2001.01523)"}[_name],
        {"fedrep": "Algorithm 1 (head steps, then body steps; body averaged)",
         "fedper": "joint local SGD, body averaged, heads personal",
         "lgfedavg": "joint local SGD, head averaged, bodies local"}[_name],
        algorithm(_name, **_extra, **SMALL), lambda seed: o.default_setting(seed, hidden=(5, 4)),
        stepwise(decoupled_round, _DECOUPLED), _DECOUPLED))

register_oracle(Oracle(
    "fedala", "FedALA (Zhang et al., AAAI 2023)", "Algorithm 1, eqs. 4-5",
    algorithm("fedala", ala_steps=2, ala_start_steps=4, ala_lr=1.0, **SMALL), o.default_setting,
    stepwise(fedala_round, _ala_observe), _ala_observe, rounds=3))   # round 0 has no ALA

register_oracle(Oracle(
    "fedbn", "FedBN (Li et al., ICLR 2021)", "Algorithm 1 (BN layers local)",
    algorithm("fedbn", **SMALL), _bn_setting,
    stepwise(fedbn_round, models_of("global", "local_norm")), models_of("global", "local_norm")))

register_oracle(Oracle(
    "fedrod", "FedRoD (Chen & Chao, ICLR 2022)", "eqs. 6-7, Algorithm 1",
    algorithm("fedrod", personal_lr=0.2, **SMALL), o.default_setting,
    stepwise(fedrod_round, models_of("body", "generic_head", "personal_head")),
    models_of("body", "generic_head", "personal_head")))
