"""Planted-context federations of the K-selection benchmark (:mod:`verification.selection.k_benchmark`).

CGPFL (Tang, Guo, Guo, IJCAI 2022) assumes clients fall into K latent contexts; these
federations plant K₀ of them with controllable difficulty so that a selector's K̂ can be
compared with the K that actually maximises CGPFL's personalized test accuracy.

Class pool: C = 10 classes in R^20, class means ``class_sep · N(0, I)``, x = mean + N(0, I).

* ``kind="label"`` (label skew, the CGPFL paper's design): context k owns a set of classes;
  ``easy`` = 2 classes per context, ``hard`` = 4 (subsets overlap more).
* ``kind="feature"`` (feature shift, P(x | y) differs by context): every client sees all
  classes, context k moves every class mean by ``δ · N(0, I)``; ``easy`` δ = 1.0,
  ``hard`` δ = 0.4.
* ``sizes="equal"``: balanced contexts (⌊N/K₀⌋ or ⌈N/K₀⌉ clients); ``"unequal"``: context
  shares ∝ 2^{−k} (k = 0 … K₀−1), each context at least one client — e.g. N = 20, K₀ = 4:
  12/5/2/1 clients.
* client sample counts n_i ~ U{40, …, 80}; 75 % train / 25 % test per client
  (:meth:`synthetic.federation.Federation.from_client_arrays`).
* :func:`large_test_split`: 1000 further samples per client from the same per-client
  distribution (separate rng stream) — the benchmark's low-noise measurement of the best K.

All draws come from ``numpy.random.default_rng(seed)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from algorithms.methods.clustered.cgpfl_validation import holdout_split as split_folds  # re-exported (same split)
from pfl_theory.validation import positive_int
from synthetic.federation import Federation, Split, resolve_device

__all__ = ["SelectionCase", "context_counts", "planted_assignment", "make_case_federation",
           "large_test_split", "split_folds", "planted_vectors"]

NUM_CLASSES, DIM, CLASS_SEP, SIZE_RANGE = 10, 20, 0.5, (40, 80)
LARGE_TEST, LARGE_TEST_STREAM = 1000, 7919  # per-client size and rng stream of large_test_split
CLASSES_PER_CONTEXT = {"easy": 2, "hard": 4}
SHIFT = {"easy": 1.0, "hard": 0.4}


@dataclass(frozen=True)
class SelectionCase:
    """One benchmark federation: ``kind`` label/feature, N = ``n`` clients, ``k0`` planted
    contexts, ``sizes`` equal/unequal, ``difficulty`` easy/hard, data ``seed``."""

    kind: str
    n: int
    k0: int
    sizes: str
    difficulty: str
    seed: int = 0

    def __post_init__(self):
        if self.kind not in ("label", "feature"):
            raise ValueError(f"kind must be 'label' or 'feature', got {self.kind!r}")
        if self.sizes not in ("equal", "unequal"):
            raise ValueError(f"sizes must be 'equal' or 'unequal', got {self.sizes!r}")
        if self.difficulty not in ("easy", "hard"):
            raise ValueError(f"difficulty must be 'easy' or 'hard', got {self.difficulty!r}")
        n, k0 = positive_int("n", self.n), positive_int("k0", self.k0)
        if k0 > n:
            raise ValueError(f"k0 must be <= n = {n}, got {k0}")

    @property
    def name(self) -> str:
        return f"{self.kind}-N{self.n}-K{self.k0}-{self.sizes}-{self.difficulty}-s{self.seed}"


def context_counts(n: int, k0: int, sizes: str) -> np.ndarray:
    """Clients per context: balanced, or ∝ 2^{−k} with at least one each (sum = n)."""
    n, k0 = positive_int("n", n), positive_int("k0", k0)
    if k0 > n:
        raise ValueError(f"k0 must be <= n = {n}, got {k0}")
    if sizes == "equal":
        return np.full(k0, n // k0) + (np.arange(k0) < n % k0)
    if sizes != "unequal":
        raise ValueError(f"sizes must be 'equal' or 'unequal', got {sizes!r}")
    share = 0.5 ** np.arange(k0)
    counts = np.maximum(1, np.floor(n * share / share.sum())).astype(np.int64)
    counts[0] += n - counts.sum()
    while counts[0] < counts[1:].max(initial=0):  # tiny n: keep context 0 the largest
        j = int(np.argmax(counts[1:])) + 1
        counts[j] -= 1
        counts[0] += 1
    return counts


def planted_assignment(n: int, k0: int, sizes: str, rng: np.random.Generator) -> np.ndarray:
    """Context of each client: :func:`context_counts` labels in a seeded random order."""
    counts = context_counts(n, k0, sizes)
    return rng.permutation(np.repeat(np.arange(k0), counts)).astype(np.int64)


def _population(case: SelectionCase, rng: np.random.Generator):
    """The planted distribution of ``case``: assignment [N], per-context class sets and class
    means, client sample counts — drawn from ``rng`` in the order of the original generator
    (so the training data of a seed never changed)."""
    assign = planted_assignment(case.n, case.k0, case.sizes, rng)
    means = CLASS_SEP * rng.normal(size=(NUM_CLASSES, DIM))
    if case.kind == "label":
        per = CLASSES_PER_CONTEXT[case.difficulty]
        classes = [rng.choice(NUM_CLASSES, size=per, replace=False) for _ in range(case.k0)]
        ctx_means = [means] * case.k0
    else:
        classes = [np.arange(NUM_CLASSES)] * case.k0
        ctx_means = [means + SHIFT[case.difficulty] * rng.normal(size=means.shape)
                     for _ in range(case.k0)]
    sizes = rng.integers(SIZE_RANGE[0], SIZE_RANGE[1] + 1, size=case.n)
    return assign, classes, ctx_means, sizes


def _client_samples(classes, ctx_means, k: int, size: int, rng: np.random.Generator):
    """``size`` samples (x, y) of context ``k``'s distribution."""
    y = rng.choice(classes[k], size=size)
    return ctx_means[k][y] + rng.normal(size=(size, DIM)), y.astype(np.int64)


