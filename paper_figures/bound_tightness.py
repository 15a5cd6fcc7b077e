"""Figure: every bound next to its measurement, per theorem, on log axes over the grid.

Not a figure of any paper — the picture a theory paper never shows: for each check of kind
``bound`` (a theorem's right-hand side with computed constants) or ``envelope`` (an O(·)
shape with the implied constant C), the measured quantity and the bound at every grid point
(step sizes, sample sizes, input scales, radii…), and the trivial bound where the check
states one.  The vertical distance between the two curves is the tightness.

It draws the verify results it is given and never runs checks itself: the ``results.json``
named by ``PFLT_RESULTS_JSON`` (a file or a directory holding one; ``pflt figures
--verify-results PATH`` sets it), else the most recent ``results.json`` with bound/envelope
checks under ``out_dir`` or ``./verify_out``; without one the figure says how to produce it
and the CSV has no rows (``pflt verify --quick --kind bound --kind envelope --out
verify_out``, then ``pflt figures --only bound_tightness --verify-results verify_out``).
Grid data come from each result's ``extra``: ``grid``
(``{"name", "values", "measured", "bound", "trivial"}``, verification/core/bound_grid.py) or, for
envelopes, ``measured``/``shape`` lists with the constant ``C`` (bound = C·shape) and the
grid variable as the other list of equal length.

Checks of kind ``worst_case`` get a panel of their three numbers — the engine on an
instance, the exact worst case over the class (PEP) and the paper's bound — from ``extra``
(``measured_engine``, ``worst_case``, ``bound``): the gap bound–worst is the theorem's own
looseness, worst–measured the instance's easiness.

The worst-case panels come first.  When the results hold no worst-case panel, the first
panel says why instead of leaving them out silently: the checks did not run (``NOT RUN``,
with the reason, e.g. PEPit not installed: ``pip install -e '.[pep]'``) or the results have
no worst_case check (a ``--kind bound`` run).

Pages of at most :data:`PER_PAGE` panels (4 rows of 3; the quick suite's 37 panels in one
image were 1386×4224 pixels): ``bound_tightness.png`` is the first page,
``bound_tightness_p2.png`` … the next ones; the titles say "page k of n".

Files: ``bound_tightness.png`` (+ ``bound_tightness_pK.png``) and ``bound_tightness.csv``
(long format: ``check, verdict, variable, x, measured, bound, trivial, worst_case``; the last
only for worst_case checks).
"""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path
from typing import Any

from paper_figures._io import RESULTS_ENV_VAR, find_verify_results, write_csv
from paper_figures._style import save_figure, shown_path  # noqa: E402

ENV_VAR = RESULTS_ENV_VAR
KINDS = ("bound", "envelope", "worst_case")


def _has_bounds(path: Path) -> bool:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return any(c.get("kind") in KINDS for c in data.get("checks", []) if isinstance(c, dict))


def find_results(out_dir: Path) -> Path | None:
    """The results.json to draw (module docstring), or ``None``."""
    return find_verify_results(out_dir, _has_bounds)


def _float(v: Any) -> float:
    if isinstance(v, str):  # results.json stores non-finite floats as strings
        return {"Infinity": math.inf, "-Infinity": -math.inf}.get(v, math.nan)
    return math.nan if v is None else float(v)


def _tightness(result: dict[str, Any]) -> float:
    """A result's tightness; ``null`` (measured <= 0, see ``tightness_note``) is ∞."""
    v = result.get("tightness")
    return math.inf if v is None else _float(v)


def series(entry: dict[str, Any]) -> dict[str, Any] | None:
    """Grid series of one results.json check entry (the seed with the smallest tightness),
    or ``None`` when its results carry no grid data."""
    results = [r for r in entry.get("results", []) if r.get("verdict") != "ERROR"]
    if not results:
        return None
    r = min(results, key=_tightness)
    extra = r.get("extra") or {}
    if entry.get("kind") == "worst_case":
        if extra.get("worst_case") is None:
            return None
        return {"name": "one setting", "x": [1.0], "measured": [_float(extra["measured_engine"])],
                "bound": [_float(extra["bound"])], "trivial": [math.nan],
                "worst": [_float(extra["worst_case"])]}
    grid = extra.get("grid")
    if isinstance(grid, dict) and grid.get("values"):
        trivial = grid.get("trivial") or [math.nan] * len(grid["values"])
        return {"name": grid.get("name", "x"), "x": [_float(v) for v in grid["values"]],
                "measured": [_float(v) for v in grid["measured"]],
                "bound": [_float(v) for v in grid["bound"]],
                "trivial": [_float(v) for v in trivial]}
    meas, shape, c = extra.get("measured"), extra.get("shape"), extra.get("C")
    if isinstance(meas, list) and isinstance(shape, list) and c is not None \
            and len(meas) == len(shape) >= 2 and all(not isinstance(v, list) for v in meas):
        name, xs = "grid index", list(range(1, len(meas) + 1))
        for key, val in extra.items():
            if key not in ("measured", "shape", "ratios") and isinstance(val, list) \
                    and len(val) == len(meas) and all(isinstance(v, (int, float)) for v in val):
                name, xs = key, val
                break
        return {"name": name, "x": [_float(v) for v in xs],
                "measured": [_float(v) for v in meas],
                "bound": [_float(c) * _float(v) for v in shape],
                "trivial": [math.nan] * len(meas)}
    return None


