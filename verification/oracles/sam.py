"""Oracles of the SAM family: FedSAM, PLGU-LF, PLGU-GRep, pFedHN, PLGU-GHN.  One client at
a time, autograd, float64.  The SAM perturbation (Foret et al., ICLR 2021, eq. 3; PLGU's
layer-wise eq. 5 with the corrected exponent 1/p, the documented reading) and the layer
scores (PLGU eq. 6/10, normalised to sum 1, all-zero scores kept at 0: the documented
reading) are written here again, per client, in plain loops."""

from __future__ import annotations

import torch

from verification.oracles import common as o
from verification.oracles.registry import Oracle, algorithm, models_of, register_oracle, stepwise


def sam_epsilon(g: dict, *, rho: float, p: float, scale: dict | None = None) -> dict:
    """ε̃ = ρ Λ sign(g)|g|^{q−1} / (Σ|g|^q)^{1/p} for one client (``g`` a dict of tensors;
    ``scale[name]`` the Λ entry of that parameter's layer, default 1); 0 if g = 0."""
    q = 1.0 if p == float("inf") else p / (p - 1.0)
    total = sum(float((v.abs() ** q).sum()) for v in g.values())
    if total == 0.0:
        return {k: torch.zeros_like(v) for k, v in g.items()}
    denom = total ** (1.0 / p)
    return {k: rho * (1.0 if scale is None else scale[k]) * torch.sign(v) * v.abs() ** (q - 1.0)
            / denom for k, v in g.items()}


def layer_scores(theta: dict, w: dict, layers) -> list[float]:
    """PLGU eq. 6 / 10: ξ_l = ‖θ_l − w_l‖_2 / dim(w_l), normalised to Σ_l ξ_l = 1 (all 0
    stays 0)."""
    raw = []
    for group in layers:
        sq = sum(float(((theta[k] - w[k]) ** 2).sum()) for k in group)
        raw.append(sq ** 0.5 / sum(w[k].numel() for k in group))
    total = sum(raw)
    return [r / total for r in raw] if total > 0 else [0.0] * len(raw)


def top(scores: list[float], d: int) -> set[int]:
    """The ``d`` layers of largest score (ties: the lower index)."""
    return set(sorted(range(len(scores)), key=lambda l: (-scores[l], l))[:d])


def sam_step(model, w, x, y, lr, *, rho, p, scale=None):
    """w ← w − lr ∇F_B(w + ε̃(∇F_B(w)))."""
    eps = sam_epsilon(o.grad(model, w, x, y), rho=rho, p=p, scale=scale)
    g = o.grad(model, {k: w[k] + eps[k] for k in w}, x, y)
    return {k: (w[k] - lr * g[k]).detach() for k in w}


def fedsam_round(alg, state, fed, model):
    """FedSAM (Qu et al., ICML 2022; Caldarola et al., ECCV 2022): each sampled client takes
    K SAM steps (eq. 3, Λ = I) from w^t; the server takes ``Σ n_i w_i / Σ n_i`` (FedAvg's,
    the documented weighting)."""
    batches, chosen = o.draws(state, fed, alg.local_rounds, alg.batch_size,
                              alg.clients_per_round)
    locals_ = []
    for i in chosen:
        w = o.copy(state.models["global"])
        for r in range(alg.local_rounds):
            x, y = o.batch(fed, batches, r, i)
            w = sam_step(model, w, x, y, alg.lr, rho=alg.rho, p=alg.p_norm)
        locals_.append(w)
    return state.next({"global": o.mean(locals_, [int(fed.train.counts[i]) for i in chosen])})


def plgu_lf_round(alg, state, fed, model):
    """PLGU-LF (Qu et al., CVPR 2023), Algorithm 2 with Algorithm 1 per sampled client:
    ξ_i = eq. 6 scores of θ̃_i against w̃^t; L_Per = the D layers of largest ξ_i; θ̃_i
    receives w̃^t on the other layers; K iterations on one mini-batch each: an SGD step on
    θ̃_i and an LWSAM step (eq. 5, Λ_i = diag ξ_i on L_Uni, 0 on L_Per) on the copy w̃_i;
    server w̃^{t+1} = w̃^t + (1/C) Σ_i (w̃_i − w̃^t)."""
    batches, chosen = o.draws(state, fed, alg.local_rounds, alg.batch_size,
                              alg.clients_per_round)
    wt, personal = state.models["global"], o.copy(state.models["personalized"])
    layers = model.layers
    deltas = []
    for i in chosen:
        theta = o.row(personal, i)
        xi = layer_scores(theta, wt, layers)
        per = top(xi, alg.personalized_layers)
        scale = {}
        for l, group in enumerate(layers):
            for k in group:
                if l not in per:
                    theta[k] = wt[k].clone()
                base = xi[l] if alg.layer_scaling == "scores" else 1.0
                scale[k] = 0.0 if l in per else base
        w = o.copy(wt)
        for r in range(alg.local_rounds):
            x, y = o.batch(fed, batches, r, i)
            g = o.grad(model, theta, x, y)
            theta = {k: (theta[k] - alg.lr * g[k]).detach() for k in theta}
            w = sam_step(model, w, x, y, alg.lr, rho=alg.rho, p=alg.p_norm, scale=scale)
        deltas.append({k: w[k] - wt[k] for k in w})
        for k in personal:
            personal[k][i] = theta[k][0]
    new = {k: wt[k] + sum(d[k] for d in deltas) / len(deltas) for k in wt}
    return state.next({"global": new, "personalized": personal})


