"""The verdict of a ``worst_case`` check: measured ≤ worst case ≤ bound.

Three numbers on the same parameters: ``measured`` (the engine on a concrete instance of the
class), ``worst`` (the PEP worst case over the whole class: exact, or a valid upper bound
of it when ``exact`` is False — the one-round recursion unrolled) and ``bound`` (the paper's
right-hand side).  Two ratios: bound/worst (the theorem's own looseness) and worst/measured
(how easy the instance was).

* FAILS if measured > bound (a refuted bound on an instance);
* FAILS if measured > worst (the PEP does not describe what the engine runs);
* FAILS if worst > bound and the worst case is exact: a counterexample over the class (the
  worst-case instance is saved by the caller);
* INCONCLUSIVE if worst > bound but the worst case is only an upper bound of it;
* HOLDS otherwise.  A loose bound is *not* a failure: its looseness is the ratio.

``rel_tol`` absorbs the solver's accuracy: :func:`solver_rel_tol` reads it from the solves
themselves (the relative gap between the dual certificate and the primal value the solver
reports), so that a 2 % violation cannot pass under a fixed 2 % margin (issue 41).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, Callable

from verification.core.registry import Context, Outcome, Verdict
from verification.worst_case.pep import PEPUnavailable


def solver_rel_tol(*solved: Any, floor: float = 1e-9) -> float:
    """The solver's reported accuracy over one or more solves (``Solved``): the largest
    relative gap |dual − primal| / |dual| between the worst-case certificate and the value
    attained by the Gram matrix found — how far the reported worst case can be from the
    problem's value by the solver's own account — and at least ``floor`` (double-precision
    round-off of an SDP of this size)."""
    gaps = [abs(s.value - s.primal) / max(abs(s.value), 1e-300) for s in solved]
    return max([float(floor), *gaps])


def worst_case_outcome(*, measured: float, worst: float, bound: float, exact: bool,
                       rel_tol: float, detail: str = "", extra: dict[str, Any] | None = None,
                       figures: tuple[str, ...] = (), measured_se: float = 0.0) -> Outcome:
    """The :class:`Outcome` of the rules above (``measured`` = the PEP worst case so that
    the report's measured/bound columns compare the class with the theorem; the engine's
    value is in ``extra['measured_engine']``).  ``measured_se``: the standard error of a
    mean over seeds (stochastic runs); the engine is then "above" a value only when
    mean − 3·se is (a one-sided 3σ test: a false FAILS ~1 in 700)."""
    measured, worst, bound = float(measured), float(worst), float(bound)
    measured_se = float(measured_se)
    if not (math.isfinite(measured_se) and measured_se >= 0):
        raise ValueError(f"measured_se must be finite and >= 0, got {measured_se}")
    if not all(math.isfinite(v) for v in (measured, worst, bound)):
        raise ValueError(f"worst-case check got a non-finite value: measured={measured}, "
                         f"worst={worst}, bound={bound}")
    slack = 1.0 + rel_tol
    looseness = bound / worst if worst > 0 else math.inf
    easiness = worst / measured if measured > 0 else math.inf
    reasons = []
    low = measured - 3.0 * measured_se
    if low > bound * slack:
        reasons.append("measured above the bound")
    if low > worst * slack:
        reasons.append("measured above the PEP worst case (the PEP misses the engine)")
    verdict = Verdict.HOLDS
    if reasons:
        verdict = Verdict.FAILS
    elif worst > bound * slack:
        verdict = Verdict.FAILS if exact else Verdict.INCONCLUSIVE
        reasons.append("exact worst case above the bound: a counterexample" if exact else
                       "valid upper bound on the worst case above the bound: undecided")
    label = "exact" if exact else "valid, not exact"
    shown = (f"{measured:.4g} ± {measured_se:.2g} (mean ± se)" if measured_se
             else f"{measured:.4g}")
    line = (f"measured {shown} <= worst case {worst:.4g} ({label}) <= bound "
            f"{bound:.4g}? bound/worst {looseness:.3g} (theorem's looseness), worst/measured "
            f"{easiness:.3g} (instance's easiness)")
    if reasons:
        line += "; " + "; ".join(reasons)
    info = {"measured_engine": measured, "measured_se": measured_se, "worst_case": worst,
            "bound": bound, "exact": exact,
            # results.json is strict JSON: a ratio with a zero denominator is null there
            "looseness": looseness if math.isfinite(looseness) else None,
            "easiness": easiness if math.isfinite(easiness) else None, **dict(extra or {})}
    return Outcome(measured=worst, theoretical=bound, holds=verdict is Verdict.HOLDS,
                   verdict=None if verdict in (Verdict.HOLDS, Verdict.FAILS) else verdict,
                   detail=f"{line}; {detail}" if detail else line, tightness=looseness,
                   figures=tuple(figures), extra=info)


def upper_bound_grid_outcome(measured: Any, bound: Any, *, detail: str = "",
                             extra: dict[str, Any] | None = None,
                             figures: tuple[str, ...] = ()) -> Outcome:
    """Outcome of an upper bound (hidden constants 1) checked on a grid: HOLDS iff
    measured_j <= bound_j at every grid point; the reported pair is the grid point where
    the bound is tightest (largest measured/bound = C), so tightness = 1/C.  The spread of
    measured/bound along the grid is reported, never a verdict: a bound whose shape falls
    slower than the measurement is loose, not refuted (issue 24)."""
    import numpy as np

    from verification.core.registry import bound_outcome

    m = np.asarray(measured, dtype=float).ravel()
    b = np.asarray(bound, dtype=float).ravel()
    if m.shape != b.shape or m.size < 1 or not (np.all(np.isfinite(m)) and np.all(b > 0)):
        raise ValueError("need finite measured and positive bound values of equal length")
    ratio = m / b
    j = int(np.argmax(ratio))
    spread = float(ratio.max() / ratio.min()) if ratio.min() > 0 else math.inf
    info = {"C": float(ratio.max()), "C_min": float(ratio.min()), "spread": spread,
            "ratios": ratio.tolist(), "tightest_index": j, **dict(extra or {})}
    line = (f"upper bound (constants 1) at every grid point? max measured/bound C = "
            f"{ratio.max():.4g}, min {ratio.min():.4g}: looseness ranges {1 / ratio.max():.3g}"
            f"… {1 / ratio.min():.3g} (spread {spread:.3g})")
    return bound_outcome(m[j], b[j], detail=f"{line}; {detail}" if detail else line,
                         figures=figures, extra=info)


def needs_pep(fn):
    """A worst_case check that reports NOT RUN with the install hint without PEPit."""
    def run(ctx: Context) -> Outcome:
        try:
            return fn(ctx)
        except PEPUnavailable as exc:   # numbers required by the kind; strict JSON: no NaN
            return Outcome(measured=0.0, theoretical=0.0, holds=False, tightness=math.inf,
                           verdict=Verdict.NOT_RUN, detail=f"not run: {exc}",
                           extra={"not_run_reason": str(exc)})
    run.__name__, run.__qualname__, run.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    return run


def with_instance(out: Outcome, ctx: Context, name: str, *, reduced: Callable[[], Any],
                  cls: Any, replay: Callable[[dict], float]) -> Outcome:
    """A counterexample (exact worst case above the bound) made concrete: ``reduced()``
    re-solves the PEP with the dimension reduction, the instance (class ``cls``: ``mu``,
    ``L``) is extracted, saved to ``ctx.out_dir/<name>_counterexample.json`` and, when it is
    a quadratic, ``replay(data)`` runs it through the engine (its metric is reported)."""
    from verification.worst_case import counterexample

    if "counterexample" not in out.detail:
        return out
    data = counterexample.extract(reduced(), cls)
    note = (f"worst-case instance: rank {data['rank']}, "
            f"{'a quadratic' if data['quadratic'] else 'not a quadratic'} (fit residual "
            f"{data['fit_residual']:.2g})")
    extra = {"instance_rank": data["rank"], "instance_quadratic": data["quadratic"]}
    if data["quadratic"]:
        extra["replayed"] = replay(data)
        note += f", replayed through the engine: {extra['replayed']:.6g}"
    if ctx.out_dir is not None:
        path = counterexample.save(data, Path(ctx.out_dir) / f"{name}_counterexample.json")
        note += f", saved to {path.name}"
        extra["instance_file"] = str(path)
    return dataclasses.replace(out, detail=f"{out.detail}; {note}",
                               extra={**out.extra, **extra})
