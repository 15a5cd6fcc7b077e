"""Oracles of the regularized family: pFedMe, Per-FedAvg (HF), Ditto, APFL, L2SGD.  pFedMe and
Per-FedAvg (FO) are also checked against their full-batch oracle form on quadratics by
:mod:`verification.checks.engine_oracle`; these per-client oracles add mini-batches, client
sampling, the Hessian-free step and the adaptation.  One client at a time on its own
``[1, ...]`` copy, autograd, float64."""

from __future__ import annotations

import torch

from verification.oracles import common as o
from verification.oracles.registry import Oracle, algorithm, models_of, register_oracle, stepwise

SMALL = dict(local_rounds=3, batch_size=5, clients_per_round=3)


def ditto_round(alg, state, fed, model):
    """Ditto (Li, Hu, Beirami, Smith, ICML 2021), Algorithm 1: each sampled client runs R SGD
    steps of the global model from ``w^t`` (FedAvg, server mean ``Σ n_k w_k / Σ n_k``, the
    engine's documented FedAvg weighting) and, on the same R mini-batches, R personal steps
    ``v_k ← v_k − η_p(∇f̃_k(v_k) + λ(v_k − w^t))`` (the paper's s = R)."""
    batches, chosen = o.draws(state, fed, alg.local_rounds, alg.batch_size,
                              alg.clients_per_round)
    wt, personal = state.models["global"], o.copy(state.models["personalized"])
    locals_ = []
    for i in chosen:
        w, v = o.copy(wt), o.row(personal, i)
        for r in range(alg.local_rounds):
            x, y = o.batch(fed, batches, r, i)
            gw, gv = o.grad(model, w, x, y), o.grad(model, v, x, y)
            w = {k: (w[k] - alg.lr * gw[k]).detach() for k in w}
            v = {k: (v[k] - alg.personal_lr * (gv[k] + alg.lam * (v[k] - wt[k]))).detach()
                 for k in v}
        locals_.append(w)
        for k in personal:
            personal[k][i] = v[k][0]
    glob = o.mean(locals_, [int(fed.train.counts[i]) for i in chosen])
    return state.next({"global": glob, "personalized": personal})


def apfl_round(alg, state, fed, model):
    """APFL (Deng, Kamani, Mahdavi, arXiv 2003.13461), Algorithm 1 with adaptive α (eq. 10),
    per sampled client from ``w_i = w^t`` for R mini-batches (the same one for the three
    updates, all from the pre-step values): ``w_i ← w_i − η∇f̃_i(w_i)``,
    ``v_i ← v_i − η α_i ∇f̃_i(v̄_i)`` with ``v̄_i = α_i v_i + (1 − α_i) w_i``,
    ``α_i ← clip_[0,1](α_i − η_α ⟨v_i − w_i, ∇f̃_i(v̄_i)⟩)``; then ``w^{t+1}`` = the
    sample-weighted mean of the ``w_i`` (the engine's documented FedAvg weighting)."""
    batches, chosen = o.draws(state, fed, alg.local_rounds, alg.batch_size,
                              alg.clients_per_round)
    wt = state.models["global"]
    local, alpha = o.copy(state.models["local"]), state.tensors["alpha"].clone()
    locals_ = []
    for i in chosen:
        w, v, a = o.copy(wt), o.row(local, i), float(alpha[i])
        for r in range(alg.local_rounds):
            x, y = o.batch(fed, batches, r, i)
            vbar = {k: a * v[k] + (1 - a) * w[k] for k in v}
            gw, gbar = o.grad(model, w, x, y), o.grad(model, vbar, x, y)
            inner = sum(float(((v[k] - w[k]) * gbar[k]).sum()) for k in v)
            v = {k: (v[k] - alg.lr * a * gbar[k]).detach() for k in v}
            w = {k: (w[k] - alg.lr * gw[k]).detach() for k in w}
            a = min(1.0, max(0.0, a - alg.mix_lr * inner))
        locals_.append(w)
        alpha[i] = a
        for k in local:
            local[k][i] = v[k][0]
    glob = o.mean(locals_, [int(fed.train.counts[i]) for i in chosen])
    return state.next({"global": glob, "local": local}, {"alpha": alpha})


