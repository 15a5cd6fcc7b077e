"""Per-client evaluation and the summaries every report uses.

Per-client accuracy and mean cross-entropy are computed over each client's *whole* split.
:func:`evaluate_models` evaluates several models in **one pass** over the flat data:

* every client's samples are cut into blocks of ``block`` rows
  (:meth:`synthetic.federation.Split.blocks`; only each client's last block is padded);
* the blocked copy of the split's features and labels does not depend on the models, so
  it is gathered once and kept with the split (:func:`blocked_layout`) when it fits
  ``CACHE_BYTES`` (64 MB; Synthetic(0.5, 0.5) at N = 100: 41 MB train, 14 MB test):
  later evaluations — every round — read it in place; above that, each group of blocks is
  gathered when it is used;
* a group of blocks is shared by all models; per-client models are applied with one
  batched matrix product per group, shared (``[1, ...]``) models with one plain matrix
  product;
* when **every** model is shared (FedAvg's global model, the global models of most
  baselines), there are no per-client parameters to pair with rows, so no blocks at all:
  :func:`_evaluate_shared` runs one plain product per chunk of the flat rows (read in
  place when the split is stored in client order) and adds each row's loss and
  correctness to its client (``index_add``, float64);
* for :class:`~algorithms.engine.models.MLR`, models with the same leading dimension are fused
  into one wider weight matrix, so their logits come from a single product;
* per-row loss and correctness are summed per block, then added to their client.

No Python loop runs over clients; models given twice (the same tensors) are evaluated
once.  A parameter dict that has a ``logits(model, rows, x)`` method (a ``dict`` subclass,
e.g. :class:`algorithms.methods.averaging.knnper.KNNPredictor`) computes its own logits from its rows of the
blocks' clients (the MLR fusion is then skipped).  Summaries of a per-client accuracy vector ``a[N]`` (with sample counts ``n[N]``):

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

from algorithms.engine.base import Params
from algorithms.engine.evaluated_check import EvaluatedModels, check_evaluated
from algorithms.engine.models import MLR

#: bytes of features per group of blocks on the CPU (the group's logits then stay in the
#: core's cache between the steps of :func:`_row_metrics`); on CUDA ``GPU_GROUP_BYTES``
GROUP_BYTES = 2 << 20
#: at most this many bytes of one layer's activations per group of blocks (a group is one
#: block when a single block exceeds it)
ACTIVATION_BYTES = 256 << 20
GPU_GROUP_BYTES = 64 << 20
#: largest blocked copy of a split (features + labels) kept between evaluations; 0: never
CACHE_BYTES = 64 << 20


def _key(params: Params) -> tuple:
    return tuple((k, v.data_ptr(), tuple(v.shape), tuple(v.stride())) for k, v in params.items())


def _version(t: torch.Tensor) -> tuple:
    return (t.data_ptr(), t._version, tuple(t.shape), t.dtype, t.device)


def blocked_layout(split, block: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``(x [nb, block, ...], y [nb, block])``: the split's samples in the layout of
    ``split.blocks(block)`` (one copy), kept with the split for the next call when it takes
    at most ``CACHE_BYTES``; ``None`` (nothing copied) above that.

    The copy is remembered on the split itself (freed with it) under a key of the block
    size and each tensor's storage address, shape, dtype, device and in-place version
    counter (``Tensor._version``), so writing into ``split.x`` or ``split.y`` — or any other
    block size — makes a fresh copy rather than reading a stale one."""
    _, index, _ = split.blocks(block)
    row = split.x[0].numel() * split.x.element_size() + split.y.element_size()
    if index.numel() * row > CACHE_BYTES:
        return None
    key = (block, _version(split.x), _version(split.y))
    cached = split.__dict__.get("_eval_layout")
    if cached is not None and cached[0] == key:
        return cached[1]
    split.__dict__.pop("_eval_layout", None)          # free the stale copy first
    flat = index.flatten()
    layout = (split.x.index_select(0, flat).view(*index.shape, *split.x.shape[1:]),
              split.y.index_select(0, flat).view(index.shape))
    object.__setattr__(split, "_eval_layout", (key, layout))   # frozen dataclass: cache only
    return layout