def plgu_grep_round(alg, state, fed, model):
    """PLGU-GRep (Qu et al., CVPR 2023), Algorithm 3, per sampled client: eq. 9, K head
    steps with the body φ̃^t fixed; eq. 10, ξ_i from the client's last representation
    φ̃_i (``local_body``) against φ̃^t over the body layers; on the next mini-batch eq. 11
    φ_i = φ̃^t − η∇_φF, eq. 12 ε̃ at φ_i (Λ_i = diag ξ_i), eq. 13 φ̃_i = φ_i − η∇_φF(φ_i + ε̃)
    (the corrected g̃ reading); server φ̃^{t+1} = mean_i φ̃_i (uniform, as printed)."""
    steps = alg.head_steps + 1
    batches, chosen = o.draws(state, fed, steps, alg.batch_size, alg.clients_per_round)
    shared = state.models["shared"]
    personal, local_body = o.copy(state.models["personal"]), o.copy(state.models["local_body"])
    body_layers = model.layers[:len(model.layers) - alg.head_layers]
    body = [k for g in body_layers for k in g]
    uploads = []
    for i in chosen:
        p = {**o.copy(shared), **o.row(personal, i)}
        p = {k: p[k] for g in model.layers for k in g}
        head = [k for k in p if k not in body]
        p = o.sgd(model, p, fed, batches, range(alg.head_steps), i, alg.lr, keys=head)
        xi = layer_scores(o.row(local_body, i), shared, body_layers)
        scale = {k: xi[l] for l, g in enumerate(body_layers) for k in g}
        x, y = o.batch(fed, batches, alg.head_steps, i)
        g = o.grad(model, p, x, y, keys=body)
        phi = {**p, **{k: (p[k] - alg.lr * g[k]).detach() for k in body}}
        eps = sam_epsilon(o.grad(model, phi, x, y, keys=body), rho=alg.rho, p=alg.p_norm,
                          scale=scale)
        g2 = o.grad(model, {k: phi[k] + eps[k] if k in eps else phi[k] for k in phi}, x, y,
                    keys=body)
        new_phi = {k: (phi[k] - alg.lr * g2[k]).detach() for k in body}
        uploads.append(new_phi)
        for k in personal:
            personal[k][i] = p[k][0]
        for k in local_body:
            local_body[k][i] = new_phi[k][0]
    weights = [int(fed.train.counts[i]) for i in chosen] if alg.aggregation == "weighted" \
        else None
    return state.next({"shared": o.mean(uploads, weights), "personal": personal,
                       "local_body": local_body})


def hypernetwork(hn: dict, v: torch.Tensor, names) -> dict:
    """pFedHN eq. 22 for ONE embedding ``v [e]``: ReLU MLP then one linear head per target
    parameter; returns ``{name: [1, *shape]}``."""
    h, j = v, 0
    while f"mlp{j}.weight" in hn:
        h = torch.relu(h @ hn[f"mlp{j}.weight"][0] + hn[f"mlp{j}.bias"][0])
        j += 1
    return {n: (torch.tensordot(h, hn[f"out:{n}.weight"][0], dims=1)
                + hn[f"out:{n}.bias"][0]).unsqueeze(0) for n in names}


def _hn_grads(hn, v, deltas, chosen, names):
    """(mean_i (∂w_i/∂φ)^T Δ_i, {i: (∂w_i/∂v_i)^T Δ_i}), one client at a time."""
    g_hn = {k: torch.zeros_like(t) for k, t in hn.items()}
    g_v = {}
    for i, delta in zip(chosen, deltas):
        with torch.enable_grad():
            leaves = {k: t.detach().requires_grad_(True) for k, t in hn.items()}
            vi = v[i].detach().requires_grad_(True)
            out = hypernetwork(leaves, vi, names)
            inner = sum((out[n] * delta[n]).sum() for n in names)
            grads = torch.autograd.grad(inner, list(leaves.values()) + [vi])
        for k, g in zip(leaves, grads[:-1]):
            g_hn[k] = g_hn[k] + g / len(chosen)
        g_v[i] = grads[-1]
    return g_hn, g_v


