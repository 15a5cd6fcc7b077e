"""The PEPit side of the oracle interface, and solving a performance-estimation problem.

A performance-estimation problem (PEP; Drori & Teboulle 2014, Taylor, Hendrickx & Glineur
2017) computes the exact worst case of a first-order method over a function class at fixed
sizes as a small semidefinite program; PEPit (Goujaud et al., PyPI ``pepit``) builds it.
:class:`PEPClient` gives a PEPit function the interface of
:mod:`pfl_theory.oracle_methods`, so the methods written there run unchanged on PEPit's
symbolic points.  PEPit and its solvers are the optional ``[pep]`` extra; everything here
imports them lazily and :func:`require_pepit` says how to install them.
"""

from __future__ import annotations

import contextlib
import io
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

INSTALL_HINT = "PEPit is not installed: install with pip install -e '.[pep]'"
SOLVERS = ("clarabel", "scs")


class PEPUnavailable(ImportError):
    """PEPit (or cvxpy) is missing; the message is the one-line install hint."""


def require_pepit():
    """The ``PEPit`` module, or :class:`PEPUnavailable` with :data:`INSTALL_HINT`."""
    try:
        import cvxpy  # noqa: F401
        import PEPit
    except ImportError as exc:
        raise PEPUnavailable(INSTALL_HINT) from exc
    return PEPit


class PEPClient:
    """A PEPit function as an oracle: ``grad`` = its gradient at a point, ``prox`` = an
    exact proximal step (PEPit's ``proximal_step``: θ = x − s·g with g ∈ ∂f(θ)),
    ``value`` = its value, ``sq_norm`` = the squared norm of a symbolic point."""

    def __init__(self, fn: Any):
        self.fn = fn

    def grad(self, x):
        return self.fn.gradient(x)

    def prox(self, x, step: float):
        from PEPit.primitive_steps import proximal_step

        return proximal_step(x, self.fn, step)[0]

    def value(self, x):
        return self.fn.value(x)

    @staticmethod
    def sq_norm(v):
        return v ** 2


def zero_point():
    """PEPit's zero vector (a point with an empty decomposition: a stationary gradient)."""
    from PEPit import Point

    return Point(is_leaf=False, decomposition_dict=dict())


@dataclass
class Solved:
    """A solved PEP: the worst-case value (the dual certificate: an upper bound on the
    worst case, equal to it up to the solver's accuracy), the primal value (attained by
    the Gram matrix found), the solver, its status, the time, and the problem itself (its
    points can be evaluated after the solve)."""

    value: float
    primal: float
    solver: str
    status: str
    seconds: float
    gram_size: int
    problem: Any = field(repr=False, default=None)
    handles: dict = field(repr=False, default_factory=dict)   # named points / functions


def solve(problem: Any, *, solver: str = "clarabel", reduce_dimension: bool = False) -> Solved:
    """Solve ``problem`` with Clarabel (default; interior point, ~1e-8) or SCS (first
    order, ~1e-5) through cvxpy; ``reduce_dimension``: PEPit's trace heuristic afterwards
    (a low-rank worst-case instance, same value)."""
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    require_pepit()
    from PEPit import Point

    kwargs = {"solver": solver.upper()}
    if solver == "scs":
        kwargs.update(eps_abs=1e-8, eps_rel=1e-8, max_iters=100_000)
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")    # the status is reported in Solved.status instead
        dual = problem.solve(wrapper="cvxpy", verbose=0, return_primal_or_dual="dual",
                             dimension_reduction_heuristic="trace" if reduce_dimension
                             else None, **kwargs)
    seconds = time.perf_counter() - start
    if dual is None:
        raise ArithmeticError("the PEP is unbounded: no finite worst case")
    wrapper = problem.wrapper
    status = str(wrapper.prob.status)
    primal = float(wrapper.objective.value)
    return Solved(float(dual), primal, solver, status, seconds, Point.counter, problem)
