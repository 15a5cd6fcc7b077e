"""FedFomo — M. Zhang, K. Sapra, S. Fidler, S. Yeung, J. M. Alvarez, *Personalized Federated
Learning with First Order Model Optimization*, ICLR 2021 (arXiv 2012.08565).

Each client holds out a validation part of its training rows (the last ``⌈f n_i⌉`` rows,
``val_fraction`` f; SGD draws from the others).  Round ``t`` (``S`` clients sampled
uniformly, all batched):

1. the server sends the participants the latest model of every client (``bank``);
2. participant i weighs each other client's model θ_n by its first-order gain on its own
   validation data (eq. 6–7)

       w_n = max(0, (L_i(θ_i) − L_i(θ_n)) / ‖θ_n − θ_i‖),   w_n ← w_n / Σ_m w_m (if Σ > 0),
       θ_i ← θ_i + Σ_n w_n (θ_n − θ_i)

   — the validation losses of all (participant, model) pairs in batched forward passes
   over blocks of models, the distances in one ``cdist`` — then runs ``R`` SGD steps (lr η,
   one mini-batch each) from there; it keeps and uploads θ_i, which the server stores.

Evaluated: ``personalized`` = each client's θ_i (never-sampled clients keep θ^0).

Departures: every participant receives all ``N`` models (the paper's M = N − 1) instead of
the ε-greedy selection of ``M`` models by the affinity matrix (so no affinity is kept); the
validation rows are a fixed tail of each client's data (the paper: a held-out split);
local steps instead of epochs.  A client with fewer than 2 rows keeps all for training
and has no validation row (weights 0).  Reduction (tested): in the first round all models
are equal, no weight is positive and FedFomo is local SGD on the training part, bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from algorithms.engine.base import (State, batch_size_hp, broadcast, check_clients_per_round,
                             clients_per_round_hp, flatten, hp, local_lr_hp, local_rounds_hp,
                             register, sample_clients, unflatten, validate_hyperparameters)
from algorithms.engine.contract import Algorithm, Phase, with_server
from algorithms.engine.features import client_rows
from algorithms.engine.steps import local_sgd

#: floats of (participant × candidate model) parameter copies evaluated at once
PAIR_BLOCK_FLOATS = 1 << 22


def _fraction(name, value):
    if not 0.0 < float(value) < 1.0:
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {value}")
    return value


def split_sizes(counts: torch.Tensor, fraction: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``(fit, val)`` rows per client: ``val = ⌈f n⌉`` (0 when n < 2, at most n − 1)."""
    val = torch.ceil(counts.to(torch.float64) * fraction).long().clamp(max=counts - 1)
    val = torch.where(counts < 2, torch.zeros_like(val), val.clamp(min=0))
    return counts - val, val


def first_order_weights(own_loss, losses, dist, self_mask) -> torch.Tensor:
    """Eq. 6–7: ``max(0, (L(θ_i) − L(θ_n)) / ‖θ_n − θ_i‖)`` ``[P, N]`` (0 for the client
    itself and for models at distance 0), normalised per row when the sum is positive."""
    gain = (own_loss[:, None] - losses).clamp(min=0)
    w = torch.where((dist > 0) & ~self_mask, gain / dist.clamp(min=torch.finfo(dist.dtype).tiny),
                    torch.zeros_like(gain))
    total = w.sum(1, keepdim=True)
    return torch.where(total > 0, w / total.clamp(min=torch.finfo(w.dtype).tiny), w)


