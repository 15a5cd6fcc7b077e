"""verification.worst_case.pep.solve: a Clarabel failure falls back to SCS (issue 37).

Clarabel fails on some CPUs (BLAS rounding) in the solve or in PEPit's dimension-reduction
re-solve; both failures are forced here with a monkeypatch, so the fallback is tested on any
machine.  Mutation that FAILS these tests: ``fallback`` ignored (the failure propagates)."""

from __future__ import annotations

import pytest

pytest.importorskip("PEPit")
cvxpy = pytest.importorskip("cvxpy")

from verification.worst_case import pep as pep_module  # noqa: E402
from verification.worst_case.pep import PEPClient, SolverFailed, solve  # noqa: E402

MU, L, ETA = 0.1, 1.0, 1.5
#: one GD step on S(μ, L): max(|1−ημ|, |1−ηL|)² (Taylor, Hendrickx, Glineur 2017); SCS
#: reaches ~1e-5 relative at eps 1e-8 on this 4×4 SDP (1e-4 kept)
EXPECTED = max(abs(1 - ETA * MU), abs(1 - ETA * L)) ** 2
SCS_REL = 1e-4


def _gd_pep():
    import PEPit
    from PEPit.functions import SmoothStronglyConvexFunction

    pep = PEPit.PEP()
    fn = pep.declare_function(SmoothStronglyConvexFunction, mu=MU, L=L)
    x_star = fn.stationary_point()
    x0 = pep.set_initial_point()
    pep.set_initial_condition((x0 - x_star) ** 2 <= 1)
    x1 = x0 - ETA * PEPClient(fn).grad(x0)
    pep.set_performance_metric((x1 - x_star) ** 2)
    return pep


@pytest.fixture
def clarabel_fails_in_the_solve(monkeypatch):
    original = cvxpy.Problem.solve

    def failing(self, *args, **kwargs):
        if kwargs.get("solver") == "CLARABEL":
            raise cvxpy.error.SolverError("Solver 'CLARABEL' failed (forced by the test)")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cvxpy.Problem, "solve", failing)


@pytest.fixture
def clarabel_fails_in_the_reduction(monkeypatch):
    """The re-solve (objective Minimize Tr G) returns no Gram matrix, as measured on an AMD
    EPYC host: PEPit then raises AttributeError on ``None.T``."""
    from PEPit.wrappers.cvxpy_wrapper import CvxpyWrapper

    original = CvxpyWrapper.solve

    def failing(self, **kwargs):
        out = original(self, **kwargs)
        if kwargs.get("solver") == "CLARABEL" and isinstance(self.prob.objective,
                                                             cvxpy.Minimize):
            self.optimal_G = None
            return "solver_error", out[1], None
        return out

    monkeypatch.setattr(CvxpyWrapper, "solve", failing)


def test_clarabel_solves_it_without_a_fallback():
    solved = solve(_gd_pep())
    assert solved.solver == "clarabel" and solved.fallback is None
    assert solved.value == pytest.approx(EXPECTED, rel=1e-6)


def test_a_failed_clarabel_solve_is_retried_with_scs(clarabel_fails_in_the_solve):
    solved = solve(_gd_pep())
    assert solved.solver == "scs" and "Clarabel failed: SCS" in solved.status
    assert "SolverError" in solved.fallback
    assert solved.value == pytest.approx(EXPECTED, rel=SCS_REL)


def test_a_failed_dimension_reduction_resolve_is_retried_with_scs(
        clarabel_fails_in_the_reduction):
    solved = solve(_gd_pep(), reduce_dimension=True)
    assert solved.solver == "scs" and "Clarabel failed: SCS" in solved.status
    assert solved.value == pytest.approx(EXPECTED, rel=SCS_REL)
    assert solved.problem.G_value is not None       # the instance can be extracted


def test_without_fallback_the_failure_is_one_named_error(clarabel_fails_in_the_reduction):
    with pytest.raises(SolverFailed, match="clarabel failed"):
        solve(_gd_pep(), reduce_dimension=True, fallback=False)


def test_scs_failing_too_is_not_hidden(monkeypatch, clarabel_fails_in_the_solve):
    original = pep_module._solve_once

    def scs_fails(problem, solver, reduce_dimension):
        if solver == "scs":
            raise SolverFailed("scs failed (forced)")
        return original(problem, solver, reduce_dimension)

    monkeypatch.setattr(pep_module, "_solve_once", scs_fails)
    with pytest.raises(SolverFailed, match="scs failed"):
        solve(_gd_pep())
