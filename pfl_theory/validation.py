"""Input validation shared by every module: clear ``ValueError`` messages, never a silent
wrong number.  Each helper returns the validated value (as float/int) so it can be used
inline: ``lam = positive("lam", lam)``."""

from __future__ import annotations

import functools
import inspect
import math
from typing import Any, Callable

import numpy as np


class NonFiniteValueError(ValueError):
    """An array holds NaN or inf.  A ``ValueError`` (bad input to a public function); the
    training runner reports one raised inside a round as the run's divergence (exit 1,
    naming the round) rather than as a user error."""


def _finite(name: str, value: Any) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number, got {_short(value)}") from None
    except OverflowError:                       # an int beyond float64 (10**400)
        raise ValueError(f"{name} must be finite in float64, got {_short(value)}") from None
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return v


def positive(name: str, value: Any) -> float:
    """``value > 0`` (finite)."""
    v = _finite(name, value)
    if v <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    return v


def nonnegative(name: str, value: Any) -> float:
    """``value >= 0`` (finite)."""
    v = _finite(name, value)
    if v < 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")
    return v


def in_open_unit(name: str, value: Any) -> float:
    """``0 < value < 1`` (e.g. a confidence parameter δ)."""
    v = _finite(name, value)
    if not 0 < v < 1:
        raise ValueError(f"{name} must lie in (0, 1), got {value!r}")
    return v


def in_range(name: str, value: Any, lo: float, hi: float, *, closed: bool = True) -> float:
    """``lo <= value <= hi`` (or strict when ``closed=False``)."""
    v = _finite(name, value)
    ok = lo <= v <= hi if closed else lo < v < hi
    if not ok:
        br = "[]" if closed else "()"
        raise ValueError(f"{name} must lie in {br[0]}{lo}, {hi}{br[1]}, got {value!r}")
    return v


def positive_int(name: str, value: Any, *, minimum: int = 1) -> int:
    """An integer ``>= minimum`` (bools and non-integral floats are rejected)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            value = int(value)
        else:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def finite_array(name: str, value: Any, *, ndim: int | None = None) -> np.ndarray:
    """A float64 numpy array with no NaN/inf (and the given number of dimensions)."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except OverflowError:                       # an int beyond float64 (10**400)
        raise ValueError(f"{name} holds a number beyond float64's range") from None
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise NonFiniteValueError(f"{name} contains NaN or inf")
    return arr


#: errors that extreme or malformed input raises inside arithmetic (an int beyond float64,
#: λ = 1e-308 underflowing to a zero divisor, a product overflowing ``math``, an array of
#: the wrong shape indexed)
ARITHMETIC_ERRORS = (OverflowError, ZeroDivisionError, FloatingPointError, IndexError)


def _short(value: Any, width: int = 60) -> str:
    text = " ".join(repr(value).split())
    return text if len(text) <= width else text[:width] + "…"


def value_errors(fn: Callable) -> Callable:
    """``fn`` whose :data:`ARITHMETIC_ERRORS` (raised by its input: numbers beyond float64,
    underflow to a zero divisor, arrays of the wrong shape) become a one-line ``ValueError``
    naming the function, the error and the arguments — a public function's input error,
    as for every other bad input."""
    @functools.wraps(fn)
    def checked(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ARITHMETIC_ERRORS as exc:
            given = ", ".join([_short(a, 40) for a in args]
                              + [f"{k}={_short(v, 40)}" for k, v in kwargs.items()])
            raise ValueError(f"{fn.__module__}.{fn.__name__}: input outside float64's range "
                             f"or of the wrong shape ({type(exc).__name__}: "
                             f"{' '.join(str(exc).split())}); got ({given})") from exc
    return checked


def guard_public_functions(namespace: dict[str, Any]) -> None:
    """Wrap every public function defined in the module ``namespace`` (its ``globals()``,
    called at the module's end) with :func:`value_errors`; decorated functions
    (``__wrapped__``: context managers, caches) are left as they are."""
    module = namespace["__name__"]
    for name, obj in list(namespace.items()):
        if (inspect.isfunction(obj) and not name.startswith("_") and obj.__module__ == module
                and not hasattr(obj, "__wrapped__") and not inspect.isgeneratorfunction(obj)):
            namespace[name] = value_errors(obj)