def l2sgd_round(alg, state, fed, model):
    """L2SGD (Hanzely, Richtárik, arXiv 2002.05516), Algorithm 1 (L2GD with mini-batch
    gradients), R iterations each flipping one coin ξ ~ Bernoulli(p) for the federation:
    ξ = 0: ``x_i ← x_i − η/(1−p) ∇f̃_i(x_i)`` on the iteration's mini-batch; ξ = 1:
    ``x_i ← x_i − (ηλ/p)(x_i − x̄)``, ``x̄ = (1/n) Σ_i x_i``.  The coins are drawn after the
    mini-batches from the round's stream 0 (the engine's documented order); the state's
    ``global`` is ``x̄`` of the final models."""
    gen = state.generator()
    batches = fed.sample_batches(alg.local_rounds, alg.batch_size, gen)
    coins = (torch.rand(alg.local_rounds, generator=gen, dtype=torch.float64)
             < alg.avg_prob).tolist()
    n = fed.num_clients
    xs = [o.row(state.models["personalized"], i) for i in range(n)]
    for r, coin in enumerate(coins):
        if coin:
            bar = {k: sum(x[k] for x in xs) / n for k in xs[0]}
            theta = alg.lr * alg.lam / alg.avg_prob
            xs = [{k: x[k] - theta * (x[k] - bar[k]) for k in x} for x in xs]
        else:
            xs = [o.sgd(model, x, fed, batches, [r], i, alg.lr / (1 - alg.avg_prob))
                  for i, x in enumerate(xs)]
    personal = {k: torch.cat([x[k] for x in xs]) for k in xs[0]}
    bar = {k: sum(x[k] for x in xs) / n for k in xs[0]}
    return state.next({"personalized": personal, "global": bar},
                      {"averaging_steps": torch.tensor(sum(coins))})


def pfedme_round(alg, state, fed, model):
    """pFedMe (Dinh, Tran, Nguyen, NeurIPS 2020), Algorithm 1, per client on mini-batches:
    every client (``train_clients="all"``) starts w_i = w^t, θ = w_i; for r < R, K steps
    θ ← θ − η_p(∇f̃_i(θ; D_r) + λ(θ − w_i)) on the r-th mini-batch (θ warm-started), then
    w_i ← w_i − ηλ(w_i − θ); the server mixes w ← (1 − β)w + β mean_{i∈S} w_i over the S
    sampled clients (uniform, the paper's).  Draws: the R mini-batches of every client,
    then S clients (stream 0)."""
    batches, chosen = o.draws(state, fed, alg.local_rounds, alg.batch_size,
                              alg.clients_per_round)
    wt = state.models["global"]
    personal, local = o.copy(state.models["personalized"]), o.copy(state.models["local"])
    finals = {}
    for i in range(fed.num_clients):
        w = o.copy(wt)
        theta = o.copy(w)
        for r in range(alg.local_rounds):
            x, y = o.batch(fed, batches, r, i)
            for _ in range(alg.inner_steps):
                g = o.grad(model, theta, x, y)
                theta = {k: (theta[k] - alg.personal_lr * (g[k] + alg.lam * (theta[k] - w[k])
                                                           + alg.code_l2 * theta[k])).detach()
                         for k in theta}
            w = {k: w[k] - alg.lr * alg.lam * (w[k] - theta[k]) for k in w}
        finals[i] = w
        for k in personal:
            personal[k][i], local[k][i] = theta[k][0], w[k][0]
    weights = [int(fed.train.counts[i]) for i in chosen] if alg.aggregation == "weighted" \
        else None
    mean = o.mean([finals[i] for i in chosen], weights)
    glob = {k: (1 - alg.beta) * wt[k] + alg.beta * mean[k] for k in wt}
    return state.next({"global": glob, "personalized": personal, "local": local})


