"""Generated formula mutants: does ``pflt verify`` (the checks alone) notice a wrong formula?

The hand-written catalogue (:mod:`verification.mutation.catalogue`) was written next to the
checks that kill it.  This set is generated mechanically from the formula functions of
``pfl_theory`` (the bound and rate calculators of the four papers), with no knowledge of the
checks:

1. **probe** — every public function of :data:`FORMULA_MODULES` is wrapped with a call
   counter and every check of the kinds :data:`PROBE_KINDS` runs once (quick size, seed 0):
   the checks that call a function are the ones run against its mutants (functions no check
   calls are listed as *unchecked*);
2. **mutants** of each called function ``f``, by kind (:data:`MUTANT_KINDS`):

   * ``constant``: the result ×2 and ×½;
   * ``sqrt-scope``: the result squared (a √ dropped) and its square root (a √ added);
   * ``exponent``: the result × v^{+½} and × v^{−½} for each positive scalar argument v ≠ 1
     (an exponent of v off by ½);
   * ``dropped-factor``: a positive scalar argument v ≠ 1 replaced by 1;
   * ``swapped``: two positive scalar arguments exchanged;
   * ``log-base``: ``math.log`` / ``np.log`` of ``f``'s module read as log₂ and as log₁₀
     during the call (only functions whose source calls ``log``);

   "the result" is every float of what ``f`` returns (a float, an array, a dict of floats or
   a dataclass of floats); an argument that is a sequence of positive numbers (client
   sizes) enters the exponent mutants by its mean and is dropped as all ones.  At most
   :data:`MAX_PER_FUNCTION` mutants per function, drawn by a fixed seed; a mutant whose
   change never applied during the run (its argument absent, not positive, or 1) is *not
   exercised*, and one the formula's own input validation rejects (``ValueError``, e.g. δ
   set to 1) is *invalid*: both are left out of the rates;
3. **run** — each mutant is applied (the function replaced in its module and in every module
   that imported it by name) and its checks rerun; it is **killed** when some check's verdict
   changes or the check errors.

``python -m verification.mutation --generated`` prints one line per mutant and the kill rate
by checks alone, per mutant kind and per check kind (a check kind "kills" a mutant when one
of its checks changes verdict).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import inspect
import math
import random
import sys
import types
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np


FORMULA_MODULES = ("pfl_theory.pfedme", "pfl_theory.cgpfl", "pfl_theory.plgu",
                   "pfl_theory.ppfe_bounds", "pfl_theory.ppfe_covering", "pfl_theory.rates")
#: every kind whose verdict compares code with a formula: the claims against measurements
#: (worst cases included since issue 41 — the exact worst cases are the tightest of them)
#: and the identity checks
PROBE_KINDS = ("bound", "envelope", "inequality", "identity", "rate", "worst_case")
MUTANT_KINDS = ("constant", "sqrt-scope", "exponent", "dropped-factor", "swapped", "log-base")
MAX_PER_FUNCTION = 8
#: seconds one check may run under a mutant (a mutated step size or horizon can make a run
#: effectively endless); a check that runs out is *undecided* and the mutant left out of the rates
CHECK_TIMEOUT_S = 30
SEED = 20261126


# ----------------------------------------------------------------------------- transforms
def map_floats(value: Any, fn: Callable[[float], float]) -> Any:
    """``value`` with ``fn`` applied to every float in it (floats, numpy arrays, dicts,
    lists/tuples, dataclasses); ints, bools and other objects are kept."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (float, np.floating)):
        return fn(float(value))
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        return np.vectorize(fn, otypes=[float])(value) if value.size else value
    if isinstance(value, dict):
        return {k: map_floats(v, fn) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(map_floats(v, fn) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{
            f.name: map_floats(getattr(value, f.name), fn)
            for f in dataclasses.fields(value) if f.init})
    return value


def _scalar(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return None
    v = float(value)
    return v if math.isfinite(v) and v > 0 and v != 1.0 else None


@dataclass(frozen=True)
class GeneratedMutant:
    """One generated mutant of ``module:function``: ``kind`` (:data:`MUTANT_KINDS`) and a
    short ``label``; ``wrap(f, tracker)`` builds the replacement (:class:`Tracker`)."""

    module: str
    function: str
    kind: str
    label: str
    wrap: Callable[[Callable[..., Any], Callable[[], None]], Callable[..., Any]]

    @property
    def name(self) -> str:
        return f"{self.module.rsplit('.', 1)[-1]}.{self.function}:{self.label}"


class Tracker:
    """Counts how often a mutant applied, and how often the mutated call was rejected by the
    formula's own input validation (``ValueError``: an invalid mutant, not a kill)."""

    def __init__(self):
        self.hits = 0
        self.invalid = 0

    def hit(self) -> None:
        self.hits += 1

    def call(self, f, *a, **k):
        try:
            return f(*a, **k)
        except ValueError:
            self.invalid += 1
            raise


def _on_result(fn: Callable[[float], float]):
    """Mutate every float of the result; applied (``hit``) only when the result holds a
    float (a symbolic or integer result is left alone: an equivalent mutant, not counted)."""
    def wrap(f, t: Tracker):
        @functools.wraps(f)
        def g(*a, **k):
            seen = []

            def counted(r: float) -> float:
                seen.append(r)
                return fn(r)

            out = map_floats(f(*a, **k), counted)
            if seen:
                t.hit()
            return out
        return g
    return wrap


def _size(value: Any) -> float | None:
    """A positive scalar ≠ 1, or the mean of a sequence of positive numbers (client sizes)."""
    v = _scalar(value)
    if v is not None or isinstance(value, (str, bytes, dict)):
        return v
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return None
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        return None
    return _scalar(float(arr.mean()))


def _on_arg(name: str, change: Callable[[dict, float], None] | None = None,
            result: Callable[[float, float], Callable[[float], float]] | None = None):
    """Mutate keyword ``name`` (``change(kwargs, value)``) or the result as a function of
    the argument's value (``result(value)`` → float transform); no-op unless the argument is
    a positive scalar ≠ 1."""
    def wrap(f, t: Tracker):
        sig = inspect.signature(f)

        @functools.wraps(f)
        def g(*a, **k):
            try:
                bound = sig.bind(*a, **k)
            except TypeError:
                return f(*a, **k)
            v = _size(bound.arguments.get(name))
            if v is None:
                return f(*a, **k)
            if change is not None:
                t.hit()
                change(bound.arguments, v)
                return t.call(f, *bound.args, **bound.kwargs)
            seen = []
            transform = result(v)

            def counted(r: float) -> float:
                seen.append(r)
                return transform(r)
            out = map_floats(f(*a, **k), counted)
            if seen:      # an int or symbolic result is left alone: not applied, not counted
                t.hit()
            return out
        return g
    return wrap


def _swap(x: str, y: str):
    def wrap(f, t: Tracker):
        sig = inspect.signature(f)

        @functools.wraps(f)
        def g(*a, **k):
            try:
                bound = sig.bind(*a, **k)
            except TypeError:
                return f(*a, **k)
            vx, vy = bound.arguments.get(x), bound.arguments.get(y)
            if _scalar(vx) is None or _scalar(vy) is None or float(vx) == float(vy):
                return f(*a, **k)
            t.hit()
            bound.arguments[x], bound.arguments[y] = vy, vx
            return t.call(f, *bound.args, **bound.kwargs)
        return g
    return wrap


class _LogModule(types.ModuleType):
    """A stand-in for ``math`` / ``numpy`` whose ``log`` has another base."""

    def __init__(self, real: Any, base: float, used: Callable[[], None] = lambda: None):
        super().__init__(real.__name__)
        self._real, self._scale, self._used = real, 1.0 / math.log(base), used

    def __getattr__(self, attr):
        if attr == "log":
            real_log, s, used = self._real.log, self._scale, self._used

            def log(x, *a, **k):
                used()
                return real_log(x, *a, **k) * s
            return log
        return getattr(self._real, attr)


def _log_base(base: float):
    def wrap(f, t: Tracker):
        mod = sys.modules[f.__module__]

        @functools.wraps(f)
        def g(*a, **k):   # applied (hit) only when math.log / np.log is actually called:
            # a formula whose log is sympy's (sp.log) is left alone, not a survivor
            saved = {n: getattr(mod, n) for n in ("math", "np") if hasattr(mod, n)}
            for n, real in saved.items():
                setattr(mod, n, _LogModule(real, base, t.hit))
            try:
                return t.call(f, *a, **k)
            finally:
                for n, real in saved.items():
                    setattr(mod, n, real)
        return g
    return wrap


def _set_one(name: str):
    """``change`` for a dropped factor: the argument set to 1 (a sequence: all ones)."""
    def change(args: dict, _value: float) -> None:
        v = args[name]
        args[name] = 1 if _scalar(v) is not None else [1] * len(v)
    return change


def _scalar_parameters(f: Callable[..., Any]) -> list[str]:
    """Parameters that may hold a scalar or a sequence of sizes (annotation without
    Callable/bool/str/arrays/dicts)."""
    out = []
    for p in inspect.signature(f).parameters.values():
        ann = str(p.annotation)
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if any(t in ann for t in ("Callable", "bool", "str", "ndarray", "dict", "Mapping",
                                  "Tensor")):
            continue
        out.append(p.name)
    return out


def mutants_of(module: str, function: str, *, limit: int = MAX_PER_FUNCTION,
               seed: int = SEED) -> list[GeneratedMutant]:
    """The generated mutants of ``module:function`` (module docstring), at most ``limit``
    drawn with ``seed`` (the constant, √-scope and log-base ones are always drawn first)."""
    f = getattr(importlib.import_module(module), function)
    mk = functools.partial(GeneratedMutant, module, function)
    core = [mk("constant", "x2", _on_result(lambda r: 2.0 * r)),
            mk("constant", "x0.5", _on_result(lambda r: 0.5 * r)),
            mk("sqrt-scope", "squared", _on_result(lambda r: r * abs(r))),
            mk("sqrt-scope", "sqrt", _on_result(lambda r: math.copysign(math.sqrt(abs(r)), r)))]
    try:
        source = inspect.getsource(f)
    except (OSError, TypeError):
        source = ""
    if "log(" in source:
        core += [mk("log-base", "log2", _log_base(2.0)), mk("log-base", "log10", _log_base(10.0))]
    params = _scalar_parameters(f)
    rest = []
    for v in params:
        rest += [mk("exponent", f"{v}^+0.5", _on_arg(v, result=lambda x: (lambda r: r * x ** 0.5))),
                 mk("exponent", f"{v}^-0.5", _on_arg(v, result=lambda x: (lambda r: r / x ** 0.5))),
                 mk("dropped-factor", f"{v}=1", _on_arg(v, change=_set_one(v)))]
    rest += [mk("swapped", f"{x}<->{y}", _swap(x, y))
             for i, x in enumerate(params) for y in params[i + 1:]]
    rng = random.Random(f"{seed}:{module}:{function}")
    picked = core[:limit] + rng.sample(rest, min(len(rest), max(limit - len(core), 0)))
    return picked


# ----------------------------------------------------------------------------- functions, patching
def formula_functions() -> list[tuple[str, str]]:
    """(module, name) of every public function defined in :data:`FORMULA_MODULES`."""
    out = []
    for name in FORMULA_MODULES:
        mod = importlib.import_module(name)
        for attr, value in vars(mod).items():
            if (not attr.startswith("_") and inspect.isfunction(value)
                    and value.__module__ == name):
                out.append((name, attr))
    return out


@contextlib.contextmanager
def patched(module: str, function: str, replacement: Callable[..., Any]) -> Iterator[None]:
    """Replace ``module.function`` by ``replacement`` there and in every loaded module that
    bound the same object under the same name; restored afterwards."""
    owner = importlib.import_module(module)
    original = getattr(owner, function)
    places = [owner] + [m for m in list(sys.modules.values())
                        if m is not None and m is not owner
                        and getattr(m, function, None) is original]
    for m in places:
        setattr(m, function, replacement)
    try:
        yield
    finally:
        for m in places:
            setattr(m, function, original)


@contextlib.contextmanager
def applied(mutant: GeneratedMutant) -> Iterator[Tracker]:
    """``mutant`` in force (:func:`patched`) with numpy's warnings silenced; yields its
    :class:`Tracker` (``hits`` = 0: never applied; ``invalid``: rejected by the formula)."""
    tracker = Tracker()
    original = getattr(importlib.import_module(mutant.module), mutant.function)
    with patched(mutant.module, mutant.function, mutant.wrap(original, tracker)), \
            np.errstate(all="ignore"):
        yield tracker


def clear_caches() -> None:
    """Experiments memoise results (functools.lru_cache); a mutant must not see stale ones
    (used by :mod:`verification.mutation.runner` too)."""
    for mod in list(sys.modules.values()):
        if mod is None or not getattr(mod, "__name__", "").startswith("verification"):
            continue
        for value in list(vars(mod).values()):
            if isinstance(value, functools._lru_cache_wrapper):
                value.cache_clear()


