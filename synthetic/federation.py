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

from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import torch

from pfl_theory.validation import in_range, positive_int


def default_device() -> torch.device:
    """CUDA when available, CPU otherwise."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


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

    def sample_batches(self, steps: int, batch_size: int,
                       generator: torch.Generator) -> torch.Tensor:
        """Train indices ``[steps, N, batch_size]`` (uniform with replacement per client),
        drawn on the CPU from ``generator`` then moved to the federation's device."""
        steps = positive_int("steps", steps)
        batch_size = positive_int("batch_size", batch_size)
        u = torch.rand((steps, self.num_clients, batch_size), generator=generator,
                       dtype=torch.float64)
        counts = self.train.counts.cpu().to(torch.float64)
        local = torch.minimum((u * counts[None, :, None]).long(),
                              (self.train.counts.cpu() - 1)[None, :, None])
        return (self.train.offsets.cpu()[None, :, None] + local).to(self.device)

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

        Each client's samples are shuffled with ``numpy.random.RandomState(seed + i)``;
        the first ``floor(train_fraction * n_i)`` (at least 1, leaving at least 1 for
        test) are the training set. ``dtype`` defaults to float32, ``device`` to CUDA when
        available.
        """
        if len(xs) != len(ys) or len(xs) == 0:
            raise ValueError(f"need the same non-zero number of feature and label arrays, "
                             f"got {len(xs)} and {len(ys)}")
        train_fraction = in_range("train_fraction", train_fraction, 0.0, 1.0, closed=False)
        if max_client_size is not None:
            max_client_size = positive_int("max_client_size", max_client_size, minimum=2)
        parts: dict[str, list] = {"xtr": [], "ytr": [], "xte": [], "yte": []}
        feat = None
        for i, (x, y) in enumerate(zip(xs, ys)):
            x, y = np.asarray(x), np.asarray(y)
            if x.shape[0] != y.shape[0]:
                raise ValueError(f"client {i}: {x.shape[0]} feature rows but {y.shape[0]} labels")
            if x.shape[0] < 2:
                raise ValueError(f"client {i} has {x.shape[0]} samples; need at least 2 "
                                 "(one train, one test)")
            if feat is None:
                feat = x.shape[1:]
            elif x.shape[1:] != feat:
                raise ValueError(f"client {i}: feature shape {x.shape[1:]} != {feat}")
            perm = np.random.RandomState(seed + i).permutation(x.shape[0])
            if max_client_size is not None:
                perm = perm[:max_client_size]
            n_train = min(max(int(np.floor(train_fraction * perm.size)), 1), perm.size - 1)
            parts["xtr"].append(x[perm[:n_train]])
            parts["ytr"].append(y[perm[:n_train]])
            parts["xte"].append(x[perm[n_train:]])
            parts["yte"].append(y[perm[n_train:]])
        all_y = np.concatenate(parts["ytr"] + parts["yte"])
        if not np.issubdtype(all_y.dtype, np.integer):
            raise ValueError(f"labels must be integers, got dtype {all_y.dtype}")
        if all_y.min() < 0:
            raise ValueError("labels must be non-negative")
        n_cls = int(all_y.max()) + 1 if num_classes is None else positive_int(
            "num_classes", num_classes, minimum=2)
        if all_y.max() >= n_cls:
            raise ValueError(f"label {int(all_y.max())} >= num_classes={n_cls}")
        device = default_device() if device is None else torch.device(device)
        dtype = torch.float32 if dtype is None else dtype

        def split(xl, yl) -> Split:
            counts = torch.tensor([len(a) for a in yl], dtype=torch.long)
            offsets = torch.cumsum(counts, 0) - counts
            x = torch.as_tensor(np.concatenate(xl)).to(dtype)
            y = torch.as_tensor(np.concatenate(yl)).long()
            return Split(x.to(device), y.to(device), offsets.to(device), counts.to(device))

        return Federation(split(parts["xtr"], parts["ytr"]), split(parts["xte"], parts["yte"]),
                          n_cls, name)
