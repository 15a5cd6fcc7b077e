"""Oracles of the regularized family: Ditto, APFL, L2SGD (pFedMe and Per-FedAvg (FO) are
checked against their oracle form by :mod:`verification.checks.engine_oracle`).  One client
at a time on its own ``[1, ...]`` copy, autograd, float64."""

from __future__ import annotations

import torch

from verification.oracles import common as o
from verification.oracles.registry import Oracle, models_of, register_oracle, stepwise

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


def _make(name, **kw):
    def make():
        from algorithms.engine.base import get_algorithm
        return get_algorithm(name)(**kw)
    return make


def _with_alpha(alg, state, fed, model):
    return {**models_of("global", "local")(alg, state, fed, model),
            "alpha": state.tensors["alpha"]}


def _with_steps(alg, state, fed, model):
    return {**models_of("global", "personalized")(alg, state, fed, model),
            "averaging_steps": state.tensors["averaging_steps"]}


register_oracle(Oracle(
    "ditto", "Ditto (Li et al., ICML 2021)", "Algorithm 1 (s = R personal steps)",
    _make("ditto", lam=0.5, lr=0.1, personal_lr=0.2, **SMALL), o.default_setting,
    stepwise(ditto_round, models_of("global", "personalized")),
    models_of("global", "personalized")))

register_oracle(Oracle(
    "apfl", "APFL (Deng et al., arXiv 2003.13461)", "Algorithm 1, adaptive α (eq. 10)",
    _make("apfl", lr=0.1, mix_init=0.5, mix_lr=0.05, **SMALL), o.default_setting,
    stepwise(apfl_round, _with_alpha), _with_alpha))

register_oracle(Oracle(
    "l2sgd", "L2SGD (Hanzely, Richtárik, arXiv 2002.05516)", "Algorithm 1 (L2GD, stochastic)",
    _make("l2sgd", lr=0.1, lam=1.5, avg_prob=0.4, local_rounds=6, batch_size=5),
    o.default_setting, stepwise(l2sgd_round, _with_steps), _with_steps))
