"""PPFE boosting on a flat federation: per-sample stage outputs, weighted mini-batches,
stage coefficients and sample reweighting (eq. 7), and the final ensemble (eq. 8).

The math lives in :mod:`pfl_theory.ppfe_boosting` (padded ``[N, n_max]`` layout); this
module converts between it and the federation's flat layout (one entry per training sample,
aligned with ``fed.train.x``).  docs/formulas.md §C.3 (RECONSTRUCTED).  Choices:

* **Weighted ERM by weighted sampling**: the stage-t objective Σ_j π_{i,j} ℓ_{i,j} (eq. 2/6)
  is optimised by drawing each client's mini-batches i.i.d. from π_i (with replacement) and
  taking the plain batch mean — an unbiased estimate of the weighted loss and its gradient
  (the engine's model gradient is a batch mean; weighting the loss would need per-sample
  gradients).
* **Coefficients** from the 0-1 weighted error ε_i = Σ_j π_{i,j} 1[miss] (SAMME by default);
  a negative coefficient (a stage worse than chance) is clipped to 0, as SAMME discards such
  learners.  The reweighting score is the 0-1 miss (default) or the per-sample cross-entropy.
* **Ensemble output**: ``probs`` (default) H_i(x) = Σ_t α_{t,i} softmax(h_{t,i}(x)) — bounded
  stage outputs as Lemma 6 assumes; ``votes`` = SAMME's Σ_t α_{t,i} onehot(argmax h_{t,i}(x));
  ``logits`` = Σ_t α_{t,i} h_{t,i}(x).  Prediction ``argmax_c H_i(x)_c``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from algorithms.engine.evaluation import summarize
from pfl_theory.ppfe_boosting import ensemble_coefficients, reweight, uniform_weights, weighted_error

Params = dict[str, torch.Tensor]
ENSEMBLES = ("probs", "votes", "logits")


def padded_index(split) -> tuple[torch.Tensor, torch.Tensor]:
    """``(index [N, n_max], mask [N, n_max])`` into the flat arrays (padding repeats the
    client's last sample and is masked out)."""
    n_max = int(split.counts.max())
    pos = torch.arange(n_max, device=split.counts.device)
    mask = pos[None, :] < split.counts[:, None]
    idx = split.offsets[:, None] + torch.minimum(pos[None, :], (split.counts - 1)[:, None])
    return idx, mask


def to_padded(flat: torch.Tensor, split) -> tuple[torch.Tensor, torch.Tensor]:
    idx, mask = padded_index(split)
    return torch.where(mask, flat[idx], torch.zeros((), dtype=flat.dtype, device=flat.device)), mask


def to_flat(padded: torch.Tensor, split) -> torch.Tensor:
    idx, mask = padded_index(split)
    out = torch.zeros(split.y.shape[0], dtype=padded.dtype, device=padded.device)
    out[idx[mask]] = padded[mask]
    return out


def uniform_flat(split, dtype=torch.float64) -> torch.Tensor:
    """π^{(0)} = 1/n_i per sample, flat ``[M]``."""
    _, mask = padded_index(split)
    return to_flat(uniform_weights(mask, dtype=dtype), split)


def client_of(split) -> torch.Tensor:
    """Client index of every flat sample ``[M]``."""
    return torch.repeat_interleave(torch.arange(split.num_clients, device=split.counts.device),
                                   split.counts)


@torch.no_grad()
def per_sample_logits(model, params: Params, split, *, chunk: int = 512) -> torch.Tensor:
    """Logits ``[M, C]`` of client i's model ``params[i]`` on each of its samples."""
    out = None
    largest = int(split.counts.max())
    for start in range(0, largest, chunk):
        clients = torch.nonzero(split.counts > start).flatten()
        counts, offsets = split.counts[clients], split.offsets[clients]
        pos = torch.arange(start, min(start + chunk, largest), device=counts.device)
        mask = pos[None, :] < counts[:, None]
        idx = offsets[:, None] + torch.minimum(pos[None, :], (counts - 1)[:, None])
        logits = model.forward({k: v[clients] for k, v in params.items()}, split.x[idx])
        if out is None:
            out = torch.empty(split.y.shape[0], logits.shape[-1], dtype=logits.dtype,
                              device=logits.device)
        out[idx[mask]] = logits[mask]
    return out


def weighted_batches(split, weights: torch.Tensor, steps: int, batch_size: int,
                     generator: torch.Generator) -> torch.Tensor:
    """Train indices ``[steps, N, B]`` drawn i.i.d. from each client's π_i (with replacement),
    on the CPU from ``generator``, then moved to the split's device."""
    padded, _ = to_padded(weights.detach().to(torch.float64), split)
    local = torch.multinomial(padded.cpu(), steps * batch_size, replacement=True,
                              generator=generator)                   # [N, steps·B]
    n = split.num_clients
    local = local.view(n, steps, batch_size).permute(1, 0, 2)
    return (split.offsets.cpu()[None, :, None] + local).to(split.x.device)


def stage_statistics(model, params: Params, split, weights: torch.Tensor, *, num_classes: int,
                     rule: str, score: str) -> dict[str, torch.Tensor]:
    """For a stage model: per-sample ``miss`` and ``score`` (flat), weighted 0-1 error ``eps``
    ``[N]`` under ``weights`` and the coefficient ``alpha`` ``[N]`` (clipped at 0;
    ``rule="uniform"`` gives α = 1)."""
    logits = per_sample_logits(model, params, split)
    miss = (logits.argmax(-1) != split.y).to(torch.float64)
    s = miss if score == "miss" else F.cross_entropy(logits, split.y, reduction="none").double()
    pw, mask = to_padded(weights.to(torch.float64), split)
    pw = pw / pw.sum(-1, keepdim=True)     # exact normalisation (π may be stored in float32)
    # Σ_j π_j·miss_j of normalised weights can exceed 1 by rounding (1 + 9e-16 seen with
    # every sample missed); the error is a probability, so clip the rounding away
    eps = weighted_error(pw, to_padded(miss, split)[0], mask).clamp(0.0, 1.0)
    if rule == "uniform":
        alpha = torch.ones_like(eps)
    else:
        alpha = ensemble_coefficients(eps, num_classes=num_classes, rule=rule).clamp(min=0)
    return {"miss": miss, "score": s, "eps": eps, "alpha": alpha}


def next_weights(split, weights: torch.Tensor, score: torch.Tensor,
                 beta: float | torch.Tensor) -> torch.Tensor:
    """Eq. (7): π'_{i,j} ∝ π_{i,j} exp(β s_{i,j}), normalised per client; flat in, flat out."""
    pw, mask = to_padded(weights.to(torch.float64), split)
    ps, _ = to_padded(score.to(torch.float64), split)
    return to_flat(reweight(pw, ps, beta=beta, mask=mask), split)


def ensemble_scores(logits: list[torch.Tensor], alphas: torch.Tensor, clients: torch.Tensor,
                    kind: str) -> torch.Tensor:
    """Eq. (8) per sample: Σ_t α_{t,i(j)} h_t(x_j) with h = probs | onehot votes | logits."""
    if kind not in ENSEMBLES:
        raise ValueError(f"ensemble must be one of {ENSEMBLES}, got {kind!r}")
    # a client whose stages all got α = 0 (all worse than chance) falls back to equal weights
    alphas = torch.where(alphas.sum(0, keepdim=True) > 0, alphas, torch.ones_like(alphas))
    total = None
    for t, z in enumerate(logits):
        if kind == "probs":
            h = torch.softmax(z.double(), -1)
        elif kind == "votes":
            h = F.one_hot(z.argmax(-1), z.shape[-1]).double()
        else:
            h = z.double()
        term = alphas[t].double()[clients][:, None] * h
        total = term if total is None else total + term
    return total


def ensemble_accuracy(model, stage_params: list[Params], alphas: torch.Tensor, split, *,
                      kind: str = "probs") -> tuple[torch.Tensor, dict[str, float]]:
    """Per-client accuracy ``[N]`` of the ensemble of ``stage_params`` with coefficients
    ``alphas [T, N]`` on ``split``, and its summaries (mean, weighted, low5, top5, and
    ``loss`` = sample-weighted cross-entropy of the α-mixture of the stages' softmax outputs,
    whatever ``kind``)."""
    logits = [per_sample_logits(model, p, split) for p in stage_params]
    clients = client_of(split)
    pred = ensemble_scores(logits, alphas, clients, kind).argmax(-1)
    correct = torch.zeros(split.num_clients, dtype=torch.float64, device=split.y.device)
    correct.index_add_(0, clients, (pred == split.y).double())
    acc = correct / split.counts.double()
    mix = ensemble_scores(logits, alphas, clients, "probs")
    mix = mix / mix.sum(-1, keepdim=True)
    nll = -torch.log(mix.gather(1, split.y[:, None]).clamp_min(1e-300))
    return acc, {**summarize(acc, split.counts), "loss": float(nll.mean())}
