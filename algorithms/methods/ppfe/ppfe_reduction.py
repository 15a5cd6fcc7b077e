"""PPFE bookkeeping: the stage schedule and the complexity reduction of personalized layers.

Emrani, Najafi, Motahari — *Federated Ensemble Learning with Progressive Model
Personalization* (PPFE, arXiv 2602.14244), §4.3, §6.2.5, App. A.1/A.4; docs/formulas.md §C.2,
§C.4, §C.5.4 (all RECONSTRUCTED).  Reconstruction choices made here (each selectable):

* **Round budget** (§C.4): stage t gets ``f_t / Σ_s f_s`` of ``total_rounds`` (default
  fractions 30/50/40/40 — the images setting, of 160 rounds), rounded by largest remainder so
  the stages sum exactly to the budget, each stage at least one round.
* **Which layers are personal** — progressive (paper): stage t personalizes the last t layers
  (stage 0 = FedAvg, no personal layers); a model with L layers supports at most L + 1
  stages (stage L is fully personal), extra stages are dropped.  ``fixed_head = k`` (ablations
  M1/M2/M3): every stage personalizes the last k layers.
* **Complexity reduction Ψ_t** of the personalized layers at stage t, with factor
  ``γ^t`` (γ = ``shrink``; stage 0 is never reduced), applied as a projection after every
  local step on the head (projected SGD), so every stage-t head lies in Ψ_t:
    - ``"svd"`` — each personalized weight matrix is kept at rank ≤ r_t =
      ``⌈min(d_in, d_out) γ^t⌉`` (or the explicit ``ranks`` list, one entry per stage ≥ 1),
      by truncated SVD (Eckart–Young projection, :func:`pfl_theory.ppfe_lowrank.truncated_svd`);
      effective parameters ``r_t (d_in + d_out)`` + bias;
    - ``"width"`` — width shrinkage w_t = w γ^t (Corollary 2): every personalized layer reads
      only the first ``⌈d_in γ^t⌉`` of its input units (a narrower head; the raw-input layer
      is exempt, so features are never dropped);
    - ``"mask"`` — structured sparsity with constant fan-in: each output unit of a
      personalized layer keeps ``⌈d_in γ^t⌉`` incoming connections, the first ones of a
      per-(layer, unit) random permutation drawn from ``mask_seed`` — identical on every
      client ("masks shared across clients via a fixed seed") and nested across stages
      (a fixed fraction masked at the first personalized stage, more at each later stage);
    - ``"none"`` — no reduction (the "w/o MR" ablation).
  Convolution weights ``[C_out, C_in, k, k]`` are treated as ``C_in k k × C_out`` matrices
  (input units = input channels).
"""

from __future__ import annotations

import math
from typing import Callable

import torch

from pfl_theory.ppfe_lowrank import truncated_svd
from pfl_theory.validation import positive_int

REDUCTIONS = ("svd", "width", "mask", "none")
Params = dict[str, torch.Tensor]


def parse_floats(name: str, text: str) -> list[float]:
    try:
        values = [float(v) for v in str(text).split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"{name} must be comma-separated numbers, got {text!r}") from None
    if any(not math.isfinite(v) or v <= 0 for v in values):
        raise ValueError(f"{name} entries must be positive, got {text!r}")
    return values


def stage_rounds(total_rounds: int, fractions: list[float], stages: int) -> list[int]:
    """Rounds per stage: ``total_rounds`` split ∝ the first ``stages`` fractions (largest
    remainder, each ≥ 1, sum exactly ``total_rounds``)."""
    total, t = positive_int("total_rounds", total_rounds), positive_int("stages", stages)
    if len(fractions) < t:
        raise ValueError(f"need {t} stage fractions, got {len(fractions)}: {fractions}")
    if total < t:
        raise ValueError(f"total_rounds={total} < number of stages {t}")
    f = fractions[:t]
    if not math.isfinite(sum(f)) or not math.isfinite((total - t) * max(f)):
        f = [v / max(f) for v in f]     # relative sizes: 1e308,1e308 is 1,1 (no overflow)
    exact = [(total - t) * v / sum(f) for v in f]     # one round per stage reserved
    rounds = [1 + math.floor(e) for e in exact]
    order = sorted(range(t), key=lambda s: (-(exact[s] - math.floor(exact[s])), s))
    for s in order[:total - sum(rounds)]:
        rounds[s] += 1
    return rounds