def _row_metrics(logits: torch.Tensor, y: torch.Tensor, rank: torch.Tensor | None
                 ) -> tuple[torch.Tensor | None, torch.Tensor]:
    """Class-major ``logits[G, K, C, c]`` (K models, C classes, c rows), labels
    ``y[G, 1, 1, c]`` (int64), ``rank = C − j`` ``[C, 1]`` (logits' dtype) → per-row
    ``(correct, cross-entropy)`` ``[G, K, 1, c]``; ``logits`` is overwritten.
    ``rank=None``: the loss only (``correct`` is ``None``; three passes fewer).

    The loss is ``−log_softmax[y]``; the prediction is the *first* class at the maximum
    (``torch.argmax``'s tie rule: an all-equal row predicts class 0), found exactly as
    the largest ``C·sign(logit − max) + (C − j)``.  Every step reduces over the class
    axis with the rows contiguous, which vectorises (over a last axis of length C it does
    not: ``log_softmax`` there is ~20× slower; ``argmax`` / ``max(dim)`` over the class
    axis are ~10× slower than these five passes)."""
    g, k, c, rows = logits.shape
    ce = torch.log_softmax(logits, 2).gather(2, y.expand(g, k, 1, rows)).neg_()
    if rank is None:
        return None, ce
    top = logits.amax(2, keepdim=True)
    # (C − j) where logit = max, ≤ 0 elsewhere: sign(logit − max)·C + (C − j)
    first = torch.add(rank, logits.sub_(top).sign_(), alpha=c).amax(2, keepdim=True)
    return first == (c - y).to(first.dtype), ce


def block_size(counts: torch.Tensor, row_floats: int, param_floats: int) -> int:
    """The block length (8 … 256) moving the fewest floats: padded rows (features +
    logits) plus one copy of the per-client parameters per block."""
    c = counts.detach().cpu().to(torch.float64)

    def cost(b: int) -> float:
        blocks = float(torch.ceil(c / b).sum())
        return blocks * (b * row_floats + param_floats)
    return min((8, 16, 32, 64, 128, 256), key=cost)


