"""Figure: verdicts of the verification suite per paper (stacked bars, one per verdict).

Not a figure of any paper — a one-glance summary of ``pflt verify``: for each paper, how
many of its registered claims the measurements support (HOLDS), refute (FAILS), support in
a corrected reading (ERRATUM), cannot decide at this size (INCONCLUSIVE), could not test
(ERROR), or did not run for a missing dependency (NOT RUN, with the reason printed under
the bars: the worst-case checks without PEPit say so here, never silently).

It draws the verify results it is given and nothing else (it never runs checks itself):

1. the ``results.json`` named by the environment variable ``PFLT_RESULTS_JSON`` (a file, or
   a directory containing ``results.json``; ``pflt figures --verify-results PATH`` sets it);
2. else the most recently written ``results.json`` under ``out_dir`` or in ``./verify_out``.

One row per paper: a check counts under its paper's canonical id (:func:`paper_key`,
verification/core/papers.py: "PLGU (CVPR 2023)" and "PLGU (Qu et al., CVPR 2023)" are one
row); the
four papers of the mission (:data:`paper_figures.readme_blocks.PAPERS`) come first; past
:data:`MAX_ROWS` rows the other sources (an algorithm's oracle, a data generator, another
paper's rate) share one row, as in the README's verdict table.  The title names the file drawn, its size,
seeds and time.  Without any results the figure says so (and how to produce them) and the
CSV has no rows.

Files: ``verification_summary.png`` and ``verification_summary.csv`` (columns
``paper, HOLDS, FAILS, ERRATUM, INCONCLUSIVE, ERROR, VACUOUS, NOT RUN, total, reconstructed,
sources``; one row per plotted row, ``sources`` the paper keys a row stands for).
Up to :data:`MAX_ROWS` paper keys each has its row; past that the sources outside the
mission's papers share one.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path
from typing import Any

from paper_figures._io import RESULTS_ENV_VAR, find_verify_results
from paper_figures._style import save_figure, shown_path  # noqa: E402
from verification.core.papers import entry_paper_id, short_name

ENV_VAR = RESULTS_ENV_VAR
VERDICTS = ("HOLDS", "FAILS", "ERRATUM", "INCONCLUSIVE", "ERROR", "VACUOUS", "NOT RUN")
COLORS = {"HOLDS": "#2e7d32", "VACUOUS": "#c0ca33", "FAILS": "#ef6c00", "ERRATUM": "#6a1b9a",
          "INCONCLUSIVE": "#90a4ae", "ERROR": "#c62828", "NOT RUN": "#e0e0e0"}
NO_RESULTS = ("no `pflt verify` results given — nothing to summarise.\n"
              "Run `pflt verify --quick --out verify_out`, then\n"
              "`pflt figures --only verification_summary --verify-results verify_out`.")


def find_results(out_dir: Path) -> Path | None:
    """The results.json to summarise (see the module docstring), or ``None``."""
    return find_verify_results(out_dir)


def paper_key(entry: dict[str, Any]) -> str:
    """The row a results.json check entry counts in: its paper's short name by the canonical
    paper id (verification/core/papers.py: ``CGPFL (Tang, Guo, Guo, IJCAI 2022)`` → ``CGPFL``);
    an unknown paper as it is written."""
    return short_name(entry_paper_id(entry))


BROKEN = "(broken check modules)"
OTHERS = "other sources"
#: up to this many paper keys each has its row; past it the sources outside the mission's
#: papers share one (the quick suite's 40 sources in 40 rows would be a 20-inch list)
MAX_ROWS = 10


def _not_run_reason(entry: dict[str, Any]) -> str:
    for r in entry.get("results") or []:
        if isinstance(r, dict) and r.get("verdict") == "NOT RUN":
            extra = r.get("extra") if isinstance(r.get("extra"), dict) else {}
            return str(extra.get("not_run_reason") or r.get("detail") or "reason not stated")
    return "reason not stated"


def load_counts(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per-row verdict counts from a results.json (validated) and its run metadata
    (``not_run``: ``{reason: [kinds]}`` of the checks that did not run)."""
    from paper_figures.readme_blocks import PAPERS

    data = json.loads(Path(path).read_text(encoding="utf-8"))
    checks = data.get("checks") if isinstance(data, dict) else None
    if not isinstance(checks, list):
        raise ValueError(f"{path}: not a pflt verify results.json (no 'checks' list)")
    counts: dict[str, Counter] = {}
    reconstructed: Counter = Counter()
    sources: dict[str, set[str]] = {}
    not_run: dict[str, Counter] = {}
    for entry in checks:
        if not isinstance(entry, dict) or entry.get("verdict") not in VERDICTS:
            raise ValueError(f"{path}: malformed check entry {entry!r}")
    keys = [BROKEN if e.get("kind") == "import" else paper_key(e) for e in checks]
    fold = len(set(keys)) > MAX_ROWS
    for entry, key in zip(checks, keys):
        row = OTHERS if fold and key not in PAPERS and key != BROKEN else key
        counts.setdefault(row, Counter())[entry["verdict"]] += 1
        reconstructed[row] += bool(entry.get("reconstructed"))
        sources.setdefault(row, set()).add(key)
        if entry["verdict"] == "NOT RUN":
            not_run.setdefault(_not_run_reason(entry), Counter())[str(entry.get("kind"))] += 1
    order = [p for p in PAPERS if p in counts] + sorted(set(counts) - set(PAPERS) - {OTHERS})
    order += [OTHERS] if OTHERS in counts else []
    rows = [{"paper": (f"{len(sources[row])} other source(s)" if row == OTHERS else row),
             **{v: counts[row][v] for v in VERDICTS}, "total": sum(counts[row].values()),
             "reconstructed": reconstructed[row], "sources": "; ".join(sorted(sources[row]))}
            for row in order]
    meta = {"size": data.get("size", "?"), "seeds": data.get("seeds", []),
            "time": (data.get("environment") or {}).get("time_utc", "?"),
            "not_run": {why: dict(kinds) for why, kinds in not_run.items()}}
    return rows, meta


