"""Run a selection of verification checks over several seeds and report.

Used by ``pflt verify`` (:mod:`pflt.commands.verify`); usable from Python::

    checks, import_errors = load_checks()
    suite = run_suite(select(checks, only=["pfedme.*"]), size="quick", seeds=2,
                      out_dir=Path("verify_out"), import_errors=import_errors)
    write_outputs(suite, Path("verify_out"))

A check runs once per seed (seeds ``0 … N-1``). Its aggregate verdict is ``ERROR`` if any
seed errored, else ``FAILS`` if any seed failed, else ``HOLDS``; the per-seed results are
kept. A check module that cannot be imported becomes an ``ERROR`` entry ``import.<module>``
so one broken module does not hide the others. Outputs in the output directory:
``results.json`` (environment, summary counts, per check the aggregate and every per-seed
``Result.to_dict()``), ``report.md`` (summary and a table with figure links) and
``figures/<check id>/seed<k>/`` (whatever each check draws). Exit code: 1 iff any ERROR.
"""

from __future__ import annotations

import contextlib
import fnmatch
import importlib
import importlib.util
import json
import os
import pkgutil
import re
import platform
import shutil
import subprocess
import sys
import time
import traceback
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from tqdm import tqdm

from pfl_theory.validation import positive_int
from verification.core.registry import (DECLARED, Check, DuplicateCheckError, Result, Verdict,
                                        run_check)
from verification.core.suite import CheckRun, SuiteRun, aggregate
from verification.core.report import format_table, write_outputs


#: a check declared with a literal id (the registry's pattern)
_DECLARED = DECLARED
#: a module registering checks whose ids it cannot spell out (one per algorithm, e.g.
#: :mod:`verification.checks.engine_oracles`) names their common ending in its source:
#: ``CHECK_IDS_END_WITH = ".engine_equals_oracle"``
_DYNAMIC = re.compile(r"""^CHECK_IDS_END_WITH\s*=\s*(["'])([^"']+)\1""", re.M)


def _may_match(pattern: str, ending: str) -> bool:
    """Whether an id ``<name><ending>`` can match ``pattern``: the name is probed as the
    pattern's part before its first dot with the wildcards filled in (a ``[…]`` set counts
    as a match)."""
    if "[" in pattern:
        return True
    head = pattern.split(".", 1)[0].replace("*", "x").replace("?", "x")
    return fnmatch.fnmatchcase(head + ending, pattern)


def modules_declaring(package: str, only: Iterable[str] | str | None) -> list[str] | None:
    """The modules of ``package`` that can hold a check matching the ``only`` globs, read
    from their source without importing them (literal ``@check("id"`` declarations; a
    module with any other ``@check(`` is always included; one with ``CHECK_IDS_END_WITH =
    "<ending>"`` when a pattern can match an id with that ending); ``None`` — import every module
    — without patterns or when a pattern matches no declared id (a plugin's check, an
    ``import.<module>`` pseudo check, a typo that :func:`select` reports)."""
    patterns = _split_patterns(only)
    if not patterns:
        return None
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    declared: dict[str, list[str] | None] = {}
    dynamic: dict[str, str] = {}
    for info in pkgutil.iter_modules(spec.submodule_search_locations):
        path = Path(info.module_finder.path) / f"{info.name}.py"
        if info.ispkg or not path.is_file():
            declared[info.name] = None
            continue
        text = path.read_text(encoding="utf-8")
        ids = [m.group(2) for m in _DECLARED.finditer(text)]
        declared[info.name] = ids if len(ids) == text.count("@check(") else None
        ending = _DYNAMIC.search(text)
        if ending:
            dynamic[info.name] = ending.group(2)
    every = [i for ids in declared.values() if ids for i in ids]
    if not all(any(fnmatch.fnmatchcase(i, pat) for i in every)
               or any(_may_match(pat, e) for e in dynamic.values()) for pat in patterns):
        return None
    return sorted(name for name, ids in declared.items()
                  if ids is None or any(fnmatch.fnmatchcase(i, pat)
                                        for i in ids for pat in patterns)
                  or (name in dynamic and any(_may_match(pat, dynamic[name])
                                              for pat in patterns)))


