"""Split a labelled pool ``(X, y)`` into ``N`` clients, the way PFL papers build federations
from real datasets.

Every partitioner returns a :class:`Partition` ``(xs, ys, client_classes)`` — it unpacks as a
triple — with per-client lists ``xs[i]`` float32 ``[n_i, …features]``, ``ys[i]`` int64
``[n_i]`` (the federation's input format) and ``client_classes[i]`` the sorted int64 array of
labels client ``i`` was assigned (label skew) or holds (Dirichlet, IID).  Randomness comes only
from ``seed`` (an int or a ``numpy.random.Generator``): same seed ⇒ same partition.

* :func:`label_skew_partition` — pathological label skew: each client gets ``c`` classes and
  ``n_i ~ U{lo, …, hi}`` samples split evenly over them (CGPFL: N=40, 3 of 10 classes,
  n_i ∈ [400, 5000]; pFedMe: N=20, 2 labels, n_i ∈ [1165, 3834]).
* :func:`dirichlet_partition` — each class's samples are split over the clients with
  proportions ``p_k ~ Dir(α·1_N)`` (smaller α ⇒ more skew).
* :func:`iid_partition` — a uniform random split.
* :func:`train_test_split_clients` — the papers' per-client 75/25 train/test split.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import numpy as np

from pfl_theory.validation import in_range, positive, positive_int

__all__ = ["Partition", "label_skew_partition", "dirichlet_partition", "iid_partition",
           "train_test_split_clients"]


class Partition(NamedTuple):
    xs: list[np.ndarray]
    ys: list[np.ndarray]
    client_classes: list[np.ndarray]


def _rng(seed: Any) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(positive_int("seed", seed, minimum=0))


def _pool(x: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(x), np.asarray(y)
    if y.ndim != 1 or not (np.issubdtype(y.dtype, np.integer) or y.size == 0):
        raise ValueError(f"y must be a 1-D integer label array, got dtype {y.dtype}, "
                         f"shape {y.shape}")
    if x.ndim < 1 or len(x) != len(y):
        raise ValueError(f"X and y must have the same length, got {x.shape[:1]} and {y.shape}")
    if len(y) == 0:
        raise ValueError("the pool (X, y) is empty")
    if y.min() < 0:
        raise ValueError(f"labels must be >= 0, found {y.min()}")
    return x, y.astype(np.int64, copy=False)


def _gather(x: np.ndarray, y: np.ndarray, groups: list[np.ndarray],
            classes: list[np.ndarray] | None = None) -> Partition:
    xs = [x[g].astype(np.float32, copy=False) for g in groups]
    ys = [y[g] for g in groups]
    if classes is None:
        classes = [np.unique(v) for v in ys]
    return Partition(xs, ys, classes)


def label_skew_partition(x: Any, y: Any, *, num_clients: int, classes_per_client: int,
                         size_range: tuple[int, int], seed: Any, replace: bool | str = False,
                         class_assignment: str = "random") -> Partition:
    """Pathological label skew.

    Client ``i`` is assigned ``c = classes_per_client`` distinct labels among the labels
    present in ``y`` — ``class_assignment="random"``: uniformly at random;
    ``"cyclic"``: labels ``(i + j) mod C``, ``j < c``, of the sorted label list, as in
    pFedMe's MNIST generator — and a size ``n_i`` drawn uniformly from the integers
    ``lo … hi`` (``size_range = (lo, hi)``, inclusive).  The ``n_i`` samples are split evenly
    over its ``c`` labels (``n_i // c`` each, the remainder ``+1`` to randomly chosen labels), so
    ``lo >= c`` guarantees every assigned label is present.

    Sampling: ``replace=False`` (default) draws without replacement while the pool lasts —
    each class's samples are shuffled once and handed out in turn, so no sample is used twice
    — and raises ``ValueError`` if some class is exhausted (the papers' N=40, n_i ∈ [400, 5000]
    setting asks for ~108k samples, more than MNIST's 70k).  ``replace=True`` draws each
    client's samples of a class uniformly with replacement from that class (duplicates
    possible, within and across clients).  ``replace="across-clients"``: each client's samples
    of a class are a uniform draw *without* replacement from that class, independently per
    client — no sample twice in one client (so never in both its train and test splits), but
    a sample may go to several clients (the papers' settings that ask for more samples than
    the pool holds).  Each client's samples are shuffled.
    """
    x, y = _pool(x, y)
    n_clients = positive_int("num_clients", num_clients)
    c = positive_int("classes_per_client", classes_per_client)
    labels = np.unique(y)
    if c > len(labels):
        raise ValueError(f"classes_per_client={c} exceeds the {len(labels)} classes in y")
    try:
        lo, hi = size_range
    except (TypeError, ValueError):
        raise ValueError(f"size_range must be a pair (lo, hi), got {size_range!r}") from None
    lo, hi = positive_int("size_range[0]", lo), positive_int("size_range[1]", hi)
    if not c <= lo <= hi:
        raise ValueError(f"size_range=(lo, hi) needs classes_per_client={c} <= lo <= hi (every "
                         f"assigned class gets at least one sample), got {size_range!r}")
    across = isinstance(replace, str) and replace == "across-clients"
    if not (isinstance(replace, (bool, np.bool_)) or across):
        raise ValueError(f"replace must be True, False or 'across-clients', got {replace!r}")
    if class_assignment not in ("random", "cyclic"):
        raise ValueError(f"class_assignment must be 'random' or 'cyclic', got {class_assignment!r}")
    rng = _rng(seed)

    sizes = rng.integers(lo, hi + 1, size=n_clients)
    if class_assignment == "cyclic":
        assigned = (np.arange(n_clients)[:, None] + np.arange(c)[None, :]) % len(labels)
    else:
        # the first c entries of a uniformly random permutation of the C labels, per client
        assigned = np.argsort(rng.random((n_clients, len(labels))), axis=1)[:, :c]
    # even split; the remainder n_i mod c goes (+1 each) to uniformly chosen assigned labels
    extra = np.argsort(rng.random((n_clients, c)), axis=1) < (sizes % c)[:, None]
    counts = sizes[:, None] // c + extra

    by_class = [rng.permutation(np.flatnonzero(y == lab)) for lab in labels]
    if across:
        for i, j in zip(*np.nonzero(counts > np.array([[len(by_class[k]) for k in a]
                                                         for a in assigned]))):
            k = assigned[i, j]
            raise ValueError(
                f"client {i} needs {int(counts[i, j])} samples of class {labels[k]} but the "
                f"pool has {len(by_class[k])} (no sample twice in a client); use a smaller "
                f"size_range or more classes per client")
    elif not replace:
        demand = np.bincount(assigned.ravel(), weights=counts.ravel(), minlength=len(labels))
        short = np.flatnonzero(demand > [len(v) for v in by_class])
        if short.size:
            k = short[0]
            raise ValueError(
                f"label-skew partition needs {int(demand[k])} samples of class {labels[k]} but "
                f"the pool has {len(by_class[k])} (drawing without replacement); use a smaller "
                f"size_range, fewer clients, replace=True"
                + (", or class_assignment='cyclic' (spreads clients evenly over the classes)"
                   if class_assignment == "random" else ""))
    cursor = np.zeros(len(labels), dtype=np.int64)
    groups = []
    for i in range(n_clients):
        parts = []
        for k, m in zip(assigned[i], counts[i]):
            if across:
                parts.append(rng.choice(by_class[k], m, replace=False))
            elif replace:
                parts.append(rng.choice(by_class[k], m, replace=True))
            else:
                parts.append(by_class[k][cursor[k]: cursor[k] + m])
                cursor[k] += m
        groups.append(rng.permutation(np.concatenate(parts)))
    classes = [np.sort(labels[a]) for a in assigned]
    return _gather(x, y, groups, classes)


def dirichlet_partition(x: Any, y: Any, *, num_clients: int, alpha: float, seed: Any,
                        min_size: int = 2, max_tries: int = 1000) -> Partition:
    """Dirichlet label skew: for every class ``k`` draw ``p_k ~ Dir(α·1_N)`` over the ``N``
    clients and deal class ``k``'s ``n_k`` shuffled samples out with counts
    ``Multinomial(n_k, p_k)`` — every sample is used exactly once, and client ``i``'s expected
    share of each class is ``1/N`` with variance ``(1/N)(1 - 1/N)/(Nα + 1)`` (plus multinomial
    noise).  This is the per-class form of NIID-Bench (Li et al., ICDE 2022), with multinomial
    counts instead of rounded cumulative proportions and without its cap on clients that
    already hold ``n/N`` samples; the per-client form of Hsu et al. (2019),
    ``q_i ~ Dir(α·p)`` with fixed client sizes, is not implemented.

    The whole draw is repeated until every client has at least ``min_size`` samples (default 2,
    so a 75/25 split leaves both parts non-empty); after ``max_tries`` failures a ``ValueError``
    suggests a larger α or fewer clients.  ``min_size=0`` never redraws (and keeps the
    proportions exactly Dirichlet)."""
    x, y = _pool(x, y)
    n_clients = positive_int("num_clients", num_clients)
    alpha = positive("alpha", alpha)
    min_size = positive_int("min_size", min_size, minimum=0)
    max_tries = positive_int("max_tries", max_tries)
    if min_size * n_clients > len(y):
        raise ValueError(f"min_size={min_size} for {n_clients} clients needs "
                         f"{min_size * n_clients} samples, the pool has {len(y)}")
    rng = _rng(seed)
    labels = np.unique(y)
    for _ in range(max_tries):
        pieces: list[list[np.ndarray]] = [[] for _ in range(n_clients)]
        for lab in labels:
            idx = rng.permutation(np.flatnonzero(y == lab))
            p = rng.dirichlet(np.full(n_clients, alpha))
            p = p / p.sum()  # guard the float rounding numpy's multinomial checks against
            bounds = np.cumsum(rng.multinomial(len(idx), p))[:-1]
            for i, part in enumerate(np.split(idx, bounds)):
                pieces[i].append(part)
        groups = [np.concatenate(p) for p in pieces]
        if min(len(g) for g in groups) >= min_size:
            return _gather(x, y, [rng.permutation(g) for g in groups])
    raise ValueError(f"no Dirichlet(alpha={alpha}) draw in {max_tries} tries gave every one of "
                     f"{n_clients} clients >= {min_size} samples; raise alpha, lower min_size "
                     f"or use fewer clients")


def iid_partition(x: Any, y: Any, *, num_clients: int, seed: Any,
                  samples_per_client: int | None = None) -> Partition:
    """IID split of a random permutation of the pool: ``samples_per_client=None`` uses the whole
    pool (sizes differ by at most one); an integer ``s`` gives every client exactly ``s``
    samples, drawn without replacement (needs ``N·s <= n``)."""
    x, y = _pool(x, y)
    n_clients = positive_int("num_clients", num_clients)
    need = n_clients if samples_per_client is None else \
        n_clients * positive_int("samples_per_client", samples_per_client)
    if need > len(y):
        raise ValueError(f"IID partition needs {need} samples for {n_clients} clients, the "
                         f"pool has {len(y)}")
    perm = _rng(seed).permutation(len(y))
    if samples_per_client is None:
        groups = np.array_split(perm, n_clients)
    else:
        groups = list(perm[:need].reshape(n_clients, -1))
    return _gather(x, y, groups)


def train_test_split_clients(xs: Sequence[np.ndarray], ys: Sequence[np.ndarray], *,
                             seed: Any, train_fraction: float = 0.75
                             ) -> tuple[list[np.ndarray], list[np.ndarray],
                                        list[np.ndarray], list[np.ndarray]]:
    """Per-client random train/test split: client ``i`` keeps ``floor(train_fraction · n_i)``
    shuffled samples for training and the rest for testing (pFedMe's
    ``int(0.75 * num_samples)``).  Returns ``(xs_train, ys_train, xs_test, ys_test)``; a split
    that leaves either part of a client empty raises ``ValueError``."""
    frac = in_range("train_fraction", train_fraction, 0.0, 1.0, closed=False)
    if len(xs) != len(ys) or len(xs) == 0:
        raise ValueError(f"xs and ys must be non-empty lists of equal length, got {len(xs)} "
                         f"and {len(ys)}")
    rng = _rng(seed)
    out: tuple[list, list, list, list] = ([], [], [], [])
    for i, (xi, yi) in enumerate(zip(xs, ys)):
        if len(xi) != len(yi):
            raise ValueError(f"client {i}: {len(xi)} inputs but {len(yi)} labels")
        n_train = int(frac * len(yi))
        if n_train == 0 or n_train == len(yi):
            raise ValueError(f"client {i} has {len(yi)} samples: train_fraction={frac} leaves "
                             f"an empty train or test set")
        perm = rng.permutation(len(yi))
        xi, yi = np.asarray(xi), np.asarray(yi)
        for part, arr, sel in zip(out, (xi, yi, xi, yi), (perm[:n_train], perm[:n_train],
                                                          perm[n_train:], perm[n_train:])):
            part.append(arr[sel])
    return out
