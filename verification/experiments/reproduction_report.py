"""A reproduction's CSV as a table beside the paper's numbers, and its ordering claims.

Per (column, method): mean ± sample sd (ddof 1) over seeds of the last-round accuracy and of
the best evaluated round, in %, and the gap ours − paper.  An ordering claim ``a > b`` is
judged on the seed means with the standard error of the difference
``se = sqrt(sd_a²/n_a + sd_b²/n_b)`` (independent seeds) by
:func:`verification.core.verdicts.difference_three_way` (z = 2): HOLDS, FAILS or
INCONCLUSIVE; fewer than 2 finished seeds on either side is INCONCLUSIVE.
"""

from __future__ import annotations

import math
from collections import defaultdict

from pfl_theory.sample_stats import mean_sd
from verification.core.registry import Verdict
from verification.core.verdicts import difference_three_way
from verification.experiments.reproduction import Reproduction

Z = 2.0




def summarize(rows: list[dict]) -> dict:
    """``{(column, method): {"last": (mean, sd, n), "best": …, "rounds": {T…}, "failed": k}}``
    in %, from the CSV rows (a row without ``column`` uses its ``model``)."""
    acc = defaultdict(lambda: {"last": [], "best": [], "rounds": set(), "failed": 0, "seeds": set()})
    for r in rows:
        key = (r.get("column") or r["model"], r["method"])
        a = acc[key]
        a["rounds"].add(r.get("rounds", ""))
        if r.get("status", "ok") not in ("ok", ""):
            a["failed"] += 1
            continue
        a["seeds"].add(int(r["seed"]))
        a["last"].append(100.0 * float(r["value"]))
        best = r.get("best_value", "")
        a["best"].append(100.0 * float(best) if best not in ("", None) else math.nan)
    return {k: {"last": mean_sd(v["last"]), "best": mean_sd(v["best"]), "rounds": v["rounds"],
                "failed": v["failed"], "seeds": sorted(v["seeds"])} for k, v in acc.items()}


def ordering(summary: dict, column: str, better: str, worse: str,
             which: str = "last") -> tuple[Verdict, str]:
    """Verdict of the claim ``better > worse`` on ``column`` (rules in the module docstring)."""
    a, b = summary.get((column, better)), summary.get((column, worse))
    if a is None or b is None:
        missing = better if a is None else worse
        raise KeyError(f"no rows for {missing!r} on {column!r}")
    (ma, sa, na), (mb, sb, nb) = a[which], b[which]
    if na < 2 or nb < 2:
        return Verdict.INCONCLUSIVE, (f"{better} > {worse} ({column}, {which}): fewer than 2 "
                                      f"seeds ({na}, {nb}): INCONCLUSIVE")
    se = math.sqrt(sa ** 2 / na + sb ** 2 / nb)
    v = difference_three_way(ma - mb, se, z=Z)
    return v, (f"{better} > {worse} ({column}, {which}): {ma:.2f} − {mb:.2f} = {ma - mb:+.2f} "
               f"± {se:.2f} (se, {na}+{nb} seeds): {v.value}")


def _selected_k(rows: list[dict], column: str) -> dict:
    """``{method: [(seed, K̂)]}`` read from the run directories (the ``--out`` of each row's
    command) whose ``summary.json`` has ``k_hat``; rows whose run directory is absent are
    left out."""
    import json
    import shlex
    from pathlib import Path

    out: dict = {}
    for r in rows:
        if (r.get("column") or r["model"]) != column or r.get("status", "ok") != "ok":
            continue
        argv = shlex.split(r["command"])
        if "--out" not in argv:
            continue
        path = Path(argv[argv.index("--out") + 1]) / "summary.json"
        try:
            k = json.loads(path.read_text()).get("k_hat")
        except (OSError, ValueError):
            continue
        if k is not None:
            out.setdefault(r["method"], []).append((int(r["seed"]), int(k)))
    return {m: sorted(v) for m, v in out.items()}


