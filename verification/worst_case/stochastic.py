"""The randomness of the theorems inside a PEP: gradient noise, inexact personal solutions,
client sampling.

**Gradient noise** (pFedMe A2: a sample's gradient has variance ≤ γ_f², a mini-batch of
|D| divides it; Local SGD: variance ≤ σ²).  Every stochastic gradient is ∇f(x) + e with a
new point e and, as constraints on the Gram matrix,

* E‖e‖² ≤ V/|D| (the variance bound), and
* E⟨e, v⟩ = 0 for every point v created before e (unbiasedness: E[e | past] = 0 and v is
  a function of the past).

* E⟨e, v⟩ = 0 also for every point v created *after* e that is a deterministic function of
  e's past (issue 41): another client's gradient at the same iterate, computed after this
  client's noise, is such a point — E[e | past] = 0 makes it orthogonal to e although it
  was created later.  :class:`NoiseLedger` tracks which noise points each point depends on
  (a gradient ∇f(x) depends on what x depends on; a point it cannot trace — a prox output,
  the metric's gradients — gets no constraint) and adds these before the solve.  No new
  assumption: it is the same E[e | past] = 0, read over every point that is a function of
  that past.  Two clients, one noisy FedAvg step (η = 0.5, μ = 0.1, L = 1, V = 2): without it
  1.16860, with it the closed form max|1 − ημ|, |1 − ηL|)² + η²V/N = 1.15250 to the solver's
  accuracy (tested); one client's noise remains free to correlate with what *depends* on
  another client's later noise (independence across clients is not assumed), so with several
  local steps the value stays a relaxation.

*Why this is the worst case and not a lower estimate.*  Take any functions of the class and
any noise oracle obeying the assumption, run the method (and, with client sampling, every
branch of it in one probability space, each call's noise drawn given everything computed
before it).  The expected Gram matrix E[G] of all the points and the expected function
values are then feasible for the SDP: it is PSD, every interpolation inequality holds in
each realisation (the same function at all its points) and so in expectation, and the two
noise constraints above hold.  The metric is linear in (G, F), so its expectation is the
SDP objective at that point: **the SDP value is ≥ the worst expected metric over every
function and every noise law**.  It is a relaxation (the SDP may mix realisations no single
function interpolates), so it is labelled *valid, not exact*; at V = 0 the constraint
‖e‖² ≤ 0 makes every e zero and the PEP is the deterministic one (tested to solver
precision).

**Inexact personal solutions** (pFedMe Lemma 1, docs/formulas.md §B.5).  The inner problem
h(θ) = f(θ) + λ/2‖θ − w‖² is solved on a mini-batch to ‖∇h̃(θ̃; D)‖² ≤ ν (eq. 8); Lemma 1's
proof splits ‖∇h(θ̃)‖² ≤ 2‖∇h̃(θ̃; D)‖² + 2‖∇h̃ − ∇h‖², so E‖∇h(θ̃)‖² ≤ 2(ν + γ_f²/|D|)
(ν alone without noise) and, h being (λ+μ)-strongly convex, E‖θ̃ − θ̂‖² ≤ δ² =
2(ν + γ_f²/|D|)/(λ+μ)².  Two oracles:

* ``inner_accuracy`` ν with noise: PEPit's ``inexact_proximal_step`` (option PD_gapII:
  θ̃ = w − g/λ + e with g ∈ ∂f(θ̃), so ∇h(θ̃) = λe) with λ²‖e‖² ≤ 2(ν + V/|D|);
* ``delta_sq`` δ²: θ̃ = θ̂ + d with ‖d‖² ≤ δ² — Lemma 1's conclusion, all that Theorems 1
  and 2 use (the first criterion implies it, so its worst case is smaller; tested).

Both errors are adversarial (no unbiasedness: Lemma 1 does not give one).

**Client sampling** (S of N uniformly without replacement per round): every subset is a
branch, all branches are points of the same PEP (the same functions), and the metric is the
uniform mean over the C(N, S)^T paths — the expectation over sampling, exactly.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from pfl_theory import oracle_methods as om
from verification.worst_case.pep import PEPClient

#: N ≤ 4 and C(N, S)^T ≤ this many paths (each costs a client's round in the PEP)
MAX_PATHS = 36


class NoiseLedger:
    """Which noise points each leaf point of one PEP depends on (module docstring): leaves
    created before the first noise depend on none, a noise on itself, a gradient on what its
    argument depends on; any other leaf is untraced (``None``).  :meth:`finalize` (called by
    :func:`verification.worst_case.pep.solve`) adds E⟨e, v⟩ = 0 for every leaf v created
    after the noise e whose dependencies are all noises created before e."""

    def __init__(self, pep: Any):
        self.pep = pep
        self.deps: dict[int, frozenset | None] = {}
        self.noises: list[tuple[Any, int]] = []   # (point, its index among the leaves)
        self.first = None
        self.done = False
        pep._pflt_finalize = self.finalize

    @classmethod
    def of(cls, pep: Any) -> "NoiseLedger":
        ledger = getattr(pep, "_pflt_noise_ledger", None)
        if ledger is None:
            ledger = cls(pep)
            pep._pflt_noise_ledger = ledger
        return ledger

    def depends(self, point: Any) -> frozenset | None:
        """The noise points (by id) ``point`` depends on, or None if it cannot be traced."""
        from PEPit import Point

        out: set = set()
        leaves = Point.list_of_leaf_points
        for leaf in point.decomposition_dict:
            d = self.deps.get(id(leaf))
            if d is None:
                if self.first is None or _index(leaves, leaf) < self.first:
                    d = frozenset()          # created before any noise: deterministic past
                else:
                    return None
            out |= d
        return frozenset(out)

    def gradient(self, g: Any, x: Any) -> None:
        """Record that the leaf gradient ``g`` is a function of ``x``."""
        if g.get_is_leaf() and id(g) not in self.deps:
            self.deps[id(g)] = self.depends(x)

    def noise(self, e: Any) -> None:
        from PEPit import Point

        idx = len(Point.list_of_leaf_points) - 1
        if self.first is None:
            self.first = idx
        self.deps[id(e)] = frozenset({id(e)})
        self.noises.append((e, idx))

    def finalize(self) -> int:
        """Add the constraints of the class docstring once; returns how many were added."""
        from PEPit import Point

        if self.done:
            return 0
        self.done = True
        leaves = list(Point.list_of_leaf_points)
        added = 0
        for k, (e, idx) in enumerate(self.noises):
            before = frozenset(id(n) for n, _ in self.noises[:k])
            for v in leaves[idx + 1:]:
                d = self.deps.get(id(v))
                if d is not None and d <= before:
                    self.pep.add_constraint(e * v == 0)
                    added += 1
        return added


def _index(leaves: list, leaf: Any) -> int:
    for i, v in enumerate(leaves):
        if v is leaf:
            return i
    return len(leaves)


def unbiased_noise(pep: Any, variance: float):
    """A new point e with E‖e‖² ≤ ``variance`` and E⟨e, v⟩ = 0 for every leaf point v
    created before it (the module docstring's formulation); the later points that are
    functions of its past are added by :class:`NoiseLedger` before the solve."""
    from PEPit import Point

    past = list(Point.list_of_leaf_points)
    e = Point()
    for v in past:
        pep.add_constraint(e * v == 0)
    pep.add_constraint(e ** 2 <= variance)
    NoiseLedger.of(pep).noise(e)
    return e


class StochasticClient(PEPClient):
    """A client whose method-side oracles are random: ``grad`` adds unbiased noise of
    variance ``grad_variance`` (None: exact), ``prox`` is inexact by ``inexact``:
    ``None`` (exact), ``("gradient", ν_tot)`` (E‖∇h(θ̃)‖² ≤ ν_tot, PEPit's
    ``inexact_proximal_step``) or ``("distance", δ²)`` (E‖θ̃ − θ̂‖² ≤ δ²).  The metric
    uses plain :class:`PEPClient` on the same function."""

    def __init__(self, fn: Any, pep: Any, *, grad_variance: float | None = None,
                 inexact: tuple[str, float] | None = None):
        super().__init__(fn)
        self.pep, self.grad_variance, self.inexact = pep, grad_variance, inexact

    def grad(self, x):
        g = self.fn.gradient(x)
        if self.grad_variance is None:
            return g
        NoiseLedger.of(self.pep).gradient(g, x)
        return g + unbiased_noise(self.pep, self.grad_variance)

    def prox(self, x, step: float):
        if self.inexact is None:
            return super().prox(x, step)
        kind, level = self.inexact
        if kind == "distance":
            from PEPit import Point

            d = Point()
            self.pep.add_constraint(d ** 2 <= level)
            return super().prox(x, step) + d
        from PEPit.primitive_steps import inexact_proximal_step

        theta, _, _, _, _, _, eps = inexact_proximal_step(x, self.fn, step, opt="PD_gapII")
        # θ̃ = x − step·g + e, ‖e‖²/2 ≤ eps and ∇h(θ̃) = e/step: ‖∇h‖² ≤ ν_tot ⇔ eps ≤ step²ν_tot/2
        self.pep.add_constraint(eps <= step ** 2 * level / 2.0)
        return theta


def grad_variance(s) -> float | None:
    """The per-call variance V/|D| of a setting's stochastic gradients, or None (exact:
    ``noise_sq`` None; V = 0 keeps the noise points, forced to zero) where the method has
    no stochastic gradient call (pFedMe with the exact prox: the
    noise enters through the inner solve, :func:`inexact_criterion`)."""
    if s.noise_sq is None or (s.method == "pfedme" and s.inner is None):
        return None
    return s.noise_sq / s.batch_size


def inexact_criterion(s) -> tuple[str, float] | None:
    """pFedMe's inner-solution criterion of the module docstring (None: the exact prox)."""
    if s.method != "pfedme" or s.inner is not None:
        return None
    if s.delta_sq is not None:
        return ("distance", s.delta_sq)
    if s.noise_sq is not None:
        return ("gradient", 2.0 * (s.inner_accuracy + s.noise_sq / s.batch_size))
    if s.inner_accuracy > 0:
        return ("gradient", s.inner_accuracy)
    return None