def load_checks(package: str = "verification.checks", *,
                only: Iterable[str] | str | None = None
                ) -> tuple[dict[str, Check], dict[str, str]]:
    """Import the modules of ``package`` (tolerating broken ones) and the user's plugins
    (:mod:`pfl_theory.plugins`; a broken plugin raises its one-line
    :class:`~pfl_theory.plugins.PluginError`) and return the registry (sorted by id) and
    ``{module name: error line}`` for the package's modules that failed to import.  With
    ``only`` globs, only the modules declaring a matching check are imported
    (:func:`modules_declaring`): ``pflt verify --only <id>`` does not import every check's
    dependencies."""
    from pfl_theory.plugins import load_plugins
    from verification.core import registry

    pkg = importlib.import_module(package)
    wanted = modules_declaring(package, only)
    errors: dict[str, str] = {}
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if wanted is not None and info.name not in wanted:
            continue
        try:
            importlib.import_module(f"{package}.{info.name}")
        except DuplicateCheckError as exc:
            if not all(m.startswith("verification.") for m in exc.modules):
                from pfl_theory.plugins import PluginError  # a plugin took a built-in's id:

                raise PluginError(str(exc)) from exc        # the user's error, one line
            errors[info.name] = traceback.format_exception_only(type(exc), exc)[-1].strip()
        except Exception as exc:  # a broken module is reported, the others still load
            errors[info.name] = traceback.format_exception_only(type(exc), exc)[-1].strip()
    load_plugins()
    return dict(sorted(registry._REGISTRY.items())), errors


def _import_error_check(module: str, error: str) -> tuple[Check, Result]:
    def failed(ctx: Any) -> Any:  # pragma: no cover - never called
        raise RuntimeError(error)

    chk = Check(id=f"import.{module}", paper="-", reference=f"verification/checks/{module}.py",
                kind="import", fn=failed, tolerance=None, tolerance_reason="",
                description=f"import of check module {module!r} failed")
    return chk, Result(chk, Verdict.ERROR, None, None, f"import failed: {error}", 0.0, 0,
                       "-")


def _split_patterns(only: Iterable[str] | str | None) -> list[str]:
    if only is None:
        return []
    items = [only] if isinstance(only, str) else list(only)
    return [p.strip() for item in items for p in item.split(",") if p.strip()]


def select(checks: dict[str, Check] | Iterable[Check], *,
           only: Iterable[str] | str | None = None,
           kinds: Iterable[str] | None = None) -> list[Check]:
    """Checks whose id matches any ``only`` glob (fnmatch; comma-separated allowed) and
    whose kind is in ``kinds`` (no filter when ``None``/empty). Raises ``ValueError`` when
    a pattern matches nothing, so a typo is not a silent empty run."""
    pool = list(checks.values()) if isinstance(checks, dict) else list(checks)
    patterns = _split_patterns(only)
    for pat in patterns:
        if not any(fnmatch.fnmatchcase(c.id, pat) for c in pool):
            known = ", ".join(c.id for c in pool) or "(none registered)"
            raise ValueError(f"--only {pat!r} matches no check; known ids: {known}")
    kind_set = set(kinds or ())
    return [c for c in sorted(pool, key=lambda c: c.id)
            if (not patterns or any(fnmatch.fnmatchcase(c.id, p) for p in patterns))
            and (not kind_set or c.kind in kind_set)]


