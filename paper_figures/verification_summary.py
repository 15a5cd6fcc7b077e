"""Figure: verdicts of the verification suite per paper (stacked bars, one per verdict).

Not a figure of any paper — a one-glance summary of ``pflt verify``: for each paper, how
many of its registered claims the measurements support (HOLDS), refute (FAILS), support in
a corrected reading (ERRATUM), cannot decide at this size (INCONCLUSIVE), or could not test
(ERROR).

It draws the verify results it is given and nothing else (it never runs checks itself):

1. the ``results.json`` named by the environment variable ``PFLT_RESULTS_JSON`` (a file, or
   a directory containing ``results.json``; ``pflt figures --verify-results PATH`` sets it);
2. else the most recently written ``results.json`` under ``out_dir`` or in ``./verify_out``.

The title names the file drawn, its size, seeds and time.  Without any results the figure
says so (and how to produce them) and the CSV has no rows.

Files: ``verification_summary.png`` and ``verification_summary.csv`` (columns
``paper, HOLDS, FAILS, ERRATUM, INCONCLUSIVE, ERROR, total, reconstructed``; one row per
paper, the plotted data).
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


def load_counts(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per-paper verdict counts from a results.json (validated) and its run metadata."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    checks = data.get("checks") if isinstance(data, dict) else None
    if not isinstance(checks, list):
        raise ValueError(f"{path}: not a pflt verify results.json (no 'checks' list)")
    counts: dict[str, Counter] = {}
    reconstructed: Counter = Counter()
    for entry in checks:
        if not isinstance(entry, dict) or entry.get("verdict") not in VERDICTS:
            raise ValueError(f"{path}: malformed check entry {entry!r}")
        paper = short_name(entry_paper_id(entry))   # one row per paper id (core/papers.py)
        if entry.get("kind") == "import":  # a check module that failed to import
            paper = "(broken check modules)"
        counts.setdefault(paper, Counter())[entry["verdict"]] += 1
        reconstructed[paper] += bool(entry.get("reconstructed"))
    rows = [{"paper": paper, **{v: c[v] for v in VERDICTS}, "total": sum(c.values()),
             "reconstructed": reconstructed[paper]} for paper, c in sorted(counts.items())]
    meta = {"size": data.get("size", "?"), "seeds": data.get("seeds", []),
            "time": (data.get("environment") or {}).get("time_utc", "?")}
    return rows, meta


def make(out_dir: Path, *, quick: bool = False, seed: int = 0) -> list[Path]:
    """Draw the per-paper verdict bars of the given verify results; returns ``[png, csv]``.
    ``quick`` and ``seed`` do not change anything (no check is run here)."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    source = find_results(out_dir)
    rows, meta = load_counts(source) if source is not None else ([], {})

    csv_path = out_dir / "verification_summary.csv"
    with csv_path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=["paper", *VERDICTS, "total", "reconstructed"])
        writer.writeheader()
        writer.writerows(rows)

    fig, ax = plt.subplots(figsize=(8.5, 1.2 + 0.55 * max(len(rows), 1)))
    papers = [r["paper"] for r in rows]
    left = [0] * len(rows)
    for verdict in VERDICTS:
        values = [r[verdict] for r in rows]
        ax.barh(papers, values, left=left, color=COLORS[verdict], label=verdict)
        for i, v in enumerate(values):
            if v:
                ax.text(left[i] + v / 2, i, str(v), ha="center", va="center", color="white",
                        fontsize=9)
        left = [a + b for a, b in zip(left, values)]
    if source is None:
        ax.text(0.5, 0.5, NO_RESULTS, ha="center", va="center", transform=ax.transAxes,
                fontsize=9)
        ax.set_title("verification summary: no verify results", fontsize=10)
    elif not rows:
        ax.text(0.5, 0.5, f"no checks in {source}", ha="center", va="center",
                transform=ax.transAxes)
    ax.invert_yaxis()
    ax.set_xlabel("number of checks")
    total = {v: sum(r[v] for r in rows) for v in VERDICTS}
    if source is not None:
        counts = ", ".join(f"{total[v]} {v}" for v in VERDICTS if total[v])
        ax.set_title(f"pflt verify ({meta['size']}, {len(meta['seeds'])} seed(s), "
                     f"{meta['time']}): {counts or 'no checks'}\nfrom {shown_path(source)}",
                     fontsize=9)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    png_path = out_dir / "verification_summary.png"
    save_figure(fig, png_path, dpi=120)
    plt.close(fig)
    return [png_path, csv_path]