def pfedhn_round(alg, state, fed, model):
    """pFedHN (Shamsian et al., ICML 2021) and PLGU-GHN (Qu et al., CVPR 2023, eqs. 22–26):
    each sampled client receives w_i = h(v_i; φ), takes K SGD steps, returns Δ_i = w_i^0 −
    w_i^K (the pFedHN code's sign); φ ← φ − α mean_i (∂w_i/∂φ)^T Δ_i and v_i ← v_i −
    α (∂w_i/∂v_i)^T Δ_i (all clients at once, plain SGD: the documented reading).  PLGU-GHN
    first perturbs φ by ε = ρ g/‖g‖ (eq. 24, g the φ update direction) and evaluates both
    products at φ + ε."""
    batches, chosen = o.draws(state, fed, alg.local_rounds, alg.batch_size,
                              alg.clients_per_round)
    hn, v = state.models["hypernetwork"], state.models["embeddings"]["v"]
    names = [k[4:-len(".weight")] for k in hn if k.startswith("out:") and k.endswith(".weight")]
    deltas = []
    for i in chosen:
        w0 = {k: t.detach() for k, t in hypernetwork(hn, v[i], names).items()}
        wk = o.sgd(model, o.copy(w0), fed, batches, range(alg.local_rounds), i, alg.lr)
        deltas.append({k: w0[k] - wk[k] for k in w0})
    at = hn
    if alg.name == "plgu-ghn":
        g, _ = _hn_grads(hn, v, deltas, chosen, names)
        eps = sam_epsilon(g, rho=alg.rho, p=alg.p_norm)
        at = {k: hn[k] + eps[k] for k in hn}
    g_hn, g_v = _hn_grads(at, v, deltas, chosen, names)
    new_v = v.clone()
    for i in chosen:
        new_v[i] = v[i] - alg.hn_lr * g_v[i]
    return state.next({"hypernetwork": {k: hn[k] - alg.hn_lr * g_hn[k] for k in hn},
                       "embeddings": {"v": new_v}})



SMALL = dict(lr=0.1, batch_size=5, clients_per_round=4)


def _deep(seed):
    return o.default_setting(seed, hidden=(5, 4))


register_oracle(Oracle(
    "fedsam", "FedSAM (Qu et al., ICML 2022)", "FedAvg with SAM local steps (Foret et al. eq. 3)",
    algorithm("fedsam", local_rounds=3, rho=0.1, **SMALL), o.default_setting,
    stepwise(fedsam_round, models_of("global")), models_of("global")))

register_oracle(Oracle(
    "plgu-lf", "PLGU (Qu et al., CVPR 2023)", "Algorithm 2 (PLGU-LF), eqs. 5-6",
    algorithm("plgu-lf", local_rounds=3, rho=0.1, personalized_layers=1, **SMALL), _deep,
    stepwise(plgu_lf_round, models_of("global", "personalized")),
    models_of("global", "personalized"), rounds=3))    # round 0 has ξ = 0 (θ̃ = w̃)

register_oracle(Oracle(
    "plgu-grep", "PLGU (Qu et al., CVPR 2023)", "Algorithm 3 (PLGU-GRep), eqs. 8-13",
    algorithm("plgu-grep", head_steps=2, rho=0.1, **SMALL), _deep,
    stepwise(plgu_grep_round, models_of("shared", "personal", "local_body")),
    models_of("shared", "personal", "local_body"), rounds=3))

_HN = dict(local_rounds=3, hn_lr=0.3, embed_dim=3, hn_hidden=4, hn_layers=1, **SMALL)
register_oracle(Oracle(
    "pfedhn", "pFedHN (Shamsian et al., ICML 2021)", "hypernetwork eq. 22, Δ-VJP updates",
    algorithm("pfedhn", **_HN), o.default_setting,
    stepwise(pfedhn_round, models_of("hypernetwork", "embeddings")),
    models_of("hypernetwork", "embeddings")))

register_oracle(Oracle(
    "plgu-ghn", "PLGU (Qu et al., CVPR 2023)", "appendix C, eqs. 22-26 (PLGU-GHN)",
    algorithm("plgu-ghn", rho=0.1, **_HN), o.default_setting,
    stepwise(pfedhn_round, models_of("hypernetwork", "embeddings")),
    models_of("hypernetwork", "embeddings")))