def environment_info() -> dict[str, Any]:
    """Versions, device and time of the run (for results.json / report.md)."""
    versions = {}
    for dist in ("pfl-theory", "numpy", "scipy", "torch", "sympy", "matplotlib", "tqdm"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    device, threads = "cpu", None
    if "torch" in sys.modules:    # else no check used torch: everything ran on the CPU
        try:
            import torch

            if torch.cuda.is_available():
                device = f"cuda ({torch.cuda.get_device_name(0)})"
            threads = torch.get_num_threads()
        except Exception:  # torch broken: still report the rest
            threads = None
    commit = None
    try:
        root = Path(__file__).resolve().parents[2]
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root,
                                capture_output=True, text=True, timeout=5).stdout.strip()
    except Exception:
        pass
    return {"time_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "python": platform.python_version(), "platform": platform.platform(),
            "cpu_count": os.cpu_count(), "torch_threads": threads, "device": device,
            "git_commit": commit or None, "versions": versions}


def _seed_list(seeds: int | Sequence[int]) -> list[int]:
    if isinstance(seeds, (int, np.integer)) and not isinstance(seeds, bool):
        return list(range(positive_int("seeds", seeds)))
    out = [positive_int("seed", s, minimum=0) for s in seeds]
    if not out or len(set(out)) != len(out):
        raise ValueError(f"seeds must be a count >= 1 or distinct seeds, got {seeds!r}")
    return out


def run_suite(checks: Iterable[Check], *, size: str = "full",
              seeds: int | Sequence[int] = 1, out_dir: Path | None = None,
              progress: bool = True, import_errors: dict[str, str] | None = None,
              done: dict[str, CheckRun] | None = None,
              on_done: Callable[[CheckRun], None] | None = None) -> SuiteRun:
    """Run every check once per seed (``seeds`` = N means seeds ``0 … N-1``; a sequence
    gives the seeds explicitly), figures under ``out_dir/figures/<id>/seed<k>/``, and
    aggregate per check.  A check in ``done`` (kept from an interrupted run,
    :mod:`verification.core.progress`) is not run again; ``on_done`` is called with each
    check's run as it ends (its process CPU time measured)."""
    if size not in ("quick", "full"):
        raise ValueError(f"size must be 'quick' or 'full', got {size!r}")
    seed_list = _seed_list(seeds)
    checks = list(checks)
    done = done or {}
    runs = []
    for module, error in sorted((import_errors or {}).items()):
        chk, res = _import_error_check(module, error)
        runs.append(CheckRun(chk, Verdict.ERROR, (res,)))
    bar = tqdm(total=len(checks) * len(seed_list), desc="verify", unit="run",
               disable=not progress, file=sys.stderr, dynamic_ncols=True)
    try:
        for chk in checks:
            if chk.id in done:
                runs.append(done[chk.id])
                bar.update(len(seed_list))
                continue
            results = []
            cpu = time.process_time()
            for seed in seed_list:
                bar.set_postfix_str(f"{chk.id} seed={seed}", refresh=False)
                fig_dir = None
                if out_dir is not None:
                    fig_dir = Path(out_dir) / "figures" / chk.id / f"seed{seed}"
                    fig_dir.mkdir(parents=True, exist_ok=True)
                results.append(run_check(chk, size=size, seed=seed, out_dir=fig_dir))
                if fig_dir is not None:
                    _remove_empty(fig_dir, stop=Path(out_dir) / "figures")
                bar.update(1)
            runs.append(CheckRun(chk, aggregate(results), tuple(results),
                                 time.process_time() - cpu))
            if on_done is not None:
                on_done(runs[-1])
    finally:
        bar.close()
    return SuiteRun(runs=tuple(runs), size=size, seeds=tuple(seed_list),
                    environment=environment_info())


def _remove_empty(path: Path, *, stop: Path) -> None:
    """Remove ``path`` and its parents up to (including) ``stop`` while they are empty."""
    path = path.resolve()
    stop = stop.resolve()
    while path.is_dir() and not any(path.iterdir()):
        path.rmdir()
        if path == stop:
            break
        path = path.parent


