"""The leaderboard's table: the "better than Local" rule and the Markdown of
``benchmarks/leaderboard.py`` (its ``leaderboard.md``) and of the documentation's benchmark
page (:mod:`paper_figures.docs_pages`, from the committed ``leaderboard.csv``) — one
implementation for both.

A row is one (setting, algorithm, model): ``last_mean``/``last_sd``/``best_mean``/``best_sd``
(test accuracy over ``n`` seeds), ``seconds_per_round``, ``headline`` (the model the
algorithm's paper reports) and ``beats_local`` (:func:`judge_against_local`).
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

_FLOATS = ("last_mean", "last_sd", "best_mean", "best_sd", "seconds_per_round")


def ahead(a: tuple[float, float, int], b: tuple[float, float, int]) -> bool | None:
    """Whether mean ``a`` exceeds mean ``b`` by more than two combined standard errors; each is
    ``(mean, sd, n)`` over seeds (an undefined sd — one seed — counts as 0). ``None`` when
    either has no seed or ``a`` is not finite. The leaderboard's "better than Local" and
    ``pflt compare``'s "within noise" are this rule."""
    (ma, sa, na), (mb, sb, nb) = a, b
    if not (na and nb) or not math.isfinite(ma):
        return None
    se = math.sqrt(sum((s if math.isfinite(s) else 0.0) ** 2 / n for s, n in ((sa, na), (sb, nb))))
    return ma > mb + 2 * se


def beats(r: dict, local: dict) -> bool | None:
    """Whether ``r``'s mean last-round accuracy exceeds Local's by more than two combined
    standard errors (:func:`ahead`; ``None`` when either has no finished seed)."""
    return ahead((r["last_mean"], r["last_sd"], r["n"]),
                 (local["last_mean"], local["last_sd"], local["n"]))


def judge_against_local(rows: list[dict]) -> list[dict]:
    """Mark every row of a setting with whether its mean beats Local's (:func:`beats`)."""
    for setting in dict.fromkeys(r["setting"] for r in rows):
        part = [r for r in rows if r["setting"] == setting]
        local = next((r for r in part if r["algorithm"] == "local" and r["headline"]), None)
        for r in part:
            r["beats_local"] = None if local is None or r["algorithm"] == "local" else \
                beats(r, local)
    return rows


def read_csv(path: Path) -> list[dict]:
    """The rows of a ``leaderboard.csv``, typed back (floats, ``n``, booleans, ``None``)."""
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        for key in _FLOATS:
            r[key] = float(r[key]) if r.get(key) not in (None, "") else (
                None if key == "seconds_per_round" else math.nan)
        r["n"] = int(r["n"] or 0)
        r["headline"] = r["headline"] == "True"
        r["beats_local"] = {"True": True, "False": False}.get(r.get("beats_local", ""))
    return rows


def _pm(mean: float, sd: float, n: int) -> str:
    if not n or not math.isfinite(mean):
        return "–"
    return f"{mean:.4f} ± {sd:.4f}" if n > 1 and math.isfinite(sd) else f"{mean:.4f}"


def markdown(rows: list[dict], conditions: str, *, level: int = 3) -> str:
    """Per setting, the headline models ranked by last-round mean, then the other models."""
    out = [f"_{conditions}_", ""]
    for setting in dict.fromkeys(r["setting"] for r in rows):
        part = sorted((r for r in rows if r["setting"] == setting),
                      key=lambda r: (not r["headline"], -(r["last_mean"] if
                                                          math.isfinite(r["last_mean"]) else -1)))
        out += [f"{'#' * level} {setting}", "",
                "| rank | algorithm | model | last round | best round | s/round | vs Local |",
                "|---|---|---|---|---|---|---|"]
        rank = 0
        for r in part:
            if r["headline"]:
                rank += 1
            vs = {True: "better", False: "no better than Local", None: "—"}[r["beats_local"]]
            spr = f"{r['seconds_per_round']:.3f}" if r["seconds_per_round"] is not None and \
                math.isfinite(r["seconds_per_round"]) else "–"
            out.append(f"| {rank if r['headline'] else ''} | {r['algorithm']} | {r['model']}"
                       f"{' (headline)' if r['headline'] else ''} | "
                       f"{_pm(r['last_mean'], r['last_sd'], r['n'])} | "
                       f"{_pm(r['best_mean'], r['best_sd'], r['n'])} | {spr} | "
                       f"{vs if r['headline'] else ''} |")
        out.append("")
    return "\n".join(out)
