"""All clients' data on one device, stored flat with offsets/counts (no padding).

Client sizes are ragged (Synthetic(0.5, 0.5) has 250 … 25,810 samples per client), so the
train and test sets are each one flat tensor ``x[M, ...]`` / ``y[M]`` with per-client
``offsets[N]`` and ``counts[N]``:

* a mini-batch of size ``B`` for all ``N`` clients is one gather
  ``x[offsets[:, None] + floor(u * counts[:, None])]`` → ``[N, B, ...]``
  (sampling with replacement, ``u ~ U[0, 1)`` drawn on the CPU from an explicit generator
  so CPU and GPU runs see the same indices);
* full-batch per-client quantities are computed in masked chunks over the clients that
  still have samples, then reduced per client — see :meth:`Split.chunks`.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence

import numpy as np
import torch

from pfl_theory.validation import in_range, positive_int


#: devices chosen by :func:`device_scope` (innermost last); empty: no command chose one
_SCOPED: list[torch.device] = []


def default_device() -> torch.device:
    """The device of the innermost :func:`device_scope`, else CUDA when available, else CPU."""
    if _SCOPED:
        return _SCOPED[-1]
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def compute_device() -> torch.device:
    """Where code that computes on CPU unless told otherwise (the verification checks,
    the figures) puts its data: the device of the innermost :func:`device_scope`, else CPU."""
    return _SCOPED[-1] if _SCOPED else torch.device("cpu")


@contextmanager
def device_scope(device=None) -> Iterator[torch.device | None]:
    """Within the block, :func:`default_device` and :func:`compute_device` are ``device``
    (checked by :func:`resolve_device`: a one-line ``ValueError`` for a device this machine
    lacks); ``None`` changes nothing.  What ``--device`` of ``pflt verify``, ``figures``,
    ``select-k`` and ``select-stages`` sets."""
    if device is None:
        yield None
        return
    dev = resolve_device(device)
    _SCOPED.append(dev)
    try:
        yield dev
    finally:
        _SCOPED.pop()


def resolve_device(device=None) -> torch.device:
    """``None``: :func:`default_device`; ``"cpu"``, ``"cuda"``, ``"cuda:K"`` (or a
    ``torch.device``): that device if this machine has it, else a one-line ``ValueError``."""
    if device is None:
        return default_device()
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f"device must be cpu or cuda[:K], got {device!r}") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {str(device)!r}: CUDA is not available on this machine "
                             "(use cpu)")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"device {str(device)!r}: this machine has "
                             f"{torch.cuda.device_count()} CUDA device(s)")
    elif dev.type != "cpu":
        raise ValueError(f"device must be cpu or cuda[:K], got {device!r}")
    return dev


@dataclass(frozen=True)
class Split:
    """One split (train or test): flat data with per-client offsets and counts."""

    x: torch.Tensor
    y: torch.Tensor
    offsets: torch.Tensor
    counts: torch.Tensor

    @property
    def num_clients(self) -> int:
        return int(self.counts.shape[0])

    def gather(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(x[index], y[index])`` for an index tensor of any shape (e.g. ``[N, B]``)."""
        return self.x[index], self.y[index]

    def blocks(self, size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Every client's samples cut into blocks of ``size`` rows, in flat order:
        ``(client [nb], index [nb, size], valid [nb, size])``.  Only a client's last block
        is padded (repeating its last sample, ``valid`` False there); clients without
        samples have no block.  Vectorised: no loop over clients; the last layout asked
        for is remembered (evaluation asks for the same one every round)."""
        size = positive_int("size", size)
        cached = self.__dict__.get("_blocks")
        if cached is not None and cached[0] == size:
            return cached[1]
        dev = self.counts.device
        per_client = torch.div(self.counts + size - 1, size, rounding_mode="floor")
        client = torch.repeat_interleave(torch.arange(self.num_clients, device=dev), per_client)
        first = torch.cumsum(per_client, 0) - per_client
        start = (torch.arange(client.numel(), device=dev) - first[client]) * size
        pos = start[:, None] + torch.arange(size, device=dev)[None, :]
        count = self.counts[client][:, None]
        valid = pos < count
        index = self.offsets[client][:, None] + torch.minimum(pos, count - 1)
        object.__setattr__(self, "_blocks", (size, (client, index, valid)))  # frozen: cache only
        return client, index, valid

    def chunks(self, chunk: int = 1024
               ) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]:
        """Yield ``(clients [n], x [n, c, ...], y [n, c], mask [n, c])`` covering every
        sample once. Only clients that still have samples at a chunk's start take part
        (ragged sizes cost no padding beyond one chunk per client); padded positions
        repeat a valid sample and are masked out."""
        largest = int(self.counts.max()) if self.counts.numel() else 0
        for start in range(0, largest, chunk):
            clients = torch.nonzero(self.counts > start).flatten()
            counts, offsets = self.counts[clients], self.offsets[clients]
            pos = torch.arange(start, min(start + chunk, largest), device=counts.device)
            mask = pos[None, :] < counts[:, None]
            idx = offsets[:, None] + torch.minimum(pos[None, :], (counts - 1)[:, None])
            yield clients, self.x[idx], self.y[idx], mask


@dataclass(frozen=True)
class Federation:
    """A federated dataset: train/test :class:`Split` on one device plus metadata."""

    train: Split
    test: Split
    num_classes: int
    name: str = "federation"

    @property
    def num_clients(self) -> int:
        return self.train.num_clients

    @property
    def device(self) -> torch.device:
        return self.train.x.device

    @property
    def dtype(self) -> torch.dtype:
        return self.train.x.dtype

    @property
    def feature_shape(self) -> tuple[int, ...]:
        return tuple(self.train.x.shape[1:])

    def sample_batches(self, steps: int, batch_size: int, generator: torch.Generator,
                       clients: torch.Tensor | None = None) -> torch.Tensor:
        """Train indices ``[steps, N, batch_size]`` (uniform with replacement per client),
        drawn on the CPU from ``generator`` then moved to the federation's device.

        Drawn one step at a time into the result: the same numbers as one
        ``rand((steps, N, batch_size))`` (the generator fills in order; tested), without the
        float64 draw and its temporaries for all steps at once (at N = 100,000, R = 20,
        |D| = 20 those were ~1 GB on top of the 320 MB result).

        ``clients`` (client ids, CPU): only their columns, ``[steps, len(clients),
        batch_size]`` — the same numbers as ``sample_batches(...)[:, clients]``, with the
        generator left in the same state.  Every client's uniforms are still drawn (the
        generator fills in order), into one reused ``[N, batch_size]`` buffer; everything
        else (the indices, the result) is proportional to ``len(clients)``: at N = 100,000
        and 1,000 clients the result is 3.2 MB instead of 320 MB."""
        steps = positive_int("steps", steps)
        batch_size = positive_int("batch_size", batch_size)
        counts = self.train.counts.cpu()
        offsets = self.train.offsets.cpu()
        rows = None if clients is None else self._client_rows(clients)
        if rows is not None:
            counts, offsets = counts[rows], offsets[rows]
        scale = counts.to(torch.float64)[:, None]
        last = (counts - 1)[:, None]
        offsets = offsets[:, None]
        out = torch.empty((steps, counts.numel(), batch_size), dtype=torch.long)
        u = torch.empty((self.num_clients, batch_size), dtype=torch.float64)
        for r in range(steps):        # in place: no fresh [N, B] temporaries per step
            u.uniform_(0.0, 1.0, generator=generator)          # = rand((N, B)), in order
            v = u if rows is None else u.index_select(0, rows)
            o = out[r]
            o.copy_(v.mul_(scale))                 # truncation toward 0, as .long()
            torch.minimum(o, last, out=o).add_(offsets)
        return out.to(self.device)

    def skip_batches(self, steps: int, batch_size: int, generator: torch.Generator) -> None:
        """Advance ``generator`` exactly as :meth:`sample_batches` ``(steps, batch_size)``
        would, keeping nothing (one reused ``[N, batch_size]`` buffer): what is drawn after
        it sees the same numbers as after the draw itself (tested)."""
        steps = positive_int("steps", steps)
        batch_size = positive_int("batch_size", batch_size)
        u = torch.empty((self.num_clients, batch_size), dtype=torch.float64)
        for _ in range(steps):
            u.uniform_(0.0, 1.0, generator=generator)

    def _client_rows(self, clients) -> torch.Tensor:
        rows = torch.as_tensor(clients).cpu()
        if rows.dim() != 1 or (rows.numel() and rows.is_floating_point()):
            raise ValueError(f"clients must be a 1-d tensor of client ids, got shape "
                             f"{tuple(rows.shape)} dtype {rows.dtype}")
        rows = rows.long()
        if rows.numel() and not (0 <= int(rows.min()) and int(rows.max()) < self.num_clients):
            raise ValueError(f"client ids must lie in 0..{self.num_clients - 1}, got "
                             f"{int(rows.min())}..{int(rows.max())}")
        return rows

    def to(self, device=None, dtype=None) -> "Federation":
        """A copy on ``device`` with floating features cast to ``dtype``."""
        def move(s: Split) -> Split:
            x = s.x.to(device=device, dtype=dtype if s.x.is_floating_point() else None)
            return Split(x, s.y.to(device), s.offsets.to(device), s.counts.to(device))
        return Federation(move(self.train), move(self.test), self.num_classes, self.name)

    @staticmethod
    def from_client_arrays(xs: Sequence[np.ndarray], ys: Sequence[np.ndarray], *,
                           num_classes: int | None = None, train_fraction: float = 0.75,
                           seed: int = 0, max_client_size: int | None = None,
                           device=None, dtype=None, name: str = "federation"
                           ) -> "Federation":
        """Build from per-client arrays ``xs[i]`` ``[n_i, ...]`` and labels ``ys[i]``.

        Each client's samples are shuffled with ``numpy.random.RandomState(seed + i)``
        (then cut to ``max_client_size`` when given); the first
        ``floor(train_fraction * n_i)`` (at least 1, leaving at least 1 for test) are the
        training set. ``dtype`` defaults to float32, ``device`` to CUDA when available.
        See :meth:`from_client_stream` for the memory used.
        """
        if len(xs) != len(ys) or len(xs) == 0:
            raise ValueError(f"need the same non-zero number of feature and label arrays, "
                             f"got {len(xs)} and {len(ys)}")
        return Federation.from_client_stream(
            [np.shape(x)[0] for x in xs], zip(xs, ys), feature_shape=np.shape(xs[0])[1:],
            num_classes=num_classes, train_fraction=train_fraction, seed=seed,
            max_client_size=max_client_size, device=device, dtype=dtype, name=name)

    @staticmethod
    def from_client_stream(sizes: Sequence[int], clients: Iterable[tuple[np.ndarray, np.ndarray]],
                           *, feature_shape: Sequence[int], num_classes: int | None = None,
                           train_fraction: float = 0.75, seed: int = 0,
                           max_client_size: int | None = None, device=None, dtype=None,
                           name: str = "federation") -> "Federation":
        """:meth:`from_client_arrays` for clients produced one at a time: ``clients``
        yields ``(x_i, y_i)`` with ``sizes[i]`` rows each, in order.

        The flat train/test tensors are allocated once (in ``dtype``) and each client is
        written into them as it arrives, so the peak memory is the federation plus one
        client — no list of per-client copies, no concatenation, no second cast.  Data are
        assembled on the CPU and moved to ``device`` once."""
        train_fraction = in_range("train_fraction", train_fraction, 0.0, 1.0, closed=False)
        if max_client_size is not None:
            max_client_size = positive_int("max_client_size", max_client_size, minimum=2)
        sizes = np.asarray(sizes, dtype=np.int64)
        small = np.flatnonzero(sizes < 2)
        if small.size:
            i = int(small[0])
            raise ValueError(f"client {i} has {sizes[i]} samples; need at least 2 "
                             "(one train, one test)")
        kept = sizes if max_client_size is None else np.minimum(sizes, max_client_size)
        n_train = np.minimum(np.maximum(np.floor(train_fraction * kept).astype(np.int64), 1),
                             kept - 1)
        feat = tuple(feature_shape)
        dtype = torch.float32 if dtype is None else dtype
        tr, te = _Builder(n_train, feat, dtype), _Builder(kept - n_train, feat, dtype)
        count = 0
        for i, (x, y) in enumerate(clients):
            x, y = np.asarray(x), np.asarray(y)
            if x.shape[0] != y.shape[0]:
                raise ValueError(f"client {i}: {x.shape[0]} feature rows but {y.shape[0]} labels")
            if i >= sizes.size or x.shape[0] != sizes[i]:
                raise ValueError(f"client {i}: {x.shape[0]} rows, announced "
                                 f"{sizes[i] if i < sizes.size else 'no client'}")
            if x.shape[1:] != feat:
                raise ValueError(f"client {i}: feature shape {x.shape[1:]} != {feat}")
            if not np.issubdtype(y.dtype, np.integer):
                raise ValueError(f"labels must be integers, got dtype {y.dtype}")
            perm = np.random.RandomState(seed + i).permutation(x.shape[0])[:kept[i]]
            tr.put(i, x, y, perm[:n_train[i]])
            te.put(i, x, y, perm[n_train[i]:])
            count += 1
        if count != sizes.size:
            raise ValueError(f"{sizes.size} client sizes announced, {count} clients given")
        low, high = min(tr.low, te.low), max(tr.high, te.high)
        if low < 0:
            raise ValueError("labels must be non-negative")
        n_cls = high + 1 if num_classes is None else positive_int(
            "num_classes", num_classes, minimum=2)
        if high >= n_cls:
            raise ValueError(f"label {high} >= num_classes={n_cls}")
        device = resolve_device(device)
        return Federation(tr.split(device), te.split(device), n_cls, name)


class _Builder:
    """One flat split filled client by client (see :meth:`Federation.from_client_stream`)."""

    def __init__(self, counts: np.ndarray, feature_shape: tuple[int, ...], dtype: torch.dtype):
        self.counts = torch.as_tensor(counts, dtype=torch.long)
        self.offsets = torch.cumsum(self.counts, 0) - self.counts
        total = int(self.counts.sum())
        self.x = torch.empty((total, *feature_shape), dtype=dtype)
        self.y = torch.empty(total, dtype=torch.long)
        self.low, self.high = 0, -1

    def put(self, i: int, x: np.ndarray, y: np.ndarray, rows: np.ndarray) -> None:
        o, c = int(self.offsets[i]), int(self.counts[i])
        self.x[o:o + c] = torch.from_numpy(np.ascontiguousarray(x[rows]))
        labels = y[rows]
        self.y[o:o + c] = torch.from_numpy(labels.astype(np.int64, copy=False))
        if labels.size:
            self.low = min(self.low, int(labels.min()))
            self.high = max(self.high, int(labels.max()))

    def split(self, device: torch.device) -> Split:
        return Split(self.x.to(device), self.y.to(device), self.offsets.to(device),
                     self.counts.to(device))
