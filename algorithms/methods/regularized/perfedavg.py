"""Per-FedAvg — A. Fallah, A. Mokhtari, A. Ozdaglar, *Personalized Federated Learning with
Theoretical Guarantees: A Model-Agnostic Meta-Learning Approach*, NeurIPS 2020
(arXiv 2002.07948).  Algorithm 1 with the first-order (FO) and Hessian-free (HF)
approximations of §3; a baseline of pFedMe and CGPFL (docs/formulas.md §B.1 eq. 4, §A.10).

Objective: ``min_w (1/N) Σ_i f_i(w − α∇f_i(w))``.  Round ``t`` (sampled clients batched):
for ``r = 0 … R−1`` with three independent mini-batches ``D, D', D''`` of size ``|D|``:

* ``w̃ = w − α ∇f̃_i(w; D)`` (α = ``inner_lr``);
* FO: ``w ← w − β ∇f̃_i(w̃; D')``;
* HF: ``w ← w − β (g − α d)`` with ``g = ∇f̃_i(w̃; D')`` and the Hessian–vector product by
  central differences ``d = [∇f̃_i(w + δg; D'') − ∇f̃_i(w − δg; D'')] / (2δ)``;

then ``w^{t+1}`` = sample-weighted mean of the sampled clients' models (the engine's
FedAvg rule; the paper averages uniformly — equal with equal client sizes).

Batches: ``D'`` is drawn first from the round's stream (then the client sample, then
``D`` and ``D''``), so with ``inner_lr = 0`` the FO variant is exactly FedAvg with
``lr = β``.  Evaluated as in the paper: ``personalized`` = one local adaptation step
``w^{t+1} − α ∇f̃_i(w^{t+1}; D_i)`` on a fresh mini-batch (stream 1) for every client;
``global`` = ``w^{t+1}``.

``adapt_on="test"`` (NOT the paper's method; off by default) reproduces how the public pFedMe
code evaluates Per-FedAvg (``userperavg.py``, ``train_one_step``): the personalized model is
``w − α∇f̃_i(w; T₁)`` followed by ``− β∇f̃_i(·; T₂)``, with ``T₁, T₂`` mini-batches of the
client's **test** split — the model is adapted on the data it is then scored on.  It exists
only to reproduce the published Table 1 numbers (docs/formulas.md §B.7).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from algorithms.engine.steps import sgd_update
from algorithms.engine.base import (State, batch_size_hp, broadcast, check_clients_per_round,
                             clients_per_round_hp, hp, register, sample_clients,
                             validate_hyperparameters, weighted_mean)
from algorithms.engine.contract import Algorithm, Phase, everyone, with_server
from pfl_theory.validation import nonnegative, positive, positive_int


@register("perfedavg")
@dataclass(frozen=True)
class PerFedAvg(Algorithm):
    """Per-FedAvg (Fallah, Mokhtari, Ozdaglar, NeurIPS 2020), Algorithm 1.  Paper symbols:
    β = ``lr`` (the outer/meta step; note: ``lr`` is β here), α = ``inner_lr``, δ =
    ``hf_delta``, τ = R = ``local_rounds``, |D| = |D'| = |D''| = ``batch_size``, S =
    ``clients_per_round``.  Client/server split: after the server's average, a second
    exchange (``adapt``) has every client adapt the new global model (its personalized
    model); for ``adapt_on="test"`` the server draws the uniform numbers of the test
    mini-batch positions and each client maps them to its own test split."""

    client_models = ("personalized",)
    lazy_batches = True     # every client adapts: batches gathered per local step (LazyRows)

    lr: float = hp(0.02, "Per-FedAvg's β (not η): outer (meta) step", check=positive, symbol="β")
    inner_lr: float = hp(0.02, "inner / adaptation learning rate α", check=nonnegative, symbol="α")
    variant: str = hp("hf", "'fo' (first-order) or 'hf' (Hessian-free)", symbol="—")
    hf_delta: float = hp(1e-3, "finite-difference step δ of the HF Hessian-vector product",
                         check=positive, symbol="δ")
    local_rounds: int = hp(20, "local steps R per round", check=positive_int, symbol="τ")
    batch_size: int = batch_size_hp()
    clients_per_round: int = clients_per_round_hp()
    adapt_on: str = hp("train", "'train' (the paper) or 'test': adapt the evaluated model "
                                "with an α-step and a β-step on TEST mini-batches, as the "
                                "public pFedMe code's userperavg.py does (leaks test data)",
                                symbol="—")

    def __post_init__(self):
        validate_hyperparameters(self)
        if self.variant not in ("fo", "hf"):
            raise ValueError(f"variant must be 'fo' or 'hf', got {self.variant!r}")
        if self.adapt_on not in ("train", "test"):
            raise ValueError(f"adapt_on must be 'train' or 'test', got {self.adapt_on!r}")

    def reads_test_split(self) -> str | None:
        """Why this configuration reads the clients' test split, or ``None`` (the paper's
        method never does; ``pflt run`` prints the reason and marks the run's summary)."""
        if self.adapt_on == "test":
            return ("adapt_on='test' adapts the evaluated model on test mini-batches (the public "
                    "pFedMe code's evaluation, not Per-FedAvg's): its personalized accuracy is "
                    "measured on data it was adapted on")
        return None

    def init(self, fed, model, seed: int) -> State:
        check_clients_per_round(self.clients_per_round, fed)
        w = model.init(1, seed=seed, device=fed.device, dtype=fed.dtype)
        return State(0, seed, {"global": w, "personalized": broadcast(w, fed.num_clients)})

    def meta_step(self, model, w, batch, batch2, batch3):
        """One Per-FedAvg local step for all sampled clients."""
        g_in, _ = model.grad(w, *batch)
        w_tilde = {k: w[k] - self.inner_lr * g_in[k] for k in w}
        g, _ = model.grad(w_tilde, *batch2)
        if self.variant == "hf":
            dlt = self.hf_delta
            gp, _ = model.grad({k: w[k] + dlt * g[k] for k in w}, *batch3)
            gm, _ = model.grad({k: w[k] - dlt * g[k] for k in w}, *batch3)
            g = {k: g[k] - self.inner_lr * (gp[k] - gm[k]) / (2 * dlt) for k in g}
        return {k: w[k] - self.lr * g[k] for k in w}

    def adapt(self, model, w_global, x, y):
        """One adaptation step ``w − α∇f̃_i(w; D_i)`` for the clients of ``x[P, B, ...]``."""
        w = broadcast(w_global, x.shape[0])
        g, _ = model.grad(w, x, y)
        return {k: w[k] - self.inner_lr * g[k] for k in w}

    def adapt_on_test(self, model, w_global, test, u):
        """``adapt_on="test"`` (public code): an α-step and a β-step on the two test
        mini-batches that ``u [P, 2, B]`` (uniform numbers) picks from the clients' ``test``."""
        w = broadcast(w_global, u.shape[0])
        for j, step_lr in enumerate((self.inner_lr, self.lr)):
            x, y = test.gather(_test_positions(test, u[:, j]))
            g, _ = model.grad(w, x, y)
            w = sgd_update(w, g, step_lr, in_place=True)         # own (broadcast)
        return w

    def first_phase(self, state: State, fed, model) -> Phase:
        """Draws (stream 0): the outer mini-batches, the ``S`` clients, the inner and the
        Hessian mini-batches, every client's.  Only the sampled clients' columns are kept
        (``[R, S, B]``, the same numbers; see :func:`algorithms.engine.contract.train_phase`): the
        outer draw is skipped, then redrawn for them from the saved generator state."""
        gen = state.generator()
        steps, size = self.local_rounds, self.batch_size
        if self.clients_per_round >= fed.num_clients:
            outer = fed.sample_batches(steps, size, gen)
            chosen = sample_clients(fed.num_clients, self.clients_per_round, gen)
            inner = fed.sample_batches(steps, size, gen)
            hess = fed.sample_batches(steps, size, gen)
            return Phase("train", chosen, {"outer": outer, "inner": inner, "hess": hess})
        start = gen.get_state()
        fed.skip_batches(steps, size, gen)
        chosen = sample_clients(fed.num_clients, self.clients_per_round, gen)
        inner = fed.sample_batches(steps, size, gen, clients=chosen)
        hess = fed.sample_batches(steps, size, gen, clients=chosen)
        outer = fed.sample_batches(steps, size, torch.Generator().set_state(start),
                                   clients=chosen)
        return Phase("train", chosen, {"outer": outer, "inner": inner, "hess": hess})

    def client_update(self, phase, model, view):
        """``train``: R meta steps from ``w^t``, uploads ``w_i``; ``adapt``: the adaptation
        of the new global model, kept as the client's personalized model."""
        if phase.name == "adapt":
            w = view.server["global"]
            if self.adapt_on == "test":
                return {"personalized": self.adapt_on_test(model, w, view.test,
                                                           view.payload["u"])}, {}
            x, y = view.batches["adapt"]
            return {"personalized": self.adapt(model, w, x[0], y[0])}, {}
        (x2, y2), (x1, y1), (x3, y3) = (view.batches[k] for k in ("outer", "inner", "hess"))
        w = broadcast(view.server["global"], x1.shape[1])
        for r in range(self.local_rounds):
            w = self.meta_step(model, w, (x1[r], y1[r]), (x2[r], y2[r]), (x3[r], y3[r]))
        return {}, {"global": w}

    def server_aggregate(self, phase, state, uploads, fed, model):
        if phase.name == "adapt":
            return state, None
        counts = fed.train.counts[phase.upload_clients().to(fed.device)]
        state = with_server(state, {"global": weighted_mean(uploads["global"], counts)})
        gen = state.generator(1)
        if self.adapt_on == "test":      # the two test mini-batches' uniform numbers
            u = [torch.rand((fed.num_clients, self.batch_size), generator=gen,
                            dtype=torch.float64) for _ in range(2)]
            return state, Phase("adapt", everyone(fed), payload={"u": torch.stack(u, 1)},
                                uploaders=everyone(fed)[:0])
        batches = fed.sample_batches(1, self.batch_size, gen)
        return state, Phase("adapt", everyone(fed), {"adapt": batches}, uploaders=everyone(fed)[:0])

    def evaluated(self, state: State) -> dict:
        return {"personalized": state.models["personalized"], "global": state.models["global"]}


def _test_positions(test, u):
    """Test-split indices ``[P, B]`` of the clients of ``test`` from uniform numbers
    ``u [P, B]`` (uniform with replacement per client)."""
    counts = test.counts.cpu()
    local = torch.minimum((u.cpu() * counts.double()[:, None]).long(), (counts - 1)[:, None])
    return (test.offsets.cpu()[:, None] + local).to(test.x.device)