@register("fedfomo")
@dataclass(frozen=True)
class FedFomo(Algorithm):
    """FedFomo (Zhang, Sapra, Fidler, Yeung, Alvarez, ICLR 2021, arXiv 2012.08565),
    Algorithm 1 with M = N − 1: η = ``lr``, R = ``local_rounds``, |D| = ``batch_size``, S =
    ``clients_per_round``, validation share f = ``val_fraction`` (PFLlib: 0.2)."""

    client_models = ("personalized",)

    lr: float = local_lr_hp()
    local_rounds: int = local_rounds_hp()
    batch_size: int = batch_size_hp()
    clients_per_round: int = clients_per_round_hp()
    val_fraction: float = hp(0.2, "share of each client's rows held out for the weights",
                             check=_fraction, symbol="f")

    def __post_init__(self):
        validate_hyperparameters(self)

    def init(self, fed, model, seed: int) -> State:
        check_clients_per_round(self.clients_per_round, fed)
        w = broadcast(model.init(1, seed=seed, device=fed.device, dtype=fed.dtype),
                      fed.num_clients)
        return State(0, seed, {"bank": w, "personalized": {k: v.clone() for k, v in w.items()}})

    def first_phase(self, state: State, fed, model) -> Phase:
        """Mini-batches over each client's training part (uniform with replacement, stream 0:
        every client's ``[R, |D|]`` uniforms, then the sampled clients), the validation rows
        (padded, counts in the payload)."""
        gen = state.generator()
        n = fed.num_clients
        u = torch.rand((self.local_rounds, n, self.batch_size), generator=gen,
                       dtype=torch.float64)
        chosen = sample_clients(n, self.clients_per_round, gen)
        counts, offsets = fed.train.counts.cpu(), fed.train.offsets.cpu()
        fit, val = split_sizes(counts, self.val_fraction)
        c = chosen
        sgd = offsets[c][None, :, None] + torch.minimum(
            (u[:, c] * fit[c][None, :, None]).long(), (fit[c] - 1)[None, :, None])
        m = max(int(val[c].max()) if c.numel() else 1, 1)
        pos = torch.minimum(torch.arange(m)[None, :], (val[c] - 1).clamp(min=0)[:, None])
        rows = (offsets[c] + fit[c])[:, None] + pos
        rows = torch.minimum(rows, (offsets[c] + counts[c] - 1)[:, None])
        dev = fed.device
        return Phase("train", chosen, {"sgd": sgd.to(dev), "rows": rows[None].to(dev)},
                     {"rows": val[c].to(dev)})

    def validation_losses(self, model, bank, x, y, mask) -> torch.Tensor:
        """``L[p, n]``: mean cross-entropy of model n on participant p's validation rows."""
        p, n = x.shape[0], next(iter(bank.values())).shape[0]
        size = max(1, sum(v[0].numel() for v in bank.values()))
        block = max(1, PAIR_BLOCK_FLOATS // (size * p))
        cnt = mask.sum(1).clamp(min=1).to(x.dtype)
        out = []
        for s in range(0, n, block):
            j = min(n, s + block) - s
            params = {k: v[s:s + j].unsqueeze(0).expand(p, *v[s:s + j].shape)
                      .reshape(p * j, *v.shape[1:]) for k, v in bank.items()}
            xr = x.unsqueeze(1).expand(p, j, *x.shape[1:]).reshape(p * j, *x.shape[1:])
            yr = y.unsqueeze(1).expand(p, j, y.shape[1]).reshape(p * j, y.shape[1])
            logits = model.forward(params, xr)
            ce = torch.nn.functional.cross_entropy(logits.transpose(1, 2), yr, reduction="none")
            ce = ce.view(p, j, -1) * mask[:, None, :]
            out.append(ce.sum(-1) / cnt[:, None])
        return torch.cat(out, 1)

    def client_update(self, phase, model, view):
        """Eq. 6–7 on the validation rows, then R SGD steps on the training part."""
        x, y = view.batches["sgd"]
        own, bank = view.models["personalized"], view.server["bank"]
        xv, yv, mask = client_rows(view)
        losses = self.validation_losses(model, bank, xv, yv, mask)            # [P, N]
        ce = torch.nn.functional.cross_entropy(model.forward(own, xv).transpose(1, 2), yv,
                                               reduction="none")
        own_loss = (ce * mask).sum(1) / mask.sum(1).clamp(min=1).to(ce.dtype)
        flat, mine = flatten(bank), flatten(own)
        dist = torch.cdist(mine, flat, compute_mode="donot_use_mm_for_euclid_dist")
        self_mask = torch.zeros_like(dist, dtype=torch.bool)
        self_mask[torch.arange(dist.shape[0]), view.clients.to(dist.device)] = True
        w = first_order_weights(own_loss, losses, dist, self_mask)
        # θ_i + Σ_n w_n (θ_n − θ_i) = θ_i + (w θ − (Σ_n w_n) θ_i); exactly θ_i when w = 0
        # w θ one row at a time (vector × matrix): a row's value must not depend on how many
        # participants are computed together (client chunks, algorithms.engine.contract)
        mixed = torch.stack([w[i] @ flat for i in range(w.shape[0])]) if w.shape[0] else w @ flat
        start = unflatten(mine + (mixed - w.sum(1, keepdim=True) * mine), own)
        theta = local_sgd(model, start, x, y, self.lr)
        return {"personalized": theta}, {"model": theta}

    def server_aggregate(self, phase, state, uploads, fed, model):
        up = phase.upload_clients().to(fed.device)
        bank = {k: v.index_copy(0, up, uploads["model"][k])
                for k, v in state.models["bank"].items()}
        return with_server(state, {"bank": bank}), None

    def evaluated(self, state: State) -> dict:
        return {"personalized": state.models["personalized"]}
