"""Runs grouped by configuration, metrics as mean ± sd over seeds (``pflt compare``, sweeps).

Two runs (:mod:`pflt.run_dirs`) have the same *configuration* when everything but the seed
agrees (algorithm, hyper-parameters, model, data, rounds); the seeds of one configuration
are aggregated as mean and sample standard deviation (``ddof = 1``; ``sd`` is ``nan`` for a
single seed) over its **finished** runs only, at the ``last`` or the ``best`` evaluated
round.  The *headline* model of an algorithm (:func:`headline_model`) is the one its paper
reports.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from typing import Any, Iterable

from pfl_theory.sample_stats import mean_sd
# re-exported: the readers lived here before pflt.run_dirs
from pflt.run_dirs import (IGNORED, Run, _number, deduplicate, expand_run_dirs,  # noqa: F401
                           load_run, run_config, run_status, sweep_points)

NOT_FINISHED = ("unfinished", "running")
AT = ("last", "best")


@dataclass
class Group:
    """The runs of one configuration and its label."""

    key: str
    config: dict[str, Any]
    runs: list[Run] = field(default_factory=list)
    label: str = ""

    @property
    def algorithm(self) -> str:
        return str(self.config.get("algorithm", "?"))

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.runs)

    def stats(self, metric: str, at: str = "last") -> tuple[float, float, int]:
        """``(mean, sd, n)`` of ``metric`` at ``last``/``best`` over the finished runs."""
        return mean_sd(r.value(metric, at) for r in self.runs if r.finished)

    def headline(self) -> str | None:
        """The headline model of this configuration's algorithm (:func:`headline_model`)."""
        return headline_model(self.algorithm, models_of(self.runs))


def format_mean_sd(mean: float, sd: float, n: int, digits: int = 4) -> str:
    """``0.8123 ± 0.0041`` (``± –`` for one seed, ``–`` for none)."""
    if n == 0 or not math.isfinite(mean):
        return "–"
    return f"{mean:.{digits}f} ± {sd:.{digits}f}" if n > 1 else f"{mean:.{digits}f} ± –"


def models_of(runs: Iterable[Run]) -> list[str]:
    """Model names evaluated by ``runs`` (``<model>_accuracy`` in their histories)."""
    names: list[str] = []
    for r in runs:
        for e in r.entries:
            for k, v in e.items():
                if k.endswith("_accuracy") and _number(v) and k[:-9] not in names:
                    names.append(k[:-9])
    return names


def headline_model(algorithm: str, models: list[str]) -> str | None:
    """The model an algorithm's paper reports, among ``models`` (those it evaluated).

    The algorithm class's optional ``headline_model`` attribute when it names one of
    ``models``; else ``personalized`` when evaluated (pFedMe, Per-FedAvg, CGPFL, Ditto,
    pFedHN, PLGU, the fine-tuned baselines: personalized-FL papers report the personalized
    models); else the only model evaluated (FedAvg and FedSAM ``global``, Local ``local``,
    IFCA ``cluster``, PPFE ``stage``); else ``None`` (no single headline)."""
    return _headline(str(algorithm), tuple(models))


@functools.lru_cache(maxsize=256)
def _headline(algorithm: str, models: tuple[str, ...]) -> str | None:
    from pflt.catalog import headline_models     # cached: pflt compare imports no torch

    try:
        declared = headline_models().get(algorithm)  # None: unknown here (a plugin not loaded)
    except (ValueError, ImportError):                # a plugin that does not load
        declared = None
    if declared in models:
        return declared
    if "personalized" in models:
        return "personalized"
    return models[0] if len(models) == 1 else None


def group_runs(runs: list[Run]) -> list[Group]:
    """Runs grouped by configuration (first-seen order), labelled by what differs."""
    groups: dict[str, Group] = {}
    for r in runs:
        groups.setdefault(r.key, Group(r.key, r.config)).runs.append(r)
    result = list(groups.values())

    def differing(among: list[Group]) -> list[str]:
        keys = sorted({k for g in among for k in g.config})
        return [k for k in keys
                if len({json.dumps(g.config.get(k), default=str) for g in among}) > 1]

    common = [k for k in differing(result)
              if k != "algorithm" and not k.startswith("hyperparameters.")]
    for g in result:
        same = [h for h in result if h.algorithm == g.algorithm]
        hps = [k for k in differing(same) if k.startswith("hyperparameters.")]
        g.label = " ".join([g.algorithm] + [f"{k.split('.')[-1]}={g.config.get(k)}"
                                            for k in common + hps if k in g.config])
    return result


def metric_names(runs: list[Run], pattern: str | None = None) -> list[str]:
    """Scalar metrics found in the runs' histories (``*_accuracy``, ``*_loss``, …); with
    ``pattern`` (an fnmatch glob or exact name) only the matching ones."""
    import fnmatch

    names: list[str] = []
    for r in runs:
        for e in r.entries:
            for k, v in e.items():
                if k in ("round", "wall_seconds") or k in names:
                    continue
                if _number(v):
                    names.append(k)
    if pattern is None:
        return [n for n in names if n.endswith(("_accuracy", "_loss"))] or names
    chosen = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
    if not chosen:
        raise ValueError(f"--metric {pattern!r} matches no metric of these runs; "
                         f"available: {', '.join(names) or '(none)'}")
    return chosen