def personal_layer_count(stage: int, *, fixed_head: int, num_layers: int) -> int:
    """Layers personalized at ``stage``: ``fixed_head`` if > 0, else ``stage`` (progressive)."""
    return min(fixed_head if fixed_head > 0 else stage, num_layers)


def _matrix(w: torch.Tensor) -> torch.Tensor:
    """Per-client ``[N, d_in, d_out]`` view of a dense ``[N, d_in, d_out]`` or conv
    ``[N, C_out, C_in, k, k]`` weight."""
    return w if w.ndim == 3 else w.flatten(2).transpose(1, 2)


def _unmatrix(m: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return m if like.ndim == 3 else m.transpose(1, 2).reshape(like.shape)


def _input_units(w: torch.Tensor) -> int:
    return w.shape[1] if w.ndim == 3 else w.shape[2]


def _unit_mask(w: torch.Tensor, keep: int) -> torch.Tensor:
    """0/1 mask shaped like one client's weight (``w`` is ``[N, ...]``) keeping the first
    ``keep`` input units."""
    units = (torch.arange(_input_units(w), device=w.device) < keep).to(w.dtype)
    shaped = units[:, None] if w.ndim == 3 else units[None, :, None, None]
    return shaped.expand(w.shape[1:]).contiguous()


def _fanin_mask(w: torch.Tensor, keep: int, gen: torch.Generator) -> torch.Tensor:
    """Constant fan-in mask: each output unit keeps ``keep`` random inputs (per-unit permutation)."""
    m = _matrix(w[:1])[0]
    d_in, d_out = m.shape
    ranks = torch.argsort(torch.rand(d_out, d_in, generator=gen, dtype=torch.float64), dim=1)
    mask = (ranks < keep).to(w.dtype).T.to(w.device)   # [d_in, d_out]
    return _unmatrix(mask[None], w[:1])[0]


class Reduction:
    """The stage-t constraint set Ψ_t for a model's personalized weights (see module doc).

    ``project(params)`` maps a head dict (``[N, ...]``) into Ψ_t (keys it does not reduce —
    biases, stage 0, ``"none"`` — pass unchanged); ``effective_params(head)`` is the
    per-client parameter count of a head in Ψ_t."""

    def __init__(self, model, head_keys, stage: int, *, method: str, shrink: float,
                 ranks: list[float], mask_seed: int, like: Params):
        if method not in REDUCTIONS:
            raise ValueError(f"reduction must be one of {REDUCTIONS}, got {method!r}")
        self.method, self.factor = method, shrink ** stage
        self.active = method != "none" and stage > 0 and (self.factor < 1 or bool(ranks))
        first_layer = set(model.layers[0])
        self.rank: dict[str, int] = {}
        self.mask: dict[str, torch.Tensor] = {}
        for key in head_keys:
            w = like[key]
            if not self.active or not key.endswith("weight") or w.ndim not in (3, 5):
                continue
            d_in, d_out = _matrix(w[:1]).shape[1:]
            keep = max(1, math.ceil(d_in * self.factor))
            if method == "svd":
                r = int(ranks[stage - 1]) if ranks and stage - 1 < len(ranks) else \
                    max(1, math.ceil(min(d_in, d_out) * self.factor))
                if r < min(d_in, d_out):
                    self.rank[key] = r
            elif method == "width" and key not in first_layer:
                self.mask[key] = _unit_mask(w, max(1, math.ceil(_input_units(w) * self.factor)))
            elif method == "mask":
                layer = next(i for i, names in enumerate(model.layers) if key in names)
                gen = torch.Generator().manual_seed(int(mask_seed) * 1009 + layer)
                self.mask[key] = _fanin_mask(w, keep, gen)

    def project(self, params: Params) -> Params:
        out = dict(params)
        for key, r in self.rank.items():
            if key in out:
                w = out[key]
                out[key] = _unmatrix(truncated_svd(_matrix(w), r)[0], w)
        for key, m in self.mask.items():
            if key in out:
                out[key] = out[key] * m
        return out

    def projector(self) -> Callable[[Params], Params] | None:
        return self.project if (self.rank or self.mask) else None

    def effective_params(self, head: Params) -> int:
        """Per-client parameters of a head in Ψ_t: r (d_in + d_out) for rank-r matrices,
        unmasked entries for masked ones, full size otherwise."""
        total = 0
        for key, v in head.items():
            if key in self.rank:
                d_in, d_out = _matrix(v[:1]).shape[1:]
                total += self.rank[key] * (d_in + d_out)
            elif key in self.mask:
                total += int(self.mask[key].count_nonzero())
            else:
                total += v[0].numel()
        return total
