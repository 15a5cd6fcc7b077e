"""The papers' client partitions of real data, by name (``--partition cgpfl|pfedme|ppfe|plgu``).

Each is a label-skew partition (:func:`synthetic.partition.label_skew_partition`) with the
settings its paper states for the dataset; each client's samples are then split
``train_fraction`` / rest (default 0.75, the papers' 75/25).  ``N`` is ``--clients``:
the papers use CGPFL N = 40, pFedMe N = 20, PPFE N = 100, PLGU N = 100 (CIFAR) and 20
(Tiny-ImageNet).

* ``cgpfl`` — CGPFL (IJCAI 2022) §5.1 "Dataset Setup": MNIST and Fashion-MNIST: the 60,000
  *training* images; CIFAR-10: the whole 60,000; each client 3 classes of 10, size uniform
  in [400, 5000], 75 % train / 25 % test.  (The ICLR 2022 submission says 2 classes:
  ``--partition label-skew --classes-per-client 2 --size-range 400 5000 --replace true``.)
  The class assignment is the cyclic ``(i + j) mod 10`` of pFedMe's generator, on which
  CGPFL's code builds.  40 clients × E[n] = 40 × 2,700 = 108,000 > 60,000, so the paper's
  sizes cannot be drawn disjointly: each client draws its samples of a class *without*
  replacement (no image twice in a client, hence never in both its train and test split;
  at most 5000/3 + 1 < 6,000 per class), independently of the other clients, so an image
  may be held by several clients.  How many: ``summary.json``'s ``partition_reuse``
  (:mod:`synthetic.real_data.partition_overlap`).
* ``pfedme`` — pFedMe (NeurIPS 2020) §5.1: MNIST's 70,000 images, N = 20, each client 2 of
  the 10 labels (cyclic, pFedMe's generator), sizes uniform in [1165, 3834], 75/25; 20 ×
  2,500 = 50,000 samples but a class's 4 holders may ask for more than its ~7,000 images,
  so the same within-client draw as ``cgpfl``.
* ``ppfe`` — PPFE (arXiv 2602.14244) §6.2.3 and A.2: each client S classes chosen at random,
  equal sizes n: CIFAR-10 S = 2, n = 150 (the high-heterogeneity column; S = 5 is the
  low one); CIFAR-100 S = 5, n = 400 (S = 20 low).  EMNIST Letters: S = 10, but n was lost
  in the paper's text (an error says how to give it).  Other regimes:
  ``--partition label-skew --class-assignment random --classes-per-client S
  --size-range n n``.
* ``plgu`` — PLGU (CVPR 2023) §6 "Experimental Setup": a fixed number of labels per client
  (CIFAR-10: 3, CIFAR-100: 10) and sizes "uniformly distributed", read here as equal
  sizes filling the pool: cyclic assignment (every class held by the same number of
  clients) and n = c · min_k ⌊count_k / load_k⌋.

Fashion-MNIST for pFedMe, PPFE and PLGU (which do not use it) is a *transfer*: the paper's
setting for its 10-class dataset (pFedMe: MNIST; PPFE, PLGU: CIFAR-10) on FMNIST's 70,000
images.  A paper that does not use a dataset otherwise is an error naming those it does use.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["PAPER_PARTITIONS", "PaperPartition", "equal_fill_size", "paper_partition"]


@dataclass(frozen=True)
class PaperPartition:
    """``pool``: ``"train"`` (the training split only) or ``"all"`` (train + test pooled);
    the other fields are :func:`~synthetic.partition.label_skew_partition`'s
    (``size_range=None``: :func:`equal_fill_size`; ``replace``: ``False`` (every image used
    at most once) or ``"across-clients"`` (never twice in a client, possibly in several))."""

    pool: str
    classes_per_client: int
    class_assignment: str
    size_range: tuple[int, int] | None
    replace: bool | str


#: paper -> dataset -> its partition
_ACROSS = "across-clients"
_TABLE: dict[str, dict[str, PaperPartition]] = {
    "cgpfl": {"mnist": PaperPartition("train", 3, "cyclic", (400, 5000), _ACROSS),
              "fmnist": PaperPartition("train", 3, "cyclic", (400, 5000), _ACROSS),
              "cifar10": PaperPartition("all", 3, "cyclic", (400, 5000), _ACROSS)},
    "pfedme": {"mnist": PaperPartition("all", 2, "cyclic", (1165, 3834), _ACROSS),
               "fmnist": PaperPartition("all", 2, "cyclic", (1165, 3834), _ACROSS)},
    "ppfe": {"cifar10": PaperPartition("all", 2, "random", (150, 150), False),
             "fmnist": PaperPartition("all", 2, "random", (150, 150), False),
             "cifar100": PaperPartition("all", 5, "random", (400, 400), False),
             "emnist-letters": PaperPartition("all", 10, "random", None, False)},
    "plgu": {"cifar10": PaperPartition("all", 3, "cyclic", None, False),
             "fmnist": PaperPartition("all", 3, "cyclic", None, False),
             "cifar100": PaperPartition("all", 10, "cyclic", None, False)},
}
PAPER_PARTITIONS = tuple(_TABLE)


def paper_partition(paper: str, dataset: str) -> PaperPartition:
    """The partition ``paper`` uses on ``dataset`` (canonical name, e.g. ``fmnist``,
    ``emnist-letters``); ``ValueError`` when the paper does not use that dataset or (PPFE
    EMNIST) its text lost a setting."""
    if paper not in _TABLE:
        raise ValueError(f"unknown paper partition {paper!r}; choose {', '.join(_TABLE)}")
    table = _TABLE[paper]
    if dataset not in table:
        raise ValueError(f"--partition {paper}: the paper partitions {', '.join(table)} only, "
                         f"not {dataset}; use label-skew/dirichlet/iid for other datasets")
    if paper == "ppfe" and dataset == "emnist-letters":
        raise ValueError("--partition ppfe on EMNIST Letters: the paper's samples per client "
                         "were lost from its text (S = 10 classes is known); give them: "
                         "--partition label-skew --class-assignment random "
                         "--classes-per-client 10 --size-range N N")
    return table[dataset]


def equal_fill_size(y: np.ndarray, num_clients: int, classes_per_client: int) -> int:
    """The largest equal client size ``n = c · m`` that the cyclic assignment can feed without
    replacement: class ``k`` is held by ``load_k`` clients, each taking ``m`` of its samples,
    so ``m = min_k ⌊count_k / load_k⌋``."""
    labels, counts = np.unique(np.asarray(y), return_counts=True)
    c = int(classes_per_client)
    assigned = (np.arange(int(num_clients))[:, None] + np.arange(c)[None, :]) % len(labels)
    load = np.bincount(assigned.ravel(), minlength=len(labels))
    m = min(int(counts[k] // load[k]) for k in range(len(labels)) if load[k])
    if m < 1:
        raise ValueError(f"{len(y)} samples cannot give {num_clients} clients "
                         f"{c} classes each; use fewer --clients")
    return c * m
