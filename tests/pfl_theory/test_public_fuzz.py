"""Every public function of pfl_theory, fuzzed with hypothesis: arguments drawn from its
signature (numbers at float64's edges — 0, ±1e308, 5e-324, NaN, inf —, integers up to
10**400, empty and ragged lists, arrays of any small shape) never raise OverflowError,
ZeroDivisionError, FloatingPointError or IndexError: an input outside what a function
accepts is a ``ValueError`` (pfl_theory.validation.value_errors; TypeError for an
argument of the wrong kind stays a TypeError).  Before, e.g.
``pfedme.eta_hat_2(lam=1e308, L=1e300)`` raised OverflowError, ``pfedme.min_rounds_theorem1
(lam=1e-308, mu=1e-300, beta=2)`` ZeroDivisionError, ``ppfe_covering.harmonic_mean_size
([10**400])`` OverflowError, and ``cgpfl.e_of_k([], [])`` returned ``[]``."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import signal
import warnings

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

import pfl_theory
from pfl_theory.validation import ARITHMETIC_ERRORS

#: modules without numeric entry points (files, threads, plugins, the formula catalogue,
#: sympy derivations) and functions taking callables or sympy expressions
SKIP_MODULES = {"plugins", "safe_files", "threads", "formulas", "cgpfl_symbolic",
                "oracle_methods"}
SKIP = {"prox", "lemma6_log_covering", "union_bound_deviation", "power_exponents",
        "rate_exponents", "corollary1_derivation", "corollary2_derivation",
        "corollary_derivations", "theorem1a_symbolic", "theorem2a_symbolic",
        "corollary1_beta_symbolic", "align_result", "bic_curve"}

EDGE = [0.0, -1.0, 1.0, 0.5, 2.0, 3.0, 1e-308, 5e-324, 1e308, -1e308, 1e300, 1e-300,
        float("nan"), float("inf"), -float("inf")]
INTS = [0, 1, 2, 3, 5, -1, 10**400]
floats = st.sampled_from(EDGE) | st.floats(allow_nan=True, allow_infinity=True, width=64)
ints = st.sampled_from(INTS) | st.integers(-3, 6)
scalars = floats | ints
arrays = st.builds(lambda rows, cols, fill: np.full((rows, cols), fill),
                   st.integers(0, 3), st.integers(0, 3), st.sampled_from(EDGE[:8]))
anything = (scalars | st.lists(floats, max_size=4) | st.lists(ints, max_size=4) | arrays
            | st.just(np.zeros(0)))


def strategy(annotation) -> st.SearchStrategy:
    a = str(annotation)
    if "bool" in a:
        return st.booleans()
    if "str" in a and "float" not in a:
        return st.sampled_from(["", "x", "relative", "samme", "sqrt(N/T)"])
    if a == "int" or a.startswith("int "):
        return ints
    if "float" in a and "Sequence" not in a and "ndarray" not in a:
        return scalars
    if "Tensor" in a:
        return st.lists(floats, max_size=3).map(lambda v: torch.tensor(v, dtype=torch.float64))
    if "Sequence[Sequence" in a:
        return st.lists(st.lists(ints, max_size=3), max_size=3)
    if "Sequence[int]" in a:
        return st.lists(ints, max_size=3)
    return anything


def public_functions():
    for info in pkgutil.iter_modules(pfl_theory.__path__):
        if info.name in SKIP_MODULES:
            continue
        module = importlib.import_module(f"pfl_theory.{info.name}")
        for name, fn in sorted(vars(module).items()):
            if inspect.isfunction(fn) and not name.startswith("_") and name not in SKIP \
                    and fn.__module__ == module.__name__ and inspect.signature(fn).parameters:
                yield pytest.param(fn, id=f"{info.name}.{name}")


class _Slow(Exception):
    pass


def _alarm(*_):
    raise _Slow


@pytest.mark.parametrize("fn", list(public_functions()))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_public_function_raises_no_arithmetic_error(fn, data):
    args, kwargs = [], {}
    for p in inspect.signature(fn).parameters.values():
        if p.default is not p.empty and data.draw(st.booleans(), label=f"default {p.name}"):
            continue
        value = data.draw(strategy(p.annotation), label=p.name)
        (kwargs.__setitem__(p.name, value) if p.kind == p.KEYWORD_ONLY else args.append(value))
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(60)        # a hang on extreme input is a finding too (none seen)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn(*args, **kwargs)
    except ARITHMETIC_ERRORS as exc:      # mutation: an unguarded module fails here
        pytest.fail(f"{type(exc).__name__}: {exc}")
    except _Slow:
        pytest.fail("took more than 60 s")
    except Exception:      # ValueError (refused input), TypeError (wrong kind): fine
        pass
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("call, needle", [
    (lambda: pfl_theory.cgpfl.e_of_k([], [], mu=1.0, m=10.0, d=2), "at least one K"),
    (lambda: pfl_theory.pfedme.eta_hat_2(lam=1e308, L=1e300), "eta_hat_2: input outside"),
    (lambda: pfl_theory.pfedme.min_rounds_theorem1(lam=1e-308, mu=1e-300, beta=2),
     "ZeroDivisionError"),
    (lambda: pfl_theory.ppfe_covering.harmonic_mean_size([10**400]), r"sizes\[0\] must be finite"),
    (lambda: pfl_theory.validation.in_open_unit("delta", 10**400), "delta must be finite"),
])
def test_the_old_arithmetic_errors_are_value_errors_naming_the_function(call, needle):
    with pytest.raises(ValueError, match=needle) as info:
        call()
    assert "\n" not in str(info.value)
