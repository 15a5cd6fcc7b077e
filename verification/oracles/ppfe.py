"""Oracle of PPFE (Emrani, Najafi, Motahari, arXiv 2602.14244, Algorithm 1 as reconstructed
in the toolkit's formulas §C.3–C.4), one client at a time, autograd, float64.

Shared with the engine (documented readings): the stage schedule (``alg.schedule``), the
round's draws — the method's ``first_phase`` on a state that carries the *oracle's* sample
weights π (so a wrong π in the engine changes the mini-batches too), which draws the
π-weighted mini-batches (weighted ERM by weighted sampling) and the sampled clients.
Written again here: the FedRep-style local update with the rank projection after every head
step, the uniform body mean, and the stage transition (weighted 0-1 error ε_i, SAMME's
α_i = max(0, log((1−ε_i)/ε_i) + log(C−1)), eq. 7's π' ∝ π exp(β·miss), the kept stage
model, the heads of the next stage projected to rank ⌈min(d_in, d_out) γ^t⌉ by an SVD)."""

from __future__ import annotations

import math

import torch

from algorithms.engine.base import State
from verification.oracles import common as o
from verification.oracles.registry import Oracle, algorithm, register_oracle


def _personal_layers(alg, stage, model):
    k = min(alg.fixed_head if alg.fixed_head > 0 else stage, len(model.layers))
    head = [n for layer in model.layers[len(model.layers) - k:] for n in layer] if k else []
    return [n for layer in model.layers for n in layer if n not in head], head


def _project(alg, stage, w: dict) -> dict:
    """Rank-r truncation (SVD) of the weight matrices of a one-client head (stage ≥ 1)."""
    out = dict(w)
    factor = alg.shrink ** stage
    if alg.reduction != "svd" or stage == 0 or factor >= 1:
        return out
    for k, v in w.items():
        if not k.endswith("weight") or v[0].ndim != 2:
            continue
        d_in, d_out = v[0].shape
        r = max(1, math.ceil(min(d_in, d_out) * factor))
        if r < min(d_in, d_out):
            u, s, vh = torch.linalg.svd(v[0], full_matrices=False)
            out[k] = (u[:, :r] @ torch.diag(s[:r]) @ vh[:r, :]).unsqueeze(0)
    return out


def _transition(alg, fed, model, stage, body, heads, pis, alphas):
    """Finish stage ``stage`` on every client's *training* data; returns the kept stage
    models, the next stage's body and heads, π' and α."""
    _, next_head = _personal_layers(alg, stage + 1, model)
    kept, new_heads, new_pis = [], [], []
    for i in range(fed.num_clients):
        net = {**body, **heads[i]}
        s, n = int(fed.train.offsets[i]), int(fed.train.counts[i])
        x, y = fed.train.x[s:s + n][None], fed.train.y[s:s + n]
        miss = (model.forward(net, x)[0].argmax(-1) != y).double()
        pi = pis[i] / pis[i].sum()
        eps = min(1.0, max(0.0, float((pi * miss).sum())))
        e = min(max(eps, 1e-10), 1 - 1e-10)
        alphas[stage, i] = max(0.0, math.log((1 - e) / e) + math.log(fed.num_classes - 1))
        if alg.reweighting:
            w = pis[i] * torch.exp(alg.inverse_temperature * miss)
            new_pis.append(w / w.sum())
        else:
            new_pis.append(pis[i])
        kept.append(net)
        new_heads.append(_project(alg, stage + 1, {k: net[k] for k in next_head}))
    next_body, _ = _personal_layers(alg, stage + 1, model)
    return kept, {k: body[k] for k in next_body}, new_heads, new_pis