def _fmt(m: float, sd: float, n: int) -> str:
    if n == 0:
        return "–"
    return f"{m:.2f} ± {sd:.2f}" if n > 1 else f"{m:.2f}"


def _gap(m: float, paper) -> str:
    return "–" if paper is None or not math.isfinite(m) else f"{m - paper:+.2f}"


def by_rounds(rows: list[dict], column: str) -> dict[int, list[dict]]:
    """The rows of ``column`` grouped by their rounds T (most rows first, then larger T):
    runs of different T are never averaged together."""
    groups: dict[int, list[dict]] = {}
    for r in rows:
        if (r.get("column") or r["model"]) == column:
            groups.setdefault(int(r.get("rounds") or 0), []).append(r)
    return dict(sorted(groups.items(), key=lambda kv: (-len(kv[1]), -kv[0])))


def markdown(rep: Reproduction, rows: list[dict], *, claims=(), command: str = "") -> str:
    """The reproduction's markdown: per column (and per T when several ran), ours beside the
    paper's numbers."""
    out = [f"# {rep.paper} {rep.table}: ours vs paper ({rep.name})", ""]
    if command:
        out += [f"Command: `{command}`", ""]
    out += [rep.notes, "",
            "Ours: mean ± sd (sample sd over training seeds; the partition is fixed, data seed "
            "0) of the sample-weighted test accuracy (%) of the method's evaluated model, at "
            "the last round and at the best evaluated round (every `eval_every` rounds); gap = "
            "ours − paper. Each seed is one CSV row whose `command` re-runs it.", ""]
    for col in rep.columns:
        paper_t = col.rounds or rep.rounds
        out += [f"## {col.key} ({col.data}, {col.model}; the paper's T = {paper_t})", ""]
        groups = by_rounds(rows, col.key)
        if not groups:
            out += ["not run here: no rows in the CSV (the data are not on this machine or the "
                    f"cells did not run): `pflt reproduce {rep.name} --data-dir DIR`", ""]
            continue
        for t, sub in groups.items():
            if len(groups) > 1:
                out += [f"### T = {t}", ""]
            out += _section(rep, col, sub, [c for c in claims if c[0] == col.key])
    return "\n".join(out).rstrip() + "\n"


def _section(rep: Reproduction, col, rows: list[dict], col_claims) -> list[str]:
    s = summarize(rows)
    out = ["| method | paper | ours last round | gap | ours best round | gap | seeds | T |",
           "|---|---|---|---|---|---|---|---|"]
    for row in rep.rows:
        st = s.get((col.key, row.label))
        paper = rep.numbers.get((row.label, col.key))
        ptxt = "–" if paper is None else f"{paper:.2f}"
        if st is None:
            out.append(f"| {row.label} | {ptxt} | not run | – | not run | – | – | – |")
            continue
        seeds = ",".join(map(str, st["seeds"])) or "–"
        if st["failed"]:
            seeds += f" ({st['failed']} failed)"
        t = ",".join(sorted(x for x in st["rounds"] if x))
        out.append(f"| {row.label} | {ptxt} | {_fmt(*st['last'])} | {_gap(st['last'][0], paper)}"
                   f" | {_fmt(*st['best'])} | {_gap(st['best'][0], paper)} | {seeds} | {t} |")
    out.append("")
    khat = _selected_k(rows, col.key)
    if khat:
        out += ["K̂ chosen by CGPFL-Heur's e(K) (`k_hat` of the runs' summary.json): "
                + "; ".join(f"{m}: " + ", ".join(f"seed {s} → {k}" for s, k in ks)
                            for m, ks in khat.items()), ""]
    if col_claims:
        out += ["Ordering claims (difference > 2 se: HOLDS, < −2 se: FAILS, else INCONCLUSIVE):", ""]
        for _, better, worse in col_claims:
            for which in ("last", "best"):
                try:
                    out.append(f"* {ordering(s, col.key, better, worse, which)[1]}")
                except KeyError as exc:
                    out.append(f"* {better} > {worse} ({which}): not judged ({exc.args[0]})")
        out.append("")
    return out