def _load(path: Path) -> dict[str, Any]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("checks"), list):
        raise ValueError(f"{path}: not a pflt verify results.json (no 'checks' list)")
    return data


def load_series(path: Path) -> list[dict[str, Any]]:
    """``[{id, verdict, kind, name, x, measured, bound, trivial}]`` for every bound/envelope
    check of a results.json that carries grid data, the worst_case checks first."""
    out = []
    for entry in _load(path)["checks"]:
        if entry.get("kind") in KINDS:
            s = series(entry)
            if s is not None:
                out.append({"id": entry["id"], "verdict": entry.get("verdict", "?"),
                            "kind": entry["kind"], **s})
    return sorted(out, key=lambda p: p["kind"] != "worst_case")


def missing_worst_cases(path: Path) -> str:
    """Why the results give no worst-case panel ('' when they give one): the worst_case
    checks did not run (their reasons) or the results hold none."""
    checks = [c for c in _load(path)["checks"] if isinstance(c, dict)
              and c.get("kind") == "worst_case"]
    if any(series(c) is not None for c in checks):
        return ""
    if not checks:
        return ("no worst-case panel: these results hold no worst_case check\n"
                "(pflt verify --quick --kind worst_case adds them; needs PEPit)")
    reasons: dict[str, int] = {}
    for c in checks:
        r = next((r for r in c.get("results") or [] if isinstance(r, dict)), {})
        extra = r.get("extra") if isinstance(r.get("extra"), dict) else {}
        why = str(extra.get("not_run_reason") or r.get("detail") or c.get("verdict"))
        reasons[why] = reasons.get(why, 0) + 1
    lines = [f"no worst-case panel: {len(checks)} worst_case check(s) gave no worst case"]
    for why, n in sorted(reasons.items(), key=lambda x: -x[1]):
        lines += [f"{n}: " + "\n".join(textwrap.wrap(why, 48))]
    return "\n".join(lines)


NO_RESULTS = ("no `pflt verify` results with bound/envelope checks given.\n"
              "Run `pflt verify --quick --kind bound --kind envelope --out verify_out`,\n"
              "then `pflt figures --only bound_tightness --verify-results verify_out`.")


def _positive(xs: list[float], ys: list[float]) -> tuple[list[float], list[float]]:
    pairs = [(x, y) for x, y in zip(xs, ys) if y > 0 and math.isfinite(y)]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def _worst_case_panel(ax, p: dict[str, Any]) -> None:
    """Three markers on a log axis: measured ≤ worst case ≤ bound, with the two ratios."""
    vals = [p["measured"][0], p["worst"][0], p["bound"][0]]
    names = ["measured\n(engine)", "worst case\n(PEP)", "bound\n(paper)"]
    for i, (v, c) in enumerate(zip(vals, ("#ef6c00", "#c62828", "#1565c0"))):
        if v > 0 and math.isfinite(v):
            ax.plot([i], [v], "o", color=c, markersize=8)
    ax.set_yscale("log")
    ax.set_xticks(range(3), names, fontsize=7)
    ax.set_xlim(-0.5, 2.5)
    ratios = [b / a if a > 0 else math.inf for a, b in zip(vals[:2], vals[1:])]
    ax.set_title(f"{p['id']}\nworst_case: {p['verdict']}; bound/worst {ratios[1]:.3g}, "
                 f"worst/measured {ratios[0]:.3g}", fontsize=8)


#: panels per page: 4 rows of 3 (a page of 1386×1408 pixels at 110 dpi)
PER_PAGE = 12
NCOLS = 3


