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
    fallback: str | None = None   # why Clarabel's answer was replaced by SCS's, if it was


#: statuses with a usable solution; anything else from Clarabel (a SolverError, an
#: 'infeasible'/'unbounded_inaccurate' claim on a PEP, or no Gram matrix in PEPit's
#: dimension-reduction re-solve) is a solver failure, retried with SCS
SOLVED_STATUSES = ("optimal", "optimal_inaccurate")


class SolverFailed(ArithmeticError):
    """The SDP solver returned no usable solution (one line: solver, stage, status)."""


def _solve_once(problem: Any, solver: str, reduce_dimension: bool) -> Solved:
    """One PEPit solve with ``solver``; :class:`SolverFailed` when the solver (in the main
    solve or in the trace re-solve of the dimension reduction) returns no solution."""
    from PEPit import Point

    kwargs = {"solver": solver.upper()}
    if solver == "scs":
        kwargs.update(eps_abs=1e-8, eps_rel=1e-8, max_iters=100_000)
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")   # the status is reported in Solved.status instead
            dual = problem.solve(wrapper="cvxpy", verbose=0, return_primal_or_dual="dual",
                                 dimension_reduction_heuristic="trace" if reduce_dimension
                                 else None, **kwargs)
    except Exception as exc:
        # cvxpy.error.SolverError (Clarabel's numerical failure), or PEPit post-processing a
        # re-solve that left no Gram matrix (AttributeError on None): both are the solver's
        wrapper = getattr(problem, "wrapper", None)
        prob = getattr(wrapper, "prob", None)
        status = getattr(prob, "status", None)
        no_solution = getattr(wrapper, "optimal_G", None) is None
        if type(exc).__name__ == "SolverError" or no_solution or status not in SOLVED_STATUSES:
            raise SolverFailed(f"{solver} failed ({type(exc).__name__}, status {status})") \
                from exc
        raise
    seconds = time.perf_counter() - start
    wrapper = problem.wrapper
    status = str(wrapper.prob.status)
    if dual is None:
        if status.startswith("unbounded") and status != "unbounded_inaccurate":
            raise ArithmeticError("the PEP is unbounded: no finite worst case")
        raise SolverFailed(f"{solver} failed (status {status})")
    if status not in SOLVED_STATUSES:
        raise SolverFailed(f"{solver} failed (status {status})")
    primal = float(wrapper.objective.value)
    return Solved(float(dual), primal, solver, status, seconds, Point.counter, problem)


def solve(problem: Any, *, solver: str = "clarabel", reduce_dimension: bool = False,
          fallback: bool = True) -> Solved:
    """Solve ``problem`` with Clarabel (default; interior point, ~1e-8) or SCS (first
    order, ~1e-5) through cvxpy; ``reduce_dimension``: PEPit's trace heuristic afterwards
    (a low-rank worst-case instance, same value).  With ``fallback`` a Clarabel failure —
    in the solve or in the dimension-reduction re-solve; which one depends on the CPU's
    BLAS rounding (issue 37: an AMD EPYC host fails two PEPs that an Intel one solves) —
    is retried with SCS, and the status says so (``"… (Clarabel failed: SCS)"``)."""
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    require_pepit()
    finalize = getattr(problem, "_pflt_finalize", None)
    if finalize is not None:   # constraints known only once every point exists (stochastic.py)
        finalize()
    try:
        return _solve_once(problem, solver, reduce_dimension)
    except SolverFailed as exc:
        if not fallback or solver != "clarabel":
            raise
        reason = str(exc)
    solved = _solve_once(problem, "scs", reduce_dimension)
    solved.status += " (Clarabel failed: SCS)"
    solved.fallback = reason
    return solved
