"""Per-client evaluation and the summaries every report uses.

Per-client accuracy and loss are computed over each client's *whole* split, batched over
all clients in padded chunks (:meth:`synthetic.federation.Split.chunks`) and reduced per
client.  Summaries of a per-client accuracy vector ``a[N]`` (with sample counts ``n[N]``):

* ``mean`` — ``(1/N) Σ a_i`` (each client counts once);
* ``weighted`` — ``Σ n_i a_i / Σ n_i`` (= total correct / total samples, what the pFedMe
  and CGPFL code report as "accuracy");
* ``low5`` — mean accuracy of the worst ``ceil(0.05 N)`` clients (PLGU's "lowest 5%");
* ``top5`` — mean accuracy of the best ``ceil(0.05 N)`` clients.

Always ``low5 ≤ mean ≤ top5``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from algorithms.base import Params


@torch.no_grad()
def evaluate(model, params: Params, split, *, chunk: int = 512) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-client ``(accuracy [N], mean loss [N])`` of ``params`` (``[N, ...]`` or
    ``[1, ...]`` broadcast to every client) on ``split``."""
    n = split.num_clients
    p = {k: v.expand(n, *v.shape[1:]) for k, v in params.items()} if \
        next(iter(params.values())).shape[0] == 1 else params
    correct = torch.zeros(n, dtype=torch.float64, device=split.x.device)
    loss = torch.zeros_like(correct)
    for clients, x, y, mask in split.chunks(chunk):
        logits = model.forward({k: v[clients] for k, v in p.items()}, x)
        nb, b, c = logits.shape
        ce = F.cross_entropy(logits.reshape(nb * b, c), y.reshape(-1), reduction="none").view(nb, b)
        m = mask.to(torch.float64)
        correct.index_add_(0, clients, ((logits.argmax(-1) == y).to(torch.float64) * m).sum(1))
        loss.index_add_(0, clients, (ce.to(torch.float64) * m).sum(1))
    counts = split.counts.to(torch.float64)
    return correct / counts, loss / counts


def tail_size(n: int, fraction: float = 0.05) -> int:
    """Number of clients in a ``fraction`` tail: ``ceil(fraction · n)`` (at least 1)."""
    return max(1, math.ceil(fraction * n))


def summarize(acc: torch.Tensor, counts: torch.Tensor) -> dict[str, float]:
    """``mean``, ``weighted``, ``low5``, ``top5`` of a per-client vector (see module doc)."""
    a = acc.detach().to(torch.float64).cpu()
    c = counts.detach().to(torch.float64).cpu()
    k = tail_size(a.numel())
    s = torch.sort(a).values
    return {"mean": float(a.mean()), "weighted": float((a * c).sum() / c.sum()),
            "low5": float(s[:k].mean()), "top5": float(s[-k:].mean())}
