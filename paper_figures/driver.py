"""Discover and run the figure scripts of :mod:`paper_figures` (``pflt figures``).

A *figure module* is a module ``paper_figures/<name>.py`` (not this driver, not
``_``-prefixed) that defines::

    def make(out_dir: pathlib.Path, *, quick: bool = False, seed: int = 0) -> list[pathlib.Path]

It writes its files into ``out_dir`` (named after itself, e.g. ``<name>.png``) and returns
their paths. The contract the driver enforces: at least one PNG and one CSV (the plotted
data), every returned path exists. Modules without ``make`` are helpers and are skipped.
A module that fails to import, raises, or breaks the contract is reported as failed with
its error; the other modules still run.
"""

from __future__ import annotations

import fnmatch
import importlib
import pkgutil
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from tqdm import tqdm

DEFAULT_PACKAGE = "paper_figures"
SKIP = {"driver"}


@dataclass(frozen=True)
class FigureResult:
    """Outcome of one figure module: ``ok`` with the files written, or the error."""

    name: str
    ok: bool
    files: tuple[Path, ...]
    error: str
    seconds: float
    #: process CPU time of the module (all threads): what it costs, whatever the load
    cpu_seconds: float = 0.0

    def timing(self) -> str:
        """``CPU 12.3 s, wall 40.1 s``: the wall time grows with the machine's load, the CPU
        time does not."""
        return f"CPU {self.cpu_seconds:.1f} s, wall {self.seconds:.1f} s"


def discover(package: str | None = None) -> dict[str, Callable[..., Any] | str]:
    """``{module name: make function}`` for every figure module of ``package``; a module
    that fails to import maps to its error line (a string) instead."""
    package = package or DEFAULT_PACKAGE
    pkg = importlib.import_module(package)
    found: dict[str, Callable[..., Any] | str] = {}
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name in SKIP or info.name.startswith("_") or info.ispkg:
            continue
        try:
            module = importlib.import_module(f"{package}.{info.name}")
        except Exception as exc:  # reported as a failed figure, the others still run
            found[info.name] = traceback.format_exception_only(type(exc), exc)[-1].strip()
            continue
        make = getattr(module, "make", None)
        if callable(make):
            found[info.name] = make
    return found


def _check_files(files: Any) -> tuple[Path, ...]:
    if not isinstance(files, (list, tuple)):
        raise TypeError(f"make() must return a list of paths, got {type(files).__name__}")
    paths = tuple(Path(f) for f in files)
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"make() returned paths that do not exist: {missing}")
    suffixes = {p.suffix.lower() for p in paths}
    lacking = [s for s in (".png", ".csv") if s not in suffixes]
    if lacking:
        raise ValueError(f"make() must write a PNG and the CSV of the plotted data; "
                         f"no {' or '.join(lacking)} among {[p.name for p in paths]}")
    return paths


def run_one(name: str, make: Callable[..., Any], out_dir: Path, *, quick: bool,
            seed: int) -> FigureResult:
    """Run one figure module's ``make``; an exception becomes a failed result."""
    import matplotlib.pyplot as plt

    start, cpu = time.perf_counter(), time.process_time()
    try:
        files = _check_files(make(Path(out_dir), quick=quick, seed=seed))
        return FigureResult(name, True, files, "", time.perf_counter() - start,
                            time.process_time() - cpu)
    except Exception as exc:  # the figure broke: report it, keep going
        err = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return FigureResult(name, False, (), err, time.perf_counter() - start,
                            time.process_time() - cpu)
    finally:
        plt.close("all")


def run_figures(*, out_dir: Path, only: list[str] | str | None = None, quick: bool = False,
                seed: int = 0, package: str | None = None,
                progress: bool = True) -> list[FigureResult]:
    """Run the figure modules whose name matches any ``only`` glob (all when ``None``).
    With ``progress``, each module's line (ok/FAILED, CPU and wall time) is written to
    stderr as it finishes, so a slow module on a busy machine shows at once."""
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    found = discover(package)
    patterns = [only] if isinstance(only, str) else list(only or [])
    patterns = [p.strip() for item in patterns for p in item.split(",") if p.strip()]
    for pat in patterns:
        if not any(fnmatch.fnmatchcase(n, pat) for n in found):
            raise ValueError(f"--only {pat!r} matches no figure module; known: "
                             f"{', '.join(found) or '(none)'}")
    names = [n for n in found if not patterns or any(fnmatch.fnmatchcase(n, p)
                                                     for p in patterns)]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    results = []
    bar = tqdm(names, desc="figures", unit="fig", disable=not progress, file=sys.stderr,
               dynamic_ncols=True)
    for name in bar:
        bar.set_postfix_str(name)
        target = found[name]
        if isinstance(target, str):
            results.append(FigureResult(name, False, (), f"import failed: {target}", 0.0))
        else:
            results.append(run_one(name, target, out_dir, quick=quick, seed=seed))
        if progress:
            r = results[-1]
            bar.write(f"{'done' if r.ok else 'FAILED'}  {name}: {r.timing()}", file=sys.stderr)
    return results


def format_results(results: list[FigureResult]) -> str:
    """Terminal summary: one line per module, then the counts."""
    lines = []
    for r in results:
        if r.ok:
            files = ", ".join(p.name for p in r.files)
            lines.append(f"ok      {r.name} ({r.timing()}): {files}")
        else:
            lines.append(f"FAILED  {r.name} ({r.timing()}): {r.error}")
    n_bad = sum(not r.ok for r in results)
    cpu, wall = sum(r.cpu_seconds for r in results), sum(r.seconds for r in results)
    lines.append(f"{len(results)} figure module(s): {len(results) - n_bad} ok, {n_bad} failed; "
                 f"total CPU {cpu:.1f} s, wall {wall:.1f} s"
                 + (f" (wall/CPU {wall / cpu:.1f}: the machine is busy)"
                    if cpu > 0 and wall > 1.5 * cpu else ""))
    return "\n".join(lines)