def ppfe_trajectory(alg, fed, model, seed, rounds):
    """PPFE rounds: stage 0 is FedAvg with a uniform body mean; at the first round of stage
    t ≥ 1 every client finishes stage t − 1 (:func:`_transition`); then the (sampled, or
    in a stage's last round every) client takes ``head_steps`` SGD steps on its head (rate
    η, projected after each) and ``local_rounds`` on the body (rate η·decay^t) on the
    π-weighted mini-batches; the server averages the bodies uniformly."""
    state = alg.init(fed, model, seed)
    body = {k: v.clone() for k, v in state.models["body"].items()}
    heads = [o.row(state.models["heads"], i) for i in range(fed.num_clients)]
    pis = [torch.full((int(c),), 1.0 / int(c), dtype=torch.float64) for c in fed.train.counts]
    alphas = torch.zeros(alg.num_stages(model), fed.num_clients, dtype=torch.float64)
    finished, stages_kept, out = 0, [], []
    for t in range(rounds):
        stage = alg.stage_at(t, model)
        if finished < stage:
            kept, body, heads, pis = _transition(alg, fed, model, finished, body, heads, pis,
                                                 alphas)
            stages_kept.append(kept)
            finished += 1
        flat = torch.cat(pis).to(fed.dtype)
        draw = State(t, seed, {}, {"weights": flat, "alphas": alphas,
                                   "finished_stages": torch.tensor(finished)})
        phase = alg.first_phase(draw, fed, model)
        batches, chosen = phase.batches["sgd"], phase.clients.tolist()
        full = batches.shape[1] == fed.num_clients
        body_keys, head_keys = _personal_layers(alg, stage, model)
        fedrep = alg.local_update == "fedrep" and bool(head_keys)
        body_lr = alg.lr * alg.body_lr_decay ** stage
        uploads = []
        for j, i in enumerate(chosen):
            col = i if full else j
            p = {**body, **heads[i]}
            steps = 0
            if fedrep:
                for r in range(alg.head_steps):
                    p = o.sgd(model, p, fed, batches, [r], col, alg.lr, keys=head_keys)
                    p = {**p, **_project(alg, stage, {k: p[k] for k in head_keys})}
                steps = alg.head_steps
                p = o.sgd(model, p, fed, batches, range(steps, steps + alg.local_rounds), col,
                          body_lr, keys=body_keys)
            else:
                for r in range(alg.local_rounds):
                    x, y = o.batch(fed, batches, r, col)
                    g = o.grad(model, p, x, y)
                    p = {k: (v - (alg.lr if k in head_keys else body_lr) * g[k]).detach()
                         for k, v in p.items()}
                    p = {**p, **_project(alg, stage, {k: p[k] for k in head_keys})}
            uploads.append({k: p[k] for k in body_keys})
            heads[i] = {k: p[k] for k in head_keys}
        weights = [int(fed.train.counts[i]) for i in chosen] if alg.aggregation == "weighted" \
            else None
        body = o.mean(uploads, weights)
        q = {**{f"body/{k}": v for k, v in body.items()},
             **({f"heads/{k}": torch.cat([h[k] for h in heads]) for k in heads[0]}
                if heads[0] else {}),
             "weights": torch.cat(pis), "alphas": alphas.clone()}
        for s, kept in enumerate(stages_kept):
            q.update({f"stage{s}/{k}": torch.cat([m[k] for m in kept]) for k in kept[0]})
        out.append(q)
    return out


def _observe(alg, state, fed, model):
    q = {f"{n}/{k}": v for n in state.models for k, v in state.models[n].items()}
    return {**q, "weights": state.tensors["weights"], "alphas": state.tensors["alphas"]}


register_oracle(Oracle(
    "ppfe", "PPFE (Emrani, Najafi, Motahari, arXiv 2602.14244)",
    "Algorithm 1 as reconstructed (stages, SAMME α, eq. 7 reweighting, SVD heads)",
    algorithm("ppfe", lr=0.1, local_rounds=2, head_steps=2, batch_size=5, clients_per_round=3,
              stages=2, total_rounds=3, stage_fractions="1,2", reduction="svd", shrink=0.5,
              body_lr_decay=0.8, inverse_temperature=0.7),
    lambda seed: o.default_setting(seed, hidden=(5, 4)), ppfe_trajectory, _observe,
    rounds=3,   # round 0 is stage 0, round 1 the transition to stage 1, round 2 its last
    tolerance=1e-8,
    tolerance_reason="a solver: the rank projection is an SVD (LAPACK on one client vs "
                     "batched) whose rounding, ~1e-15 relative, is amplified by the "
                     "conditioning of the truncated singular gap; 1e-8 is far below a "
                     "changed step"))