def clear_previous(out_dir: Path) -> None:
    """Remove the outputs of an earlier run in ``out_dir``: ``results.json``, ``report.md``
    and the figure files that results.json lists — nothing else (a user's files under
    ``figures/`` stay; no link is followed; directories go only when left empty)."""
    out_dir = Path(out_dir)
    try:
        old = json.loads((out_dir / "results.json").read_text(encoding="utf-8"))
        listed = [f for c in old.get("checks", []) for f in c.get("figures", [])]
    except (OSError, ValueError, AttributeError, TypeError):
        listed = []
    for name in listed:
        rel = Path(str(name))
        if rel.is_absolute() or ".." in rel.parts or not rel.parts or rel.parts[0] != "figures":
            continue
        path = out_dir
        if any((path := path / part).is_symlink() for part in rel.parts):
            continue
        if path.is_file():
            path.unlink()
            with contextlib.suppress(OSError):
                _remove_empty(path.parent, stop=out_dir / "figures")
    for name in ("results.json", "report.md", "details.md"):
        if not (out_dir / name).is_symlink():
            (out_dir / name).unlink(missing_ok=True)


def run_and_report(*, only: Iterable[str] | str | None = None,
                   kinds: Iterable[str] | None = None, size: str = "full",
                   seeds: int | Sequence[int] = 1,
                   out_dir: Path = Path("verify_out"), progress: bool = True,
                   echo: bool = True, wide: bool = False, keep: Path | None = None,
                   fresh: bool = False, announce: bool = True) -> SuiteRun:
    """Load, select, run, write ``results.json``/``report.md``/``details.md``; print the
    table if ``echo`` (long values cut at two lines; ``wide``: one line per check). This is
    what ``pflt verify`` does.  With ``keep`` (the user's output directory, when ``out_dir``
    is a staging directory that a failure discards), each finished check is recorded there
    as it ends and a re-run resumes from the record (:mod:`verification.core.progress`;
    ``fresh``: start over).  ``announce``: first print the estimated cost to stderr, from
    the measured per-check costs (:mod:`verification.core.check_costs`)."""
    from verification.core.check_costs import estimate
    from verification.core.progress import Progress

    checks, import_errors = load_checks(only=only)
    for module, error in import_errors.items():
        print(f"warning: check module {module!r} failed to import: {error}", file=sys.stderr)
    # a broken module is selectable as the pseudo check ``import.<module>``
    pseudo = {f"import.{m}": _import_error_check(m, e)[0] for m, e in import_errors.items()}
    chosen = select({**checks, **pseudo}, only=only, kinds=kinds)
    import_errors = {m: e for m, e in import_errors.items()
                     if any(c.id == f"import.{m}" for c in chosen)}
    chosen = [c for c in chosen if c.kind != "import"]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    clear_previous(out_dir)
    seed_list = _seed_list(seeds)
    record = Progress(keep, size, tuple(seed_list), fresh=fresh) if keep is not None else None
    done = record.done(chosen, out_dir) if record is not None else {}
    if announce:
        print(estimate([c.id for c in chosen if c.id not in done], size, len(seed_list),
                       done=len(done)), file=sys.stderr, flush=True)
        if done:
            print(f"resuming: {len(done)} check(s) kept in {record.log} are not run again "
                  f"(--fresh starts over)", file=sys.stderr, flush=True)
    start = time.perf_counter()
    suite = run_suite(chosen, size=size, seeds=seed_list, out_dir=out_dir, progress=progress,
                      import_errors=import_errors, done=done,
                      on_done=(lambda run: record.record(run, out_dir)) if record else None)
    suite.environment["wall_seconds"] = round(time.perf_counter() - start, 2)
    if done:
        suite.environment["resumed_checks"] = len(done)
    write_outputs(suite, out_dir)
    if echo:
        print(format_table(suite, width=None) if wide else format_table(suite))
        print(f"wrote {out_dir / 'report.md'}, {out_dir / 'details.md'} and "
              f"{out_dir / 'results.json'}")
    return suite