def method_clients(pep: Any, fns: list, s) -> list[PEPClient]:
    """The clients the method calls: stochastic/inexact where ``s`` says so."""
    return [StochasticClient(f, pep, grad_variance=grad_variance(s),
                             inexact=inexact_criterion(s)) for f in fns]


def subsets(s) -> list[tuple[int, ...]]:
    """Every client subset of a round (one: all clients, when S = N)."""
    S = s.clients if s.sampled is None else s.sampled
    return list(itertools.combinations(range(s.clients), S))


def path_count(s, rounds: int | None = None) -> int:
    """C(N, S)^T: how many sampling paths the PEP enumerates."""
    T = s.rounds if rounds is None else rounds
    return math.comb(s.clients, s.clients if s.sampled is None else s.sampled) ** T


def tree(clients: list, w0: Any, s, round_fn, rounds: int) -> list[list[Any]]:
    """Every path w⁰, w¹, … w^T of the sampled method (prefixes shared: one round per tree
    node); ``round_fn(subset_clients, w)`` is one round on the sampled clients."""
    paths = [[w0]]
    for _ in range(rounds):
        paths = [p + [round_fn([clients[i] for i in sub], p[-1])]
                 for p in paths for sub in subsets(s)]
    return paths


def levels(paths: list[list[Any]]) -> list[list[Any]]:
    """The distinct nodes at each depth (each carries equal probability)."""
    out = []
    for t in range(len(paths[0])):
        seen, nodes = set(), []
        for p in paths:
            if id(p[t]) not in seen:
                seen.add(id(p[t]))
                nodes.append(p[t])
        out.append(nodes)
    return out


def bound_delta_sq(s) -> float:
    """The δ² a theorem's bound is evaluated with: ``delta_sq`` when given, else Lemma 1's
    2(γ_f²/|D| + ν)/(λ+μ)² (λ − L for the non-convex class) with γ_f² = ``noise_sq``
    (:func:`pfl_theory.pfedme.lemma1_delta_sq`); 0 without randomness in the inner solve
    (with ``--prox steps``, ν of the K steps is not known: the noise part only, the
    smallest value the theorem allows)."""
    from pfl_theory import pfedme

    if s.method != "pfedme":
        return 0.0
    if s.delta_sq is not None:
        return float(s.delta_sq)
    if s.noise_sq is None and s.inner_accuracy == 0:
        return 0.0
    case = {"L": s.L} if s.mu is None else {"mu": s.mu}
    return pfedme.lemma1_delta_sq(lam=s.lam, gamma_f_sq=s.noise_sq or 0.0,
                                  batch_size=s.batch_size, nu=s.inner_accuracy, **case)