def perfedavg_round(alg, state, fed, model):
    """Per-FedAvg (Fallah, Mokhtari, Ozdaglar, NeurIPS 2020), Algorithm 1, Hessian-free
    variant, per sampled client from w^t, R meta steps on three independent mini-batches
    D, D', D'': w̃ = w − α∇f̃(w; D), g = ∇f̃(w̃; D'),
    g ← g − α (∇f̃(w + δg; D'') − ∇f̃(w − δg; D''))/(2δ) (the finite-difference Hessian-vector
    product), w ← w − β g; the server takes Σ n_i w_i / Σ n_i (the documented FedAvg
    weighting).  Then every client adapts the new global model by one α-step on a
    mini-batch of its *training* split (stream 1): the evaluated personalized model.  Draws
    (stream 0): D' for every client, the S clients, then D and D''."""
    gen = state.generator()
    outer = fed.sample_batches(alg.local_rounds, alg.batch_size, gen)
    from algorithms.engine.base import sample_clients

    chosen = sample_clients(fed.num_clients, alg.clients_per_round, gen).tolist()
    inner = fed.sample_batches(alg.local_rounds, alg.batch_size, gen)
    hess = fed.sample_batches(alg.local_rounds, alg.batch_size, gen)
    a, d = alg.inner_lr, alg.hf_delta
    locals_ = []
    for i in chosen:
        w = o.copy(state.models["global"])
        for r in range(alg.local_rounds):
            g_in = o.grad(model, w, *o.batch(fed, inner, r, i))
            w_t = {k: w[k] - a * g_in[k] for k in w}
            g = o.grad(model, w_t, *o.batch(fed, outer, r, i))
            if alg.variant == "hf":
                xh, yh = o.batch(fed, hess, r, i)
                gp = o.grad(model, {k: w[k] + d * g[k] for k in w}, xh, yh)
                gm = o.grad(model, {k: w[k] - d * g[k] for k in w}, xh, yh)
                g = {k: g[k] - a * (gp[k] - gm[k]) / (2 * d) for k in g}
            w = {k: (w[k] - alg.lr * g[k]).detach() for k in w}
        locals_.append(w)
    glob = o.mean(locals_, [int(fed.train.counts[i]) for i in chosen])
    adapt = fed.sample_batches(1, alg.batch_size, state.generator(1))
    rows = []
    for i in range(fed.num_clients):
        g = o.grad(model, glob, *o.batch(fed, adapt, 0, i))
        rows.append({k: glob[k] - a * g[k] for k in glob})
    return state.next({"global": glob,
                       "personalized": {k: torch.cat([r[k] for r in rows]) for k in glob}})



def _with_alpha(alg, state, fed, model):
    return {**models_of("global", "local")(alg, state, fed, model),
            "alpha": state.tensors["alpha"]}


def _with_steps(alg, state, fed, model):
    return {**models_of("global", "personalized")(alg, state, fed, model),
            "averaging_steps": state.tensors["averaging_steps"]}


register_oracle(Oracle(
    "pfedme", "pFedMe (Dinh et al., NeurIPS 2020)",
    "Algorithm 1 on mini-batches, every client trains, S aggregated, β-mixing",
    algorithm("pfedme", lam=3.0, lr=0.05, personal_lr=0.05, inner_steps=2, local_rounds=2,
          batch_size=5, beta=1.5, clients_per_round=3), o.default_setting,
    stepwise(pfedme_round, models_of("global", "personalized", "local")),
    models_of("global", "personalized", "local")))

register_oracle(Oracle(
    "perfedavg", "Per-FedAvg (Fallah et al., NeurIPS 2020)",
    "Algorithm 1, Hessian-free variant, and the one-step adaptation",
    algorithm("perfedavg", lr=0.1, inner_lr=0.05, variant="hf", hf_delta=1e-3, **SMALL),
    o.default_setting, stepwise(perfedavg_round, models_of("global", "personalized")),
    models_of("global", "personalized")))

register_oracle(Oracle(
    "ditto", "Ditto (Li et al., ICML 2021)", "Algorithm 1 (s = R personal steps)",
    algorithm("ditto", lam=0.5, lr=0.1, personal_lr=0.2, **SMALL), o.default_setting,
    stepwise(ditto_round, models_of("global", "personalized")),
    models_of("global", "personalized")))

register_oracle(Oracle(
    "apfl", "APFL (Deng et al., arXiv 2003.13461)", "Algorithm 1, adaptive α (eq. 10)",
    algorithm("apfl", lr=0.1, mix_init=0.5, mix_lr=0.05, **SMALL), o.default_setting,
    stepwise(apfl_round, _with_alpha), _with_alpha))

register_oracle(Oracle(
    "l2sgd", "L2SGD (Hanzely, Richtárik, arXiv 2002.05516)", "Algorithm 1 (L2GD, stochastic)",
    algorithm("l2sgd", lr=0.1, lam=1.5, avg_prob=0.4, local_rounds=6, batch_size=5),
    o.default_setting, stepwise(l2sgd_round, _with_steps), _with_steps))