def not_run_note(not_run: dict[str, dict[str, int]]) -> str:
    """``12 worst_case checks NOT RUN: PEPit is not installed …`` — one line per reason."""
    lines = []
    for why, kinds in sorted(not_run.items(), key=lambda x: -sum(x[1].values())):
        what = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
        lines.append(f"{what} check(s) NOT RUN: {why}")
    return "\n".join(lines)


#: a number is written on a bar segment only when it fits inside with this many pixels to
#: spare on each side (else the segment is too narrow: the count is in the CSV and the total
#: at the bar's end)
PAD_PX = 2.0


def _label_segments(fig, ax, segments) -> None:
    """Write each segment's count inside it where it fits (:data:`PAD_PX`), hide it where it
    does not; the row's total goes after the bar."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for text, left, width in segments:
        box = text.get_window_extent(renderer)
        x0 = ax.transData.transform((left, 0))[0]
        x1 = ax.transData.transform((left + width, 0))[0]
        text.set_visible(box.width + 2 * PAD_PX <= x1 - x0)


def make(out_dir: Path, *, quick: bool = False, seed: int = 0) -> list[Path]:
    """Draw the per-paper verdict bars of the given verify results; returns ``[png, csv]``.
    ``quick`` and ``seed`` do not change anything (no check is run here)."""
    import textwrap

    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    source = find_results(out_dir)
    rows, meta = load_counts(source) if source is not None else ([], {})

    csv_path = out_dir / "verification_summary.csv"
    with csv_path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=["paper", *VERDICTS, "total", "reconstructed",
                                                "sources"])
        writer.writeheader()
        writer.writerows(rows)

    note = not_run_note(meta.get("not_run", {}))
    note = "\n".join(textwrap.fill(line, 110) for line in note.splitlines())
    n_note = note.count("\n") + 1 if note else 0
    height = 2.3 + 0.5 * max(len(rows), 1) + 0.22 * n_note
    fig, ax = plt.subplots(figsize=(9.0, height))
    papers = [r["paper"] for r in rows]
    shown = [v for v in VERDICTS if any(r[v] for r in rows)]
    left = [0] * len(rows)
    segments = []
    for verdict in shown:
        values = [r[verdict] for r in rows]
        ax.barh(papers, values, left=left, color=COLORS[verdict], label=verdict, height=0.7)
        for i, v in enumerate(values):
            if v:
                dark = verdict in ("NOT RUN", "VACUOUS")
                segments.append((ax.text(left[i] + v / 2, i, str(v), ha="center",
                                         va="center", color="black" if dark else "white",
                                         fontsize=8), left[i], v))
        left = [a + b for a, b in zip(left, values)]
    for i, r in enumerate(rows):
        ax.text(r["total"], i, f" {r['total']}", ha="left", va="center", fontsize=8)
    if source is None:
        ax.text(0.5, 0.5, NO_RESULTS, ha="center", va="center", transform=ax.transAxes,
                fontsize=9)
        ax.set_title("verification summary: no verify results", fontsize=10)
        ax.set_yticks([])
    elif not rows:
        ax.text(0.5, 0.5, f"no checks in {shown_path(source)}", ha="center", va="center",
                transform=ax.transAxes)
        ax.set_title("verification summary: no checks", fontsize=10)
    ax.invert_yaxis()
    ax.set_xlabel("number of checks")
    if rows:
        ax.set_xlim(0, max(r["total"] for r in rows) * 1.08)
    total = {v: sum(r[v] for r in rows) for v in VERDICTS}
    if source is not None:
        counts = ", ".join(f"{total[v]} {v}" for v in VERDICTS if total[v])
        fig.suptitle(f"pflt verify --{meta['size']}: {sum(r['total'] for r in rows)} checks "
                     f"by paper", fontsize=11)
        ax.set_title(f"{counts or 'no checks'}\n{len(meta['seeds'])} seed(s), "
                     f"{meta['time']}, from {shown_path(source)}", fontsize=8)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.spines[["top", "right"]].set_visible(False)
    note_in = 0.1 + 0.16 * n_note          # the NOT RUN lines at the foot, in inches
    if shown:                              # one legend row between the axis and the note
        handles, labels = ax.get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=len(shown), fontsize=8,
                   frameon=False, bbox_to_anchor=(0.5, note_in / height))
    bottom = (note_in + 0.35) / height
    if note:
        fig.text(0.01, 0.08 / height, note, ha="left", va="bottom", fontsize=8,
                 color="#b71c1c")
    fig.tight_layout(rect=(0, bottom, 1, 1))
    _label_segments(fig, ax, segments)
    png_path = out_dir / "verification_summary.png"
    save_figure(fig, png_path, dpi=120)
    plt.close(fig)
    return [png_path, csv_path]
