"""``pflt verify`` keeps each finished check as it ends, so that a stopped run (Ctrl-C, a
killed job, a full disk) loses only the check it was in, and the same command resumes.

The record lives in the output directory itself, outside the staging directory that
:mod:`pflt.staged_out` discards on failure::

    OUT/partial/progress.jsonl        one line per finished check: {"size", "seeds", "entry"}
                                      (entry = the check's results.json entry)
    OUT/partial/figures/<id>/seed<k>/ what the check drew

A later ``pflt verify`` with the same size and seeds reads it, skips the checks recorded
there (:meth:`Progress.done`) and puts their entries and figures back into its outputs; a
run that finishes writes report.md / results.json as usual and removes ``OUT/partial``.
``--fresh`` ignores (and removes) the record.  A record of another size or other seeds is
not used.  Each line is flushed and synced to disk before the next check starts; a half
line (a kill inside the write) is skipped when read.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from pfl_theory.safe_files import refuse_link
from verification.core.registry import Check, Result, Verdict
from verification.core.report import check_entry
from verification.core.suite import CheckRun

PARTIAL = "partial"
LOG = "progress.jsonl"


class Progress:
    """The finished checks of ``pflt verify`` into ``out`` at ``size`` with ``seeds``."""

    def __init__(self, out: Path, size: str, seeds: tuple[int, ...], *, fresh: bool = False):
        self.dir = Path(out) / PARTIAL
        self.log = self.dir / LOG
        self.size, self.seeds = size, list(seeds)
        refuse_link(self.dir)
        if fresh:
            self.clear()

    def entries(self) -> dict[str, dict[str, Any]]:
        """``{check id: entry}`` recorded at this size and these seeds (the last wins)."""
        found: dict[str, dict[str, Any]] = {}
        if self.log.is_symlink() or not self.log.is_file():
            return found
        for line in self.log.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:            # a line cut by a kill
                continue
            entry = rec.get("entry") if isinstance(rec, dict) else None
            if rec.get("size") == self.size and rec.get("seeds") == self.seeds \
                    and isinstance(entry, dict) and isinstance(entry.get("id"), str):
                found[entry["id"]] = entry
        return found

    def done(self, checks: list[Check], stage: Path) -> dict[str, CheckRun]:
        """The recorded runs of ``checks`` as :class:`CheckRun`, their figures copied back
        into ``stage`` (where this run's outputs are written)."""
        entries = self.entries()
        out = {}
        for chk in checks:
            entry = entries.get(chk.id)
            if entry is None or entry.get("verdict") == "ERROR":   # an error is run again
                continue
            src = self.dir / "figures" / chk.id
            if src.is_dir() and not src.is_symlink():
                shutil.copytree(src, Path(stage) / "figures" / chk.id, dirs_exist_ok=True)
            out[chk.id] = restore(chk, entry, Path(stage))
        return out

    def record(self, run: CheckRun, stage: Path) -> None:
        """Append ``run`` (its figures copied from ``stage``), synced to disk."""
        self.dir.mkdir(parents=True, exist_ok=True)
        src = Path(stage) / "figures" / run.check.id
        if src.is_dir():
            shutil.copytree(src, self.dir / "figures" / run.check.id, dirs_exist_ok=True)
        line = json.dumps({"size": self.size, "seeds": self.seeds,
                           "entry": check_entry(run, Path(stage))}, allow_nan=False)
        refuse_link(self.log)
        with open(self.log, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def clear(self) -> None:
        """Remove the record (after a complete run, or ``--fresh``)."""
        if self.dir.is_dir() and not self.dir.is_symlink():
            shutil.rmtree(self.dir, ignore_errors=True)


def restore(chk: Check, entry: dict[str, Any], stage: Path) -> CheckRun:
    """A :class:`CheckRun` from its results.json ``entry`` (figures under ``stage``)."""
    results = []
    for d in entry.get("results", []):
        tight = d.get("tightness")
        results.append(Result(
            chk, Verdict(d["verdict"]), d.get("measured"), d.get("theoretical"),
            d.get("detail", ""), float(d.get("seconds") or 0.0), int(d.get("seed", 0)),
            d.get("size", ""), tuple(str(stage / f) for f in d.get("figures", [])),
            tightness=None if tight is None else float(tight), vacuous=d.get("vacuous"),
            extra=d.get("extra") or {}, sensitivity=d.get("sensitivity"),
            sensitivity_note=d.get("sensitivity_note", ""),
            erratum_basis=d.get("erratum_basis")))
    return CheckRun(chk, Verdict(entry["verdict"]), tuple(results), entry.get("cpu_seconds"))
