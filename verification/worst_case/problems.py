"""Performance-estimation problems of the papers' methods (exact worst cases at fixed sizes).

Every method is the oracle form of :mod:`pfl_theory.oracle_methods` run on PEPit points
(:class:`verification.worst_case.pep.PEPClient`); the clients are ``N`` functions of the
class of the theorem — μ-strongly convex and L-smooth (A1(a) of pFedMe), L-smooth
(A1(b)), convex — and the initial conditions those of the theorems:

* ``‖w⁰ − w*‖² ≤ Δ₀`` (Theorem 1) or ``F(w⁰) − F(w_T) ≤ Δ_F`` (Theorem 2: F(w_T) ≥ F*,
  so this relaxes F(w⁰) − F* ≤ Δ_F and the worst case found is an upper bound of the
  theorem's one);
* heterogeneity σ²_{F,1} = (1/N)Σ‖∇F_i(w*)‖² ≤ σ² (pFedMe Lemma 2(a)), with the gradients
  at the optimum *parametrised* so that they sum to zero by construction
  (h_N = −Σ_{i<N} h_i, θ*_i = w* − h_i/λ): imposing Σ∇F_i(w*) = 0 as a constraint leaves
  no strictly feasible point (Clarabel "optimal_inaccurate", minutes); σ² = 0 declares w*
  stationary for every client instead (the homogeneous case, where N = 2 equals N = 3 by
  symmetry of the agents; tested).

The randomness of the theorems (gradient noise, inexact personal solutions, client sampling
S of N) enters through :mod:`verification.worst_case.stochastic`: the method runs on its
stochastic clients over every sampling path, the metric is evaluated with the exact
oracles and averaged over the paths.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pfl_theory import oracle_methods as om
from verification.worst_case import pep as pep_module
from verification.worst_case import stochastic
from verification.worst_case.pep import PEPClient, Solved, solve, zero_point

METRICS = ("gap_avg", "gap_mean", "dist", "grad_sq_avg")


@dataclass(frozen=True)
class Setting:
    """One federated PEP: ``method`` ∈ {"pfedme", "fedavg"}; sizes N (``clients``),
    T (``rounds``), R (``local_rounds``); pFedMe's λ, η, β and inner solve (``inner`` =
    None: exact prox, or (K, η_p)); the class (μ, L; ``mu=None``: L-smooth non-convex);
    Δ₀ and σ²; the randomness (:mod:`verification.worst_case.stochastic`):
    ``noise_sq`` γ_f² (per-sample gradient variance; None: exact gradients, 0: the noisy
    formulation at zero variance), ``batch_size`` |D|, ``inner_accuracy`` ν (eq. 8),
    ``delta_sq`` δ² (Lemma 1's criterion directly), ``sampled`` S (None: S = N);
    ``identical``: one function for every client (the homogeneous setting of Local SGD,
    Glasgow et al. 2022: the clients differ only by their independent noise);
    ``lower_value``: Theorem 2's F(w⁰) − F* ≤ Δ_F through a value below every evaluated one
    (:func:`_below_every_value`) besides the relaxed F(w⁰) − F(w_T) ≤ Δ_F."""

    method: str = "pfedme"
    clients: int = 2
    rounds: int = 3
    local_rounds: int = 5
    lr: float = 0.05
    lam: float = 15.0
    beta: float = 1.0
    mu: float | None = 0.1
    L: float = 1.0
    inner: tuple[int, float] | None = None
    sigma_sq: float = 0.0
    Delta0: float = 1.0
    noise_sq: float | None = None
    batch_size: int = 1
    inner_accuracy: float = 0.0
    delta_sq: float | None = None
    sampled: int | None = None
    identical: bool = False
    lower_value: bool = False

    def __post_init__(self):
        if self.method not in ("pfedme", "fedavg"):
            raise ValueError(f"method must be 'pfedme' or 'fedavg', got {self.method!r}")
        if self.identical and self.sigma_sq != 0:
            raise ValueError("identical clients have no heterogeneity: sigma_sq must be 0")

    @property
    def stochastic(self) -> bool:
        """Whether any randomness of the theorems is modelled (then the worst case is the
        expected-Gram relaxation: valid, not exact, unless only sampling is on)."""
        return (self.noise_sq is not None or self.inner_accuracy > 0
                or self.delta_sq is not None or self.relaxed_by_sampling)

    @property
    def relaxed_by_sampling(self) -> bool:
        return self.sampled is not None and self.sampled < self.clients

    @property
    def exact_expectation(self) -> bool:
        """True when the PEP's expectation is exact: no noise or inexactness (sampling is
        enumerated exactly)."""
        return (self.noise_sq is None and self.inner_accuracy == 0
                and self.delta_sq is None)

    @property
    def mu_F(self) -> float:
        """Envelope strong convexity λμ/(λ+μ) (pFedMe Proposition 1; exact)."""
        return self.lam * self.mu / (self.lam + self.mu)

    @property
    def L_F_exact(self) -> float:
        """Exact envelope smoothness λL/(λ+L) (conjugate duality; the paper uses L_F = λ)."""
        return self.lam * self.L / (self.lam + self.L)

    @property
    def eta_eff(self) -> float:
        """Effective per-round step ηβR (the α_t reading of docs/formulas.md §B.6)."""
        return self.lr * self.beta * self.local_rounds


def _declare(pep, s: Setting):
    from PEPit.functions import SmoothFunction, SmoothStronglyConvexFunction

    count = 1 if s.identical else s.clients
    if s.mu is None:
        fns = [pep.declare_function(SmoothFunction, L=s.L) for _ in range(count)]
    else:
        fns = [pep.declare_function(SmoothStronglyConvexFunction, mu=s.mu, L=s.L)
               for _ in range(count)]
    return fns * s.clients if s.identical else fns


def _optimum(pep, fns, s: Setting):
    """w* and F* (mean envelope value for pFedMe, mean f for FedAvg) with the
    heterogeneity constraint parametrised as in the module docstring."""
    from PEPit import Expression, Point

    w_star = pep.set_initial_point()
    envelope = s.method == "pfedme"
    if s.sigma_sq == 0 or s.identical:
        vals = {id(f): Expression() for f in fns}
        for f in {id(f): f for f in fns}.values():
            f.add_point((w_star, zero_point(), vals[id(f)]))
        return w_star, om.average([vals[id(f)] for f in fns])
    hs = [Point() for _ in range(s.clients - 1)]
    total = hs[0]
    for h in hs[1:]:
        total = total + h
    hs.append(-1.0 * total)                 # Σ h_i = 0 by construction
    vals = []
    for f, h in zip(fns, hs):
        v = Expression()
        theta = w_star - (1.0 / s.lam) * h if envelope else w_star
        f.add_point((theta, h, v))
        vals.append(v + (0.5 / s.lam) * h ** 2 if envelope else v)
    pep.add_constraint(om.average([h ** 2 for h in hs]) <= s.sigma_sq)
    return w_star, om.average(vals)


def _round(clients, w, s: Setting):
    if s.method == "pfedme":
        return om.pfedme_round(clients, w, lam=s.lam, lr=s.lr, local_rounds=s.local_rounds,
                               beta=s.beta, inner=s.inner)
    return om.fedavg_round(clients, w, lr=s.lr, local_steps=s.local_rounds)


def objective(clients, w, s: Setting):
    """F(w) = mean envelope value (pFedMe) or mean f (FedAvg)."""
    if s.method == "pfedme":
        return om.average([om.envelope_value(c, w, s.lam) for c in clients])
    return om.average([c.value(w) for c in clients])


def gradient(clients, w, s: Setting):
    """∇F(w) (pFedMe: mean λ(w − θ̂_i(w)), eq. 6; FedAvg: mean ∇f_i)."""
    if s.method == "pfedme":
        return om.average([om.envelope_grad(c, w, s.lam) for c in clients])
    return om.average([c.grad(w) for c in clients])


def alpha_weights(T: int, eta: float, mu_F: float) -> list[float]:
    """Theorem 1's averaging weights α_t = (1 − ημ_F/2)^{−(t+1)}, t = 0 … T−1, normalised
    (computed relative to the last one, finite for any T)."""
    a = 1.0 - eta * mu_F / 2.0
    if not 0.0 < a < 1.0:
        raise ValueError(f"need 0 < 1 - eta*mu_F/2 < 1, got {a}")
    logs = [-(t + 1) * math.log(a) for t in range(T)]
    ws = [math.exp(x - logs[-1]) for x in logs]
    return [w / sum(ws) for w in ws]


def federated(s: Setting, metric: str, *, solver: str = "clarabel",
              reduce_dimension: bool = False) -> Solved:
    """The worst case of ``metric`` after ``s.rounds`` rounds:

    * ``gap_avg``: F(w̄_T) − F* with w̄_T = Σ_{t<T} α_t w^t / Σα_t (pFedMe Theorem 1(a),
      α_t with the effective step ηβR), over ‖w⁰ − w*‖² ≤ Δ₀;
    * ``dist``: ‖w^T − w*‖², over ‖w⁰ − w*‖² ≤ Δ₀;
    * ``gap_mean``: F(mean_{1≤t≤T} w^t) − F*, over ‖w⁰ − w*‖² ≤ Δ₀ (the averaged global
      model; Local SGD's rate);
    * ``grad_sq_avg``: (1/T)Σ_{t<T}‖∇F(w^t)‖² (Theorem 2(a), t* uniform), over
      F(w⁰) − F(w^T) ≤ Δ₀ (= Δ_F)."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    PEPit = pep_module.require_pepit()
    pep = PEPit.PEP()
    fns = _declare(pep, s)
    clients = [PEPClient(f) for f in fns]          # exact oracles: the metric
    w_star, f_star = _optimum(pep, fns, s) if metric != "grad_sq_avg" else (None, None)
    w0 = pep.set_initial_point()
    paths = _paths(pep, fns, w0, s, s.rounds)
    nodes = stochastic.levels(paths)
    if metric == "grad_sq_avg":
        end = om.average([objective(clients, w, s) for w in nodes[-1]])
        start = objective(clients, w0, s)
        pep.set_initial_condition(start - end <= s.Delta0)
        grads = [om.average([gradient(clients, w, s) ** 2 for w in level])
                 for level in nodes[:-1]]
        if s.lower_value:
            _below_every_value(pep, fns, start, s)
        pep.set_performance_metric(om.average(grads))
        return solve(pep, solver=solver, reduce_dimension=reduce_dimension)
    pep.set_initial_condition((w0 - w_star) ** 2 <= s.Delta0)
    if metric == "dist":
        pep.set_performance_metric(om.average([(w - w_star) ** 2 for w in nodes[-1]]))
    elif metric == "gap_mean":
        pep.set_performance_metric(om.average([objective(clients, om.average(p[1:]), s)
                                               for p in paths]) - f_star)
    else:
        alphas = alpha_weights(s.rounds, s.eta_eff, s.mu_F)
        gaps = []
        for p in paths:
            w_bar = alphas[0] * p[0]
            for a, w in zip(alphas[1:], p[1:-1]):
                w_bar = w_bar + a * w
            gaps.append(objective(clients, w_bar, s) - f_star)
        pep.set_performance_metric(om.average(gaps))
    solved = solve(pep, solver=solver, reduce_dimension=reduce_dimension)
    solved.handles = {"functions": fns, "w0": w0, "w_star": w_star}
    return solved


def _below_every_value(pep, fns, start, s: Setting) -> None:
    """Theorem 2's own initial condition F(w⁰) − F* ≤ Δ_F beside the relaxed one: a value
    f_low ≤ f(θ) at every point the PEP evaluates (F* = min f ≤ each; the envelope's
    minimum equals f's) with F(w⁰) − f_low ≤ Δ_F — valid for every instance, so the worst
    case stays an upper bound, and tighter where the method's errors push F up."""
    from PEPit import Expression

    f_low = Expression()
    for f in {id(f): f for f in fns}.values():
        for _, _, value in f.list_of_points:
            pep.add_constraint(f_low <= value)
    pep.add_constraint(start - f_low <= s.Delta0)


def _paths(pep, fns, w0, s: Setting, rounds: int) -> list[list]:
    """Every sampling path of ``rounds`` rounds of the method on its (stochastic) clients."""
    method = stochastic.method_clients(pep, fns, s)
    return stochastic.tree(method, w0, s, lambda cs, w: _round(cs, w, s), rounds)


def one_round_rate(s: Setting, *, solver: str = "clarabel") -> float:
    """ρ: the exact worst one-round contraction E‖w¹ − w*‖² / ‖w⁰ − w*‖² with σ² = 0, exact
    gradients and personal solutions (client sampling kept)."""
    return federated(replace(s, rounds=1, sigma_sq=0.0, Delta0=1.0, noise_sq=None,
                             inner_accuracy=0.0, delta_sq=None), "dist", solver=solver).value


def one_round_offset(s: Setting, rho: float, *, solver: str = "clarabel",
                     sigma_sq: float = 1.0) -> float:
    """c(ρ) = sup E‖w¹ − w*‖² − ρ‖w⁰ − w*‖² over σ²_{F,1} ≤ ``sigma_sq`` with the
    setting's noise, inexactness and sampling: then E‖w^{t+1} − w*‖² ≤ ρE‖w^t − w*‖² + c
    for every round (valid for ρ ≥ the homogeneous rate; +∞ below it).  With the default
    ``sigma_sq = 1`` and no noise, c scales with σ² (the offset per unit σ²)."""
    PEPit = pep_module.require_pepit()
    pep = PEPit.PEP()
    one = replace(s, rounds=1, sigma_sq=sigma_sq)
    fns = _declare(pep, one)
    w_star, _ = _optimum(pep, fns, one)
    w0 = pep.set_initial_point()
    ends = [p[-1] for p in _paths(pep, fns, w0, one, 1)]
    pep.set_performance_metric(om.average([(w1 - w_star) ** 2 for w1 in ends])
                               - rho * (w0 - w_star) ** 2)
    return max(solve(pep, solver=solver).value, 0.0)


def unrolled_distances(rho: float, c: float, s: Setting, T: int, *,
                       per_unit_sigma: bool = True) -> list[float]:
    """e_t ≤ ρ^t Δ₀ + C(1 − ρ^t)/(1 − ρ), t = 0 … T, with C = cσ² (``c`` per unit σ²)
    or C = c (``per_unit_sigma=False``: c already at the setting's σ², noise, δ²) — the
    one-round recursion unrolled: a valid, not exact, bound on the worst E‖w^t − w*‖²."""
    C = c * s.sigma_sq if per_unit_sigma else c
    out = []
    for t in range(T + 1):
        geo = t if rho == 1 else (1 - rho ** t) / (1 - rho)
        out.append(rho ** t * s.Delta0 + C * geo)
    return out


def unrolled_gap_avg(rho: float, c: float, s: Setting, T: int, *,
                     per_unit_sigma: bool = True) -> float:
    """Valid bound on the worst E F(w̄_T) − F* from the unrolled distances:
    F(w) − F* ≤ L/2‖w − w*‖² (L = λL/(λ+L) for the envelope) and
    ‖w̄_T − w*‖_{L²} ≤ Σ ᾱ_t ‖w^t − w*‖_{L²} (Minkowski: the triangle inequality of the
    root mean square, so the bound holds in expectation too)."""
    e = unrolled_distances(rho, c, s, T, per_unit_sigma=per_unit_sigma)
    alphas = alpha_weights(T, s.eta_eff, s.mu_F)
    smooth = s.L_F_exact if s.method == "pfedme" else s.L
    return 0.5 * smooth * sum(a * math.sqrt(x) for a, x in zip(alphas, e[:T])) ** 2


# ------------------------------------------------------------------ single functions
def envelope_constant(*, mu: float, L: float, lam: float, which: str,
                      solver: str = "clarabel") -> float:
    """The exact smoothness (``which="L"``: sup ‖∇F(x) − ∇F(y)‖ / ‖x − y‖) or strong
    convexity (``which="mu"``: inf of the same ratio) of the Moreau envelope F of
    f ∈ S(μ, L) with parameter λ, ∇F by the exact prox (pFedMe eq. 6)."""
    if which not in ("L", "mu"):
        raise ValueError(f"which must be 'L' or 'mu', got {which!r}")
    PEPit = pep_module.require_pepit()
    from PEPit.functions import SmoothStronglyConvexFunction

    pep = PEPit.PEP()
    f = PEPClient(pep.declare_function(SmoothStronglyConvexFunction, mu=mu, L=L))
    x, y = pep.set_initial_point(), pep.set_initial_point()
    dg = om.envelope_grad(f, x, lam) - om.envelope_grad(f, y, lam)
    if which == "L":
        pep.set_initial_condition((x - y) ** 2 <= 1)
        pep.set_performance_metric(dg ** 2)
        return math.sqrt(solve(pep, solver=solver).value)
    pep.set_initial_condition(dg ** 2 <= 1)
    pep.set_performance_metric((x - y) ** 2)
    return 1.0 / math.sqrt(solve(pep, solver=solver).value)


def gradient_descent(*, mu: float, L: float, eta: float, steps: int,
                     solver: str = "clarabel") -> Solved:
    """Worst ‖x_n − x*‖² of n gradient steps (:func:`pfl_theory.oracle_methods.fedavg_local`
    on one client) over f ∈ S(μ, L), ‖x₀ − x*‖² ≤ 1 (textbook: max(|1−ημ|, |1−ηL|)^{2n})."""
    PEPit = pep_module.require_pepit()
    from PEPit.functions import SmoothStronglyConvexFunction

    pep = PEPit.PEP()
    fn = pep.declare_function(SmoothStronglyConvexFunction, mu=mu, L=L)
    x_star = fn.stationary_point()
    x0 = pep.set_initial_point()
    pep.set_initial_condition((x0 - x_star) ** 2 <= 1)
    xn = om.fedavg_local(PEPClient(fn), x0, lr=eta, local_steps=steps)
    pep.set_performance_metric((xn - x_star) ** 2)
    return solve(pep, solver=solver)


def proximal_point(*, gamma: float, steps: int, solver: str = "clarabel") -> Solved:
    """Worst f(x_n) − f* of n proximal steps x ← prox_{γf}(x)
    (:func:`pfl_theory.oracle_methods.envelope_prox` with λ = 1/γ) over convex f,
    ‖x₀ − x*‖² ≤ 1 (Taylor, Hendrickx, Glineur 2017: exactly 1/(4γn))."""
    PEPit = pep_module.require_pepit()
    from PEPit.functions import ConvexFunction

    pep = PEPit.PEP()
    fn = pep.declare_function(ConvexFunction)
    f = PEPClient(fn)
    x_star = fn.stationary_point()
    x0 = pep.set_initial_point()
    pep.set_initial_condition((x0 - x_star) ** 2 <= 1)
    x = x0
    for _ in range(steps):
        x = om.envelope_prox(f, x, 1.0 / gamma)
    pep.set_performance_metric(f.value(x) - fn.value(x_star))
    return solve(pep, solver=solver)


def largest_contracting_step(s: Setting, *, lo: float = 0.0, hi: float | None = None,
                             iters: int = 12, solver: str = "clarabel") -> float:
    """The largest local step η (bisection, ``iters`` one-round PEPs) with a worst-case
    one-round contraction ρ(η) < 1 in the homogeneous case; ``hi`` defaults to 4/L_F."""
    smooth = s.L_F_exact if s.method == "pfedme" else s.L
    hi = 4.0 / smooth if hi is None else hi
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        if one_round_rate(replace(s, lr=mid), solver=solver) < 1.0 - 1e-9:
            lo = mid
        else:
            hi = mid
    return lo