def _grid_panel(ax, p: dict[str, Any]) -> None:
    from matplotlib.ticker import NullFormatter

    for key, style, label in (("bound", "-", "bound"), ("measured", "o-", "measured"),
                              ("trivial", "--", "trivial bound")):
        xs, ys = _positive(p["x"], p[key])
        if xs:
            ax.plot(xs, ys, style, label=label,
                    color={"bound": "#1565c0", "measured": "#ef6c00",
                           "trivial": "#9e9e9e"}[key])
    ax.set_yscale("log")
    if all(x > 0 for x in p["x"]):
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(p["name"])
    ax.set_title(f"{p['id']}\n{p['kind']}: {p['verdict']}", fontsize=8)
    ax.legend(fontsize=7)


def _note_panel(ax, note: str) -> None:
    ax.set_xticks([])
    ax.set_yticks([])
    for side in ax.spines.values():
        side.set_color("#b71c1c")
    ax.set_title("worst case (PEP): missing", fontsize=8, color="#b71c1c")
    ax.text(0.04, 0.5, note, ha="left", va="center", fontsize=7, color="#b71c1c",
            transform=ax.transAxes)


def _page(panels: list, note: str, source: Path, page: int, pages: int, path: Path) -> Path:
    import matplotlib.pyplot as plt

    slots = [("note", note)] if note else []
    slots += [("panel", p) for p in panels]
    ncols = min(NCOLS, max(1, len(slots)))
    nrows = max(1, math.ceil(len(slots) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.2 * nrows), squeeze=False)
    for ax, (what, p) in zip(axes.ravel(), slots):
        if what == "note":
            _note_panel(ax, p)
        elif "worst" in p:
            _worst_case_panel(ax, p)
        else:
            _grid_panel(ax, p)
    for ax in axes.ravel()[len(slots):]:
        ax.axis("off")
    where = f" — page {page} of {pages}" if pages > 1 else ""
    fig.suptitle(f"bound (blue) vs measurement (orange){where} — {shown_path(source)}",
                 fontsize=9)
    # leave room at the top for the suptitle above two-line panel titles (a row is 3.2 in)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.45 / (3.2 * nrows)))
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path


def make(out_dir: Path, *, quick: bool = False, seed: int = 0) -> list[Path]:
    """Draw one panel per bound/envelope/worst_case check, :data:`PER_PAGE` a page; returns
    ``[png, png_p2, …, csv]``.  ``quick`` and ``seed`` do not change the drawing (the figure
    only reads verify results)."""
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("bound_tightness_p*.png"):   # pages of a longer earlier run
        old.unlink()
    source = find_results(out_dir)
    panels = load_series(source) if source is not None else []
    note = missing_worst_cases(source) if source is not None else ""
    csv_path = write_csv(out_dir / "bound_tightness.csv",
                         ["check", "verdict", "variable", "x", "measured", "bound", "trivial",
                          "worst_case"],
                         [(p["id"], p["verdict"], p["name"], x, m, b, t, w) for p in panels
                          for x, m, b, t, w in zip(p["x"], p["measured"], p["bound"],
                                                   p["trivial"],
                                                   p.get("worst", [""] * len(p["x"])))])
    png_path = out_dir / "bound_tightness.png"
    if not panels and not note:
        fig, ax = plt.subplots(figsize=(4.2 * NCOLS, 3.2))
        ax.axis("off")
        ax.text(0.02, 0.5, NO_RESULTS if source is None else
                f"{shown_path(source)}: no bound/envelope results with grid data",
                ha="left", va="center", fontsize=8, transform=ax.transAxes)
        fig.suptitle("bound vs measurement: nothing to draw", fontsize=9)
        save_figure(fig, png_path, dpi=110)
        plt.close(fig)
        return [png_path, csv_path]
    # the panels (and the note) spread evenly over the fewest pages: no page of one panel
    slots = ([None] if note else []) + panels
    pages = max(1, math.ceil(len(slots) / PER_PAGE))
    cuts = [round(k * len(slots) / pages) for k in range(pages + 1)]
    chunks = [[p for p in slots[a:b] if p is not None] for a, b in zip(cuts, cuts[1:])]
    pngs = [_page(chunk, note if k == 0 else "", source, k + 1, len(chunks),
                  png_path if k == 0 else out_dir / f"bound_tightness_p{k + 1}.png")
            for k, chunk in enumerate(chunks)]
    return [*pngs, csv_path]
