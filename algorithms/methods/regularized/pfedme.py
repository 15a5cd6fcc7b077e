"""pFedMe — T. Dinh, N. H. Tran, T. D. Nguyen, *Personalized Federated Learning with Moreau
Envelopes*, NeurIPS 2020 (arXiv 2006.08848). Algorithm 1; docs/formulas.md §B.4.

Round ``t`` (all clients batched):

1. broadcast ``w^t``; every client sets ``w_{i,0} = w^t`` (and, as in the public code,
   starts its personalized model ``θ_i`` at ``w^t``);
2. for ``r = 0 … R−1``: a fresh mini-batch ``D_i`` of size ``|D|``; ``K`` gradient steps
   (personal learning rate ``η_p``, warm-started from the previous ``θ_i``) on
   ``h̃_i(θ; w_{i,r}, D_i) = f̃_i(θ; D_i) + λ/2 ‖θ − w_{i,r}‖²`` (eq. 7) give ``θ̃_i``; then
   ``w_{i,r+1} = w_{i,r} − ηλ (w_{i,r} − θ̃_i)`` (a gradient step on ``F_i`` using eq. 6);
3. the server samples ``S`` clients uniformly and sets
   ``w^{t+1} = (1 − β) w^t + β · mean_{i∈S^t} w_{i,R}`` (uniform mean as in the paper;
   ``aggregation="weighted"`` uses sample counts as the public code does).

Departures / choices (recorded, see docs/formulas.md §B.4):

* The inner problem is solved by a fixed number ``K`` of steps rather than until
  ``‖∇h̃‖² ≤ ν`` (eq. 8) — as in the paper's experiments and code.
* ``code_l2`` (default 0) adds the public code's extra ``μ θ`` term (μ = 0.001 there).
* Mini-batches are drawn uniformly *with* replacement (the code iterates a shuffled loader).
* ``train_clients="sampled"`` (opt-in; default ``"all"``, Algorithm 1) trains only the ``S``
  sampled clients each round, as PFLlib's pFedMe does: the global model ``w^t`` is the same
  as with ``"all"`` (only the sampled clients' ``w_{i,R}`` enter step 3, drawn from the same
  mini-batches), the reported personalized/local models of the other clients are those of
  their last participation; a round costs ``S`` clients' training instead of ``N``.
* Reported models, each under its own name: ``personalized`` = ``θ̃_i`` from the last inner
  solve (pFedMe-PM), ``global`` = ``w^{t+1}`` (pFedMe-GM), ``local`` = ``w_{i,R}``. The
  public code's "personalized" accuracy is in fact ``w_{i,R}`` (parameter aliasing); ours
  is ``θ̃_i``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from algorithms.engine.base import (State, batch_size_hp, broadcast, check_clients_per_round, hp, one_of,
                             register, sample_clients, sq_distance, validate_hyperparameters,
                             weighted_mean)
from algorithms.engine.contract import Algorithm, Phase, everyone, train_phase, with_server
from algorithms.engine.steps import map_tiles, prox_layout, prox_steps
from pfl_theory.validation import nonnegative, positive, positive_int


#: clients trained together in :meth:`PFedMe.local_update` (measured best of 128/256/512
#: on a 2-core CPU, benchmarks/bench_engine.py; a GPU gains nothing from smaller tiles)
CLIENT_TILE = 256


@register("pfedme")
@dataclass(frozen=True)
class PFedMe(Algorithm):
    """pFedMe (Dinh, Tran, Nguyen, NeurIPS 2020), Algorithm 1.  Paper symbols: λ = ``lam``,
    η = ``lr`` (the outer/local-model step), η_p = ``personal_lr`` (the personal
    learning rate of the K inner steps), K = ``inner_steps``, R = ``local_rounds``, |D| =
    ``batch_size``, β = ``beta`` (server mixing), S = ``clients_per_round``; μ = ``code_l2``
    is the public code's extra ℓ2 term (not in the paper)."""

    client_models = ("personalized", "local")
    lazy_batches = True     # a tile gathers one local round's batch at a time (contract.LazyRows)

    lam: float = hp(20.0, "regularisation λ pulling personalized models to the local model",
                    check=positive, symbol="λ")
    lr: float = hp(0.005, "pFedMe's outer η: step of the local-model update", check=positive, symbol="η")
    personal_lr: float = hp(0.01, "personal learning rate η_p of the K inner steps",
                            check=positive, symbol="η_p")
    inner_steps: int = hp(5, "inner gradient steps K per local round", check=positive_int,
                          symbol="K")
    local_rounds: int = hp(20, "local rounds R per communication round", check=positive_int,
                           symbol="R")
    batch_size: int = batch_size_hp()
    beta: float = hp(1.0, "server mixing β: w ← (1−β)w + β·mean (β=1: averaging)", check=positive,
                     symbol="β")
    clients_per_round: int = hp(10, "clients S aggregated per round (all clients train "
                                "unless train_clients='sampled')",
                                check=positive_int, symbol="S")
    aggregation: str = hp("uniform", "'uniform' (paper) or 'weighted' by samples (public code)",
                          check=one_of("uniform", "weighted"), symbol="—")
    code_l2: float = hp(0.0, "extra ℓ2 term μ·θ in the inner step (public code: 0.001)",
                        check=nonnegative, symbol="μ")
    train_clients: str = hp("all", "'all': every client trains each round (Algorithm 1); "
                            "'sampled': only the S sampled clients (as PFLlib), the others keep "
                            "their last models (same global model; N/S× less training)",
                            check=one_of("all", "sampled"), symbol="—")

    def __post_init__(self):
        validate_hyperparameters(self)

    def init(self, fed, model, seed: int) -> State:
        check_clients_per_round(self.clients_per_round, fed)
        w = model.init(1, seed=seed, device=fed.device, dtype=fed.dtype)
        n = fed.num_clients
        return State(0, seed, {"global": w, "personalized": broadcast(w, n), "local": broadcast(w, n)})

    def local_update(self, model, w_global, x, y):
        """Step 2 for all clients: returns ``(θ̃ [N], w_{·,R} [N])``; ``x[R, N, B, ...]``
        (tensors, or :class:`algorithms.engine.contract.LazyRows` as the engine passes them).

        Clients are independent here, so they run in tiles of ``CLIENT_TILE`` through all
        ``R·K`` steps: a tile's parameters and batches stay in cache (at N = 10,000 a
        round is ~1.6× faster than all clients step by step; results are identical); with
        ``T > 1`` torch threads, ``T`` tiles at a time, one per thread
        (:func:`algorithms.engine.steps.map_tiles`; the same numbers as one thread).  ``x[r]`` of
        a tile is gathered when local round ``r`` starts, so at most one round's batch of
        ``T`` tiles is materialised at a time.  Within a tile the models are held in the
        layout the inner solve is fastest in (:func:`algorithms.engine.steps.prox_layout`); each
        tile writes its rows straight into the contiguous ``[N, ...]`` results (allocated
        once: no per-tile contiguous copy and no concatenation of the tiles afterwards —
        at N = 100,000 that concatenation was ~1.3 s of a 13 s round)."""
        n = x.shape[1]
        if n <= CLIENT_TILE:
            return tuple({k: v.contiguous() for k, v in p.items()}
                         for p in self._solve(model, w_global, x, y))
        out = tuple({k: torch.empty((n, *v.shape[1:]), dtype=v.dtype, device=v.device)
                     for k, v in w_global.items()} for _ in range(2))

        def tile(s):                       # writes its rows of θ̃ and w_{·,R} (disjoint)
            cut = slice(s, s + CLIENT_TILE)
            for o, p in zip(out, self._solve(model, w_global, x[:, cut], y[:, cut])):
                for k, v in p.items():
                    o[k][cut] = v
        map_tiles(tile, range(0, n, CLIENT_TILE), next(iter(w_global.values())).device)
        return out

    def _solve(self, model, w_global, x, y):
        """Step 2 for the clients of one tile: ``(θ̃, w_{·,R})`` in the layout of
        :func:`algorithms.engine.steps.prox_layout`."""
        n = x.shape[1]
        w_loc = prox_layout(model, broadcast(w_global, n))    # kept by prox_steps and lerp
        theta = dict(w_loc)
        scratch: dict = {}                 # the gradient buffers, kept across local rounds
        for r in range(x.shape[0]):
            # θ̃ of round r > 0 is this tile's own (the previous solve's): updated in place
            theta = prox_steps(model, theta, w_loc, x[r], y[r], lam=self.lam,
                               lr=self.personal_lr, steps=self.inner_steps,
                               extra_l2=self.code_l2, owned=r > 0, scratch=scratch)
            # w − ηλ(w − θ̃) as one lerp (w + ηλ(θ̃ − w)): 1 tensor op instead of 3
            # (in place: ``w_loc`` is this tile's own copy, from ``broadcast``)
            for k in w_loc:
                w_loc[k].lerp_(theta[k], self.lr * self.lam)
        return theta, w_loc

    def aggregate(self, w_global, w_loc, rows, counts):
        """``(1 − β) w^t + β·mean`` of the rows ``rows`` of ``w_loc`` (``counts``: their
        sample counts)."""
        weights = counts if self.aggregation == "weighted" else torch.ones_like(counts)
        mean = weighted_mean({k: v[rows] for k, v in w_loc.items()}, weights)
        return {k: (1 - self.beta) * w_global[k] + self.beta * mean[k] for k in w_global}

    def first_phase(self, state: State, fed, model) -> Phase:
        """Every client trains; the ``S`` sampled ones upload.  ``train_clients="sampled"``:
        only the ``S`` sampled ones train (and upload) — the same draws
        (:func:`algorithms.engine.contract.train_phase` keeps the sampled clients' columns of the
        same mini-batches), so their ``w_{i,R}`` and the global model are those of
        ``"all"`` bit for bit (tested); the other clients' ``personalized`` / ``local``
        rows stay as they were (their last participation, or ``w^0``)."""
        if self.train_clients == "sampled":
            return train_phase(state, fed, self.local_rounds, self.batch_size,
                               self.clients_per_round)
        gen = state.generator()
        batches = fed.sample_batches(self.local_rounds, self.batch_size, gen)
        chosen = sample_clients(fed.num_clients, self.clients_per_round, gen)
        return Phase("train", everyone(fed), {"sgd": batches}, uploaders=chosen)

    def client_update(self, phase, model, view):
        x, y = view.batches["sgd"]
        theta, w_loc = self.local_update(model, view.server["global"], x, y)
        return {"personalized": theta, "local": w_loc}, {"local": w_loc}

    def server_aggregate(self, phase, state, uploads, fed, model):
        """Step 3 on the uploaded ``w_{i,R}`` of the sampled clients."""
        chosen = phase.upload_clients().to(fed.device)
        rows = torch.arange(chosen.numel(), device=fed.device)
        w_new = self.aggregate(state.models["global"], uploads["local"], rows,
                               fed.train.counts[chosen])
        return with_server(state, {"global": w_new}), None

    def evaluated(self, state: State) -> dict:
        return {"personalized": state.models["personalized"], "global": state.models["global"],
                "local": state.models["local"]}

    def diagnostics(self, state: State, fed, model) -> dict:
        """Mean ‖θ̃_i − w^{t+1}‖² and ‖w_{i,R} − w^{t+1}‖², against the *new* global model
        (the state keeps no copy of w^t; Thms 1b/2b measure θ̃_i(w^t) against w^t — the
        verification checks compute that exactly on their own runs)."""
        g = state.models["global"]
        return {"personalized_gap_sq": float(sq_distance(state.models["personalized"], g).mean()),
                "local_gap_sq": float(sq_distance(state.models["local"], g).mean())}
