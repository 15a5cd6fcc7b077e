"""Runs grouped by configuration, metrics as mean ± sd over seeds (``pflt compare``, sweeps).

A *run* is a directory written by ``pflt run`` (``history.json``, ``summary.json``).  Two
runs have the same *configuration* when everything but the seed agrees (algorithm,
hyper-parameters, model, data, rounds); the seeds of one configuration are aggregated as
mean and sample standard deviation (``ddof = 1``; ``sd`` is ``nan`` for a single seed).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

#: configuration keys that are not part of the configuration (they vary within a group)
IGNORED = {"seed", "out", "device", "threads", "wall_seconds", "eval_every",
           "checkpoint_every", "no_progress"}


@dataclass
class Run:
    """One finished run: its directory, flattened configuration, seed and history."""

    path: Path
    config: dict[str, Any]
    seed: int
    entries: list[dict[str, Any]]
    final: dict[str, float]
    diverged: bool = False

    @property
    def key(self) -> str:
        """The configuration without the seed, as a canonical string."""
        return json.dumps(self.config, sort_keys=True, default=str)


@dataclass
class Group:
    """The runs of one configuration and its label."""

    key: str
    config: dict[str, Any]
    runs: list[Run] = field(default_factory=list)
    label: str = ""

    def stats(self, metric: str) -> tuple[float, float, int]:
        """``(mean, sd, n)`` of the final value of ``metric`` over the group's runs."""
        return mean_sd([r.final[metric] for r in self.runs
                        if isinstance(r.final.get(metric), (int, float))])


def mean_sd(values: Iterable[float]) -> tuple[float, float, int]:
    """Mean, sample standard deviation (``nan`` when fewer than two values) and count;
    non-finite values are dropped (a diverged seed is reported by its count)."""
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    n = len(vals)
    if n == 0:
        return math.nan, math.nan, 0
    mean = sum(vals) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (n - 1)) if n > 1 else math.nan
    return mean, sd, n


def format_mean_sd(mean: float, sd: float, n: int, digits: int = 4) -> str:
    """``0.8123 ± 0.0041`` (``± –`` for one seed, ``–`` for none)."""
    if n == 0 or not math.isfinite(mean):
        return "–"
    return f"{mean:.{digits}f} ± {sd:.{digits}f}" if n > 1 else f"{mean:.{digits}f} ± –"


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out


def run_config(history_config: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """Flattened configuration (without seed and bookkeeping) and seed of a run."""
    flat = _flatten(history_config)
    seed = int(flat.get("seed", 0))
    config = {k: v for k, v in flat.items()
              if k.split(".")[-1] not in IGNORED and not k.startswith("data.seed")}
    return config, seed


def load_run(path: str | Path) -> Run:
    """Read the run in ``path`` (``history.json`` required, ``summary.json`` optional)."""
    from algorithms.runner import read_history   # history.json + history.jsonl

    path = Path(path)
    hist_path = path / "history.json"
    if not hist_path.is_file():
        raise FileNotFoundError(f"{path} is not a run directory (no history.json); "
                                "pass directories written by `pflt run`")
    hist = read_history(path)
    entries = [e for e in hist.get("entries", []) if isinstance(e, dict)]
    config, seed = run_config(hist.get("config", {}))
    summary = path / "summary.json"
    if summary.is_file():
        from algorithms.run_files import read_summary   # its form, naming file and key
        final = read_summary(summary)
        diverged = False
    else:  # a diverged or interrupted run: its last evaluation
        final = entries[-1] if entries else {}
        diverged = True
    final = {k: float(v) for k, v in final.items()
             if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return Run(path, config, seed, entries, final, diverged)


def expand_run_dirs(paths: Iterable[str | Path]) -> list[Path]:
    """Run directories from the arguments: a sweep directory (with ``sweep.jsonl``) stands
    for all its points."""
    out: list[Path] = []
    for p in map(Path, paths):
        if not p.exists():
            raise FileNotFoundError(f"{p} does not exist")
        log = p / "sweep.jsonl"
        if not (p / "history.json").exists() and log.exists():
            for line in log.read_text().splitlines():
                if line.strip():
                    out.append(Path(json.loads(line)["out"]))
        else:
            out.append(p)
    return out


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
        algorithm = g.config.get("algorithm", "?")
        same = [h for h in result if h.config.get("algorithm", "?") == algorithm]
        hps = [k for k in differing(same) if k.startswith("hyperparameters.")]
        g.label = " ".join([str(algorithm)] + [f"{k.split('.')[-1]}={g.config.get(k)}"
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
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    names.append(k)
    if pattern is None:
        return [n for n in names if n.endswith(("_accuracy", "_loss"))] or names
    chosen = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
    if not chosen:
        raise ValueError(f"--metric {pattern!r} matches no metric of these runs; "
                         f"available: {', '.join(names) or '(none)'}")
    return chosen