def make_case_federation(case: SelectionCase, *, dtype=torch.float64, device=None
                         ) -> tuple[Federation, np.ndarray]:
    """The federation of ``case`` and its planted assignment [N] (module docstring)."""
    rng = np.random.default_rng(case.seed)
    assign, classes, ctx_means, sizes = _population(case, rng)
    xs, ys = zip(*(_client_samples(classes, ctx_means, assign[i], sizes[i], rng)
                   for i in range(case.n)))
    fed = Federation.from_client_arrays(list(xs), list(ys), num_classes=NUM_CLASSES,
                                        seed=case.seed, dtype=dtype, device=device, name=case.name)
    return fed, assign


def large_test_split(case: SelectionCase, per_client: int = LARGE_TEST, *, dtype=torch.float64,
                     device=None) -> Split:
    """A large test sample: ``per_client`` fresh samples for every client of ``case``, drawn
    from that client's own distribution (its context's classes and class means, exactly as
    its training data) with a separate stream ``default_rng([seed, LARGE_TEST_STREAM])`` —
    :func:`make_case_federation`'s data and every selector's input are unchanged.  With
    1000 samples per client a client's accuracy has binomial SE ≤ 1.6 points (pooled over
    N ≥ 20 clients ≤ 0.4), against ≈ 5–8 points on its 10–20 own test samples."""
    per_client = positive_int("per_client", per_client)
    assign, classes, ctx_means, _ = _population(case, np.random.default_rng(case.seed))
    rng = np.random.default_rng([case.seed, LARGE_TEST_STREAM])
    xs, ys = zip(*(_client_samples(classes, ctx_means, assign[i], per_client, rng)
                   for i in range(case.n)))
    dev = resolve_device(device)
    counts = torch.full((case.n,), per_client, dtype=torch.long)
    return Split(torch.as_tensor(np.concatenate(xs), dtype=dtype).to(dev),
                 torch.as_tensor(np.concatenate(ys)).to(dev),
                 (torch.arange(case.n) * per_client).to(dev), counts.to(dev))


def planted_vectors(n: int, k0: int, dim: int, *, sizes: str, separation: float, noise: float,
                    seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Client model vectors θ_i = c_{k(i)} + noise·N(0, I_dim) around K₀ centres whose minimum
    pairwise distance is exactly ``separation`` (as
    :func:`synthetic.contexts.planted_model_vectors`), with :func:`context_counts` context
    sizes and client sample counts m_i ~ U{40, …, 80}.  Returns (vectors, assignment, m)."""
    rng = np.random.default_rng(seed)
    assign = planted_assignment(n, k0, sizes, rng)
    centres = rng.normal(size=(k0, positive_int("dim", dim)))
    if k0 > 1:
        gaps = np.sqrt(((centres[:, None] - centres[None]) ** 2).sum(-1))
        centres *= separation / gaps[np.triu_indices(k0, 1)].min()
    else:
        centres[:] = 0.0
    vectors = centres[assign] + noise * rng.normal(size=(n, dim))
    return vectors, assign, rng.integers(SIZE_RANGE[0], SIZE_RANGE[1] + 1, size=n).astype(np.float64)
