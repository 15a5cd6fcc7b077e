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


def _ok(r: dict) -> bool:
    return r.get("status", "ok") in ("ok", "")


def summarize(rows: list[dict]) -> dict:
    """``{(column, method): {"last": (mean, sd, n), "best": …, "rounds": {T…}, "failed": k,
    "seeds": [finished seeds], "failed_seeds": {seed: reason}}}`` in %, from the CSV rows (a
    row without ``column`` uses its ``model``)."""
    acc = defaultdict(lambda: {"last": [], "best": [], "rounds": set(), "failed": 0,
                               "seeds": set(), "failed_seeds": {}})
    for r in rows:
        key = (r.get("column") or r["model"], r["method"])
        a = acc[key]
        a["rounds"].add(r.get("rounds", ""))
        if not _ok(r):
            a["failed"] += 1
            a["failed_seeds"][int(r["seed"])] = (f"{r.get('status')}: {r.get('reason')}"
                                                 if r.get("reason") else str(r.get("status")))
            continue
        a["seeds"].add(int(r["seed"]))
        a["last"].append(100.0 * float(r["value"]))
        best = r.get("best_value", "")
        a["best"].append(100.0 * float(best) if best not in ("", None) else math.nan)
    return {k: {"last": mean_sd(v["last"]), "best": mean_sd(v["best"]), "rounds": v["rounds"],
                "failed": v["failed"], "seeds": sorted(v["seeds"]),
                "failed_seeds": {s: why for s, why in sorted(v["failed_seeds"].items())
                                 if s not in v["seeds"]}}
            for k, v in acc.items()}


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


#: algorithms whose runs choose a K (``k_hat`` of their summary.json, the CSV's column)
SELECTS_K = ("cgpfl-heur",)


def _selected_k(rep: Reproduction, rows: list[dict]) -> dict:
    """``{method: [(seed, K̂ or "not recorded")]}`` from the CSV's ``k_hat`` column, for the
    finished rows of the methods whose algorithm chooses K."""
    chooses = {r.label for r in rep.rows if r.algorithm in SELECTS_K}
    out: dict = {}
    for r in rows:
        if not _ok(r) or (r["method"] not in chooses and not r.get("k_hat")):
            continue
        k = r.get("k_hat") or "not recorded"
        if r.get("mu_band"):
            k = f"{k} ({r['mu_band']})"
        out.setdefault(r["method"], []).append((int(r["seed"]), k))
    return {m: sorted(v) for m, v in out.items()}


def _fmt(m: float, sd: float, n: int) -> str:
    if n == 0:
        return "–"
    return f"{m:.2f} ± {sd:.2f}" if n > 1 else f"{m:.2f}"


def _gap(m: float, paper) -> str:
    return "–" if paper is None or not math.isfinite(m) else f"{m - paper:+.2f}"


def by_rounds(rows: list[dict], column: str) -> dict[tuple[int, str], list[dict]]:
    """The rows of ``column`` grouped by (rounds T, ``--option`` replacements), most rows
    first, then larger T, then the entry's own setting: runs of different T or options are
    never averaged together."""
    groups: dict[tuple[int, str], list[dict]] = {}
    for r in rows:
        if (r.get("column") or r["model"]) == column:
            groups.setdefault((int(r.get("rounds") or 0), r.get("options") or ""), []).append(r)
    return dict(sorted(groups.items(), key=lambda kv: (-len(kv[1]), -kv[0][0], kv[0][1])))


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
        for (t, options), sub in groups.items():
            if len(groups) > 1 or options:
                out += [f"### T = {t}" + (f", --option {options}" if options else ""), ""]
            out += _section(rep, col, sub, [c for c in claims if c[0] == col.key])
    return "\n".join(out).rstrip() + "\n"


def _seeds_text(st: dict, expected: set[int]) -> str:
    """The seeds cell: those that finished, then the failed and missing ones marked."""
    text = ",".join(map(str, st["seeds"])) or "–"
    failed = sorted(st["failed_seeds"])
    missing = sorted(expected - set(st["seeds"]) - set(failed))
    if failed:
        text += f" (seed {','.join(map(str, failed))} failed)"
    if missing:
        text += f" (seed {','.join(map(str, missing))} missing)"
    return text


def _section(rep: Reproduction, col, rows: list[dict], col_claims) -> list[str]:
    s = summarize(rows)
    expected = {int(r["seed"]) for r in rows}       # the seeds any method of this group ran
    out = ["| method | paper | ours last round | gap | ours best round | gap | seeds | T |",
           "|---|---|---|---|---|---|---|---|"]
    incomplete = []
    for row in rep.rows:
        st = s.get((col.key, row.label))
        paper = rep.numbers.get((row.label, col.key))
        ptxt = "–" if paper is None else f"{paper:.2f}"
        if st is None:
            out.append(f"| {row.label} | {ptxt} | not run | – | not run | – | – | – |")
            continue
        seeds = _seeds_text(st, expected)
        if "(" in seeds:
            incomplete.append(f"* {row.label}: seeds {seeds}"
                              + "".join(f"; seed {k}: {why}"
                                        for k, why in st["failed_seeds"].items()))
        t = ",".join(sorted(x for x in st["rounds"] if x))
        out.append(f"| {row.label} | {ptxt} | {_fmt(*st['last'])} | {_gap(st['last'][0], paper)}"
                   f" | {_fmt(*st['best'])} | {_gap(st['best'][0], paper)} | {seeds} | {t} |")
    out.append("")
    if incomplete:
        out += ["Incomplete (a mean is over the seeds that finished; running the command "
                "again runs the failed and missing cells):", "", *incomplete, ""]
    khat = _selected_k(rep, rows)
    if khat:
        out += ["K̂ chosen by CGPFL-Heur's e(K) (`k_hat` of the runs' summary.json, the CSV's "
                "`k_hat` column): "
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