class _Stacked:
    """The K models' parameters arranged for one product per group of blocks.

    MLR: ``(W_1 | … | W_K)ᵀ`` ``[·, K·C, d]`` and biases ``[·, K·C, 1]`` — for all
    clients at once when that is small (≤ 64 MB), else gathered per group; other models:
    each model's parameters, gathered per group."""

    def __init__(self, model, plan: list[Params], n: int):
        self.model, self.plan, self.k = model, plan, len(plan)
        self.mlr = isinstance(model, MLR) and not any(hasattr(p, "logits") for p in plan)
        self.whole = None
        if self.mlr:
            w = plan[0]["fc.weight"]
            if n * w.shape[1] * w.shape[2] * self.k * w.element_size() <= 64 << 20:
                self.whole = self._mlr(lambda v: v.expand(n, *v.shape[1:]))

    def _mlr(self, rows):
        w = torch.cat([rows(p["fc.weight"]) for p in self.plan], -1).transpose(1, 2)
        b = torch.cat([rows(p["fc.bias"]) for p in self.plan], -1).unsqueeze(2)
        return w.contiguous(), b.contiguous()

    def logits(self, bc: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Logits ``[G, K, C, c]`` on the gathered rows ``x[G, c, ...]`` of blocks owned
        by clients ``bc[G]``."""
        g = bc.numel()

        def rows(v: torch.Tensor) -> torch.Tensor:
            return v.expand(g, *v.shape[1:]) if v.shape[0] == 1 else v.index_select(0, bc)
        if self.mlr:
            w, b = (self.whole[0].index_select(0, bc), self.whole[1].index_select(0, bc)) \
                if self.whole is not None else self._mlr(rows)
            out = torch.baddbmm(b, w, x.flatten(2).transpose(1, 2))
            return out.view(g, self.k, -1, x.shape[1])
        # a parameter dict with a ``logits(model, rows, x)`` method predicts by itself
        # (kNN-Per's interpolation of the model with a per-client datastore)
        outs = [p.logits(self.model, {k: rows(v) for k, v in p.items()}, x)
                if hasattr(p, "logits") else
                self.model.forward({k: rows(v) for k, v in p.items()}, x) for p in self.plan]
        return torch.stack(outs, 1).permute(0, 1, 3, 2)


@torch.no_grad()
def evaluate_models(model, models: dict[str, Params], split, *, block: int | None = None,
                    accuracy: bool = True
                    ) -> dict[str, tuple[torch.Tensor | None, torch.Tensor]]:
    """Per-client ``(accuracy [N], mean loss [N])`` of every model in ``models``
    (``{name: params}``, each ``[N, ...]`` or ``[1, ...]`` broadcast to every client) on
    ``split``, in one pass over the data (see module doc); ``block`` rows per block
    (default: :func:`block_size`); ``accuracy=False``: the loss only (accuracy ``None``)."""
    check_evaluated(model, models, split)   # one line naming the algorithm, not a traceback
    n = split.num_clients
    unique: dict[tuple, Params] = {}
    alias: dict[str, tuple] = {}
    for name, p in models.items():
        lead = next(iter(p.values())).shape[0]
        if lead not in (1, n):
            raise ValueError(f"model {name!r} has leading dimension {lead}; expected 1 or {n}")
        alias[name] = _key(p)
        unique.setdefault(alias[name], p)
    plan = list(unique.values())
    column = {k: j for j, k in enumerate(unique)}
    if block is None and all(next(iter(p.values())).shape[0] == 1 and not hasattr(p, "logits")
                             for p in plan):
        per = _evaluate_shared(model, plan, split, accuracy)
        return {name: (per[0, :, column[alias[name]]] if accuracy else None,
                       per[1, :, column[alias[name]]]) for name in models}
    if block is None:
        per_client = sum(v[0].numel() for p in plan for v in p.values() if v.shape[0] == n)
        block = block_size(split.counts, split.x[0].numel() + 10 * len(plan), per_client)
    stacked = _Stacked(model, plan, n)
    block_client, index, valid = split.blocks(block)
    layout = blocked_layout(split, block)
    row_bytes = max(1, split.x[0].numel() * split.x.element_size())
    budget = GPU_GROUP_BYTES if split.x.device.type == "cuda" else GROUP_BYTES
    per_group = max(1, budget // (block * row_bytes))
    # a wide layer's activations ([rows, width] per model) can dwarf the input rows:
    # --model dnn --hidden 100000 on 10 clients allocated 3.5 GB in one group
    width = max([1] + [max(v.shape[1:]) for p in plan for v in p.values() if v.dim() > 1])
    per_group = min(per_group, max(1, ACTIVATION_BYTES // (block * width * len(plan)
                                                           * split.x.element_size())))
    nb = block_client.numel()
    # per-block sums (≤ 256 rows, in the data's precision), added to their client at the end
    per_block = torch.zeros(2, nb, len(plan), dtype=split.x.dtype, device=split.x.device)
    rank = None
    for start in range(0, nb, per_group):
        stop = min(start + per_group, nb)
        if layout is not None:
            x, y = layout[0][start:stop], layout[1][start:stop]
        else:
            flat = index[start:stop].flatten()
            x = split.x.index_select(0, flat).view(stop - start, block, *split.x.shape[1:])
            y = split.y.index_select(0, flat).view(stop - start, block)
        logits = stacked.logits(block_client[start:stop], x)
        if rank is None and accuracy:
            c = logits.shape[2]
            rank = (c - torch.arange(c, device=x.device, dtype=logits.dtype))[:, None]
        ok, ce = _row_metrics(logits, y.view(stop - start, 1, 1, block), rank)
        mask = valid[start:stop][:, None, None, :]
        if accuracy:
            torch.sum(ok & mask, (2, 3), out=per_block[0, start:stop])
        torch.sum(ce.mul_(mask), (2, 3), out=per_block[1, start:stop])
    sums = torch.zeros(2, n, len(plan), dtype=torch.float64, device=split.x.device)
    sums.index_add_(1, block_client, per_block.to(torch.float64))
    per = sums / split.counts.to(torch.float64)[None, :, None]
    return {name: (per[0, :, column[alias[name]]] if accuracy else None,
                   per[1, :, column[alias[name]]]) for name in models}


def row_owners(split) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(owner [R], rows [R] or None)``: the client of each of the split's samples taken in
    client order, and their positions in ``split.x`` (``None`` when the split is stored in
    client order with no gaps, so chunks are read in place).  Remembered on the split."""
    key = (_version(split.offsets), _version(split.counts), split.x.shape[0])
    cached = split.__dict__.get("_row_owners")
    if cached is not None and cached[0] == key:
        return cached[1]
    dev = split.counts.device
    owner = torch.repeat_interleave(torch.arange(split.num_clients, device=dev), split.counts)
    first = torch.cumsum(split.counts, 0) - split.counts
    rows = split.offsets[owner] + torch.arange(owner.numel(), device=dev) - first[owner]
    in_place = rows.numel() == split.x.shape[0] and bool(
        torch.equal(rows, torch.arange(rows.numel(), device=dev)))
    value = (owner, None if in_place else rows)
    object.__setattr__(split, "_row_owners", (key, value))   # frozen dataclass: cache only
    return value


def _evaluate_shared(model, plan: list[Params], split, accuracy: bool) -> torch.Tensor:
    """``[2, N, K]`` per-client (accuracy, mean loss) of K shared ``[1, ...]`` models: one
    plain product per chunk of flat rows (MLR: the K models fused into one ``[K·C, d]``
    matrix), per-row metrics by :func:`_row_metrics`, summed per client in float64."""
    n, k = split.num_clients, len(plan)
    owner, rows = row_owners(split)
    total = owner.numel()
    sums = torch.zeros(2, n, k, dtype=torch.float64, device=split.x.device)
    row_bytes = max(1, split.x[0].numel() * split.x.element_size())
    budget = GPU_GROUP_BYTES if split.x.device.type == "cuda" else GROUP_BYTES
    chunk = max(256, budget // row_bytes)
    if isinstance(model, MLR):
        w = torch.cat([p["fc.weight"][0] for p in plan], 1).t().contiguous()   # [K·C, d]
        b = torch.cat([p["fc.bias"][0] for p in plan], 0)[:, None]           # [K·C, 1]
    rank = None
    for start in range(0, total, chunk):
        stop = min(start + chunk, total)
        if rows is None:
            x, y = split.x[start:stop], split.y[start:stop]
        else:
            x, y = split.x.index_select(0, rows[start:stop]), split.y.index_select(0, rows[start:stop])
        r = stop - start
        if isinstance(model, MLR):
            logits = torch.addmm(b, w, x.flatten(1).t()).view(1, k, -1, r)
        else:
            logits = torch.stack([model.forward(p, x[None])[0].t() for p in plan])[None]
        if rank is None and accuracy:
            c = logits.shape[2]
            rank = (c - torch.arange(c, device=x.device, dtype=logits.dtype))[:, None]
        ok, ce = _row_metrics(logits.contiguous(), y.view(1, 1, 1, r), rank)
        who = owner[start:stop]
        if accuracy:
            sums[0].index_add_(0, who, ok[0, :, 0, :].t().to(torch.float64))
        sums[1].index_add_(0, who, ce[0, :, 0, :].t().to(torch.float64))
    return sums / split.counts.to(torch.float64)[None, :, None]


def evaluated_models(algorithm, state) -> dict[str, Params]:
    """``algorithm.evaluated(state)`` checked: a non-empty ``{name: {parameter: tensor}}``
    with a tensor in each model (what :func:`evaluate_models` reads); anything else — a
    plugin returning a number, a list, a model without tensors — is a one-line
    ``ValueError`` naming the algorithm and what it returned."""
    models = algorithm.evaluated(state)
    who = f"{getattr(algorithm, 'name', type(algorithm).__name__)!r} " \
          f"({type(algorithm).__module__}.{type(algorithm).__qualname__})"
    if not isinstance(models, dict) or not models:
        raise ValueError(f"algorithm {who}: evaluated(state) returned "
                         f"{_describe(models)}, not a non-empty dict {{model name: "
                         "{parameter name: tensor}}")
    for name, params in models.items():
        if not isinstance(name, str) or not hasattr(params, "items") or not params or \
                not all(isinstance(v, torch.Tensor) and v.dim() >= 1 for v in params.values()):
            raise ValueError(f"algorithm {who}: evaluated(state)[{name!r}] is "
                             f"{_describe(params)}, not a dict {{parameter name: tensor "
                             "[N or 1, ...]}")
    return EvaluatedModels(models, who)


def _describe(value) -> str:
    text = " ".join(repr(value).split())
    return f"{type(value).__name__} {text[:60]}{'…' if len(text) > 60 else ''}"


def model_for(algorithm, model):
    """The model that evaluates ``algorithm.evaluated(state)``: ``model`` itself, or
    ``algorithm.evaluation_model(model)`` for an algorithm whose evaluated parameters are
    not ``model``'s (FedEM's mixture of components)."""
    wrap = getattr(algorithm, "evaluation_model", None)
    return model if wrap is None else wrap(model)


def evaluate(model, params: Params, split, *, block: int | None = None
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-client ``(accuracy [N], mean loss [N])`` of ``params`` (``[N, ...]`` or
    ``[1, ...]`` broadcast to every client) on ``split``."""
    return evaluate_models(model, {"model": params}, split, block=block)["model"]


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
