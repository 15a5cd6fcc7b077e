"""Render a suite run (:class:`verification.core.runner.SuiteRun`): ``results.json``,
``report.md`` (the summary, the checks that need attention, one line per check that holds,
the tightness table), ``details.md`` (every HOLDS check's values, detail and figures; the
tolerances) and the terminal table.

``results.json`` layout::

    {"environment": {...versions, device, time...}, "size": "quick", "seeds": [0, 1],
     "summary": {"HOLDS": n, "FAILS": n, "ERROR": n, "total": n},
     "checks": [{"id", "paper", "reference", "kind", "reconstructed", "tolerance",
                 "tolerance_reason", "description", "verdict" (aggregate over seeds),
                 "seeds_holding", "n_seeds", "seconds", "figures",
                 "results": [Result.to_dict() per seed]}, ...]}

Non-finite floats are stored as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (strict
JSON); values JSON cannot hold are stored as their ``repr``.  A bound result's ``tightness``
(bound / measured) with a measurement of 0 is ``null``, with ``tightness_note`` saying why
(:func:`verification.core.registry.json_tightness`; report.md shows ∞).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from verification.core.registry import BOUND_KINDS, _jsonable
from verification.core.suite import CheckRun, SuiteRun
from verification.core.report_cells import (MAX_CELL, certificate_text, not_run_lines,  # noqa: F401
                                            short, value_cells, worst_case_cells)
from verification.core.tightness import tightness_markdown



def json_safe(value: Any) -> Any:
    """Strict-JSON version of ``value`` (numpy/torch scalars and arrays, paths, NaN)."""
    value = _jsonable(value)
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "tolist"):  # e.g. a torch tensor with ndim > 0
        return json_safe(value.tolist())
    return repr(value)


def _relative(path: str, out_dir: Path | None) -> str:
    if out_dir is None:
        return str(path)
    try:
        return Path(path).resolve().relative_to(Path(out_dir).resolve()).as_posix()
    except ValueError:
        return str(path)


def _figures(run: "CheckRun", out_dir: Path | None) -> list[str]:
    return [_relative(f, out_dir) for r in run.results for f in r.figures]


def check_entry(run: "CheckRun", out_dir: Path | None = None) -> dict[str, Any]:
    """One check's entry of ``results.json`` (figure paths relative to ``out_dir``)."""
    c = run.check
    per_seed = []
    for r in run.results:
        d = r.to_dict()
        d["figures"] = [_relative(f, out_dir) for f in r.figures]
        per_seed.append(d)
    return json_safe({
        "id": c.id, "paper": c.paper, "paper_id": c.paper_id, "cited": c.cited,
        "reference": c.reference, "kind": c.kind, "reconstructed": c.reconstructed,
        "tolerance": c.tolerance, "tolerance_reason": c.tolerance_reason,
        "description": c.description, "verdict": run.verdict.value, "seeds_holding": run.seeds_holding,
        "n_seeds": len(run.results), "seconds": round(run.seconds, 4),
        "cpu_seconds": None if run.cpu_seconds is None else round(run.cpu_seconds, 3),
        "figures": _figures(run, out_dir), "results": per_seed,
    })


def results_dict(suite: "SuiteRun", out_dir: Path | None = None) -> dict[str, Any]:
    """The content of ``results.json`` (figure paths relative to ``out_dir``)."""
    checks = [check_entry(run, out_dir) for run in suite.runs]
    return json_safe({"environment": suite.environment, "size": suite.size,
                      "seeds": list(suite.seeds), "summary": suite.counts(),
                      "sensitivity_summary": sensitivity_line(suite),
                      "checks": checks})


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _first(run: "CheckRun") -> Any:
    return run.results[0]


def _verdict_cell(run: "CheckRun") -> str:
    n = len(run.results)
    return run.verdict.value if n == 1 else f"{run.verdict.value} ({run.seeds_holding}/{n})"


#: Report sections, in order: the verdicts that need a reader's attention first.
VERDICT_ORDER = ("FAILS", "ERRATUM", "INCONCLUSIVE", "NOT RUN", "ERROR", "VACUOUS", "HOLDS")
VERDICT_MEANING = {
    "FAILS": "the measurement refutes the claim (a finding about the paper or our reading).",
    "ERRATUM": "the formula as printed is contradicted and the corrected reading holds; each "
               "says whether by measurement or by algebra only (correction unproven).",
    "INCONCLUSIVE": "the experiment at this size cannot decide (an interval straddles the claim).",
    "NOT RUN": "an optional dependency or a reproduction's real-data results are missing; "
               "nothing was computed (the reason says what to install or run).",
    "ERROR": "the check itself broke.",
    "VACUOUS": "the bound holds but exceeds the trivial bound of its quantity at every point "
               "checked (printed beside it): it says nothing, and is not counted as HOLDS.",
    "HOLDS": "the measurement agrees with the claim.",
}


def summary_line(counts: dict[str, int]) -> str:
    """``N checks: a HOLD, b FAIL, c ERRATUM, d INCONCLUSIVE, e ERROR, v VACUOUS`` (a VACUOUS
    bound is not counted as HOLD), and ``, n NOT RUN`` when checks did not run."""
    line = (f"{counts['total']} checks: {counts['HOLDS']} HOLD, {counts['FAILS']} FAIL, "
            f"{counts['ERRATUM']} ERRATUM, {counts['INCONCLUSIVE']} INCONCLUSIVE, "
            f"{counts['ERROR']} ERROR, {counts.get('VACUOUS', 0)} VACUOUS")
    return line + (f", {counts['NOT RUN']} NOT RUN" if counts.get("NOT RUN") else "")


def sensitivity_line(suite: "SuiteRun") -> str:
    """The summary of the checks' sensitivities (verification/core/sensitivity.py): the
    smallest factor on the theoretical side that flips each check's verdict."""
    from verification.core.sensitivity import summarise

    return summarise((run.check.kind, _deciding_sensitivity(run), run.verdict.value)
                     for run in suite.runs if run.verdict.value != "ERROR")


def _deciding_sensitivity(run: "CheckRun") -> float | None:
    """The smallest sensitivity over seeds (the seed closest to flipping decides)."""
    values = [r.sensitivity for r in run.results if r.sensitivity is not None]
    return min(values) if values else None


def _sensitivity_cell(run: "CheckRun") -> str:
    from verification.core.sensitivity import format_factor

    r = run.results[0]
    value = _deciding_sensitivity(run)
    if value is None:
        return r.sensitivity_note or "n/a"
    return format_factor(value)


def _sensitivity_label(run: "CheckRun") -> str:
    """Under a FAILS or an ERRATUM the factor is how far the claim is from holding, not
    what the check could detect."""
    return ("Distance from holding" if run.verdict.value in ("FAILS", "ERRATUM")
            else "Sensitivity")


def _erratum_line(run: "CheckRun") -> str:
    from verification.core.registry import ERRATUM_BASES

    basis = next((r.erratum_basis for r in run.results if r.erratum_basis), None)
    return ERRATUM_BASES.get(basis, "basis not stated by the check")


def _claim(run: "CheckRun") -> str:
    """The claim a check tests: the first paragraph of its description (docstring)."""
    text = run.check.description.split("\n\n")[0] if run.check.description else ""
    return " ".join(text.split()) or run.check.reference


def _size(run: "CheckRun", size: str) -> str:
    c = run.check
    params = c.quick if size == "quick" else c.full
    seeds = ", ".join(str(r.seed) for r in run.results)
    shown = ", ".join(f"{k}={v}" for k, v in params.items()) or "no parameters"
    return f"{size} size ({shown}); seed(s) {seeds}"


def _explained(run: "CheckRun", size: str, out_dir: Path | None) -> list[str]:
    """A non-HOLDS check: the claim, the evidence and the size that decided it."""
    c = run.check
    worst = [r for r in run.results if r.verdict is run.verdict] or list(run.results)
    lines = [f"### `{c.id}` — {c.paper}, {c.reference}"
             + (" (RECONSTRUCTED formula)" if c.reconstructed else ""), "",
             f"- **Claim:** {_claim(run)}",
             f"- **Evidence** (seed {worst[0].seed}): {' '.join(worst[0].detail.split())}",
             f"- **Measured / theoretical:** {short(worst[0].measured, None)} / "
             f"{short(worst[0].theoretical, None)}",
             f"- **{_sensitivity_label(run)}:** {_sensitivity_cell(run)}"
             + (f" ({worst[0].sensitivity_note})" if _deciding_sensitivity(run) is not None
                and worst[0].sensitivity_note else ""),
             f"- **Decided at:** {_size(run, size)}"
             + (f"; verdict per seed: {', '.join(r.verdict.value for r in run.results)}"
                if len(run.results) > 1 else "")]
    if run.verdict.value == "ERRATUM":
        lines.append(f"- **Erratum basis:** {_erratum_line(run)}")
    if worst[0].trivial is not None:
        lines.append(f"- **Trivial bound:** {worst[0].trivial:.4g}")
    if run.verdict.value == "VACUOUS":
        lines.append(f"- **Bound / trivial / certificate / measured:** {certificate_text(worst[0])}")
    figs = _figures(run, out_dir)
    if figs:
        lines.append("- **Figures:** " + " ".join(f"[{Path(f).name}]({f})" for f in figs))
    return lines + [""]


def report_markdown(suite: "SuiteRun", out_dir: Path | None = None) -> str:
    """The content of ``report.md``: summary, then the checks grouped by verdict — each
    non-HOLDS check with its claim, evidence and deciding size; the HOLDS as a table."""
    env = suite.environment
    counts = suite.counts()
    seeds = ", ".join(map(str, suite.seeds))
    lines = [
        "# pfl-theory verification report", "",
        f"Size **{suite.size}**, seeds {seeds}; run {env.get('time_utc', '?')} "
        f"(git {env.get('git_commit') or '?'}), device {env.get('device', '?')}, "
        f"Python {env.get('python', '?')}, "
        + ", ".join(f"{k} {v}" for k, v in env.get("versions", {}).items() if v) + ".", "",
        f"**{summary_line(counts)}.**", "",
        *[f"**{line}.**" for line in not_run_lines(suite)],
        *([""] if not_run_lines(suite) else []), f"_{sensitivity_line(suite)}._", "",
        " ".join(f"{v}: {VERDICT_MEANING[v]}" for v in VERDICT_ORDER),
        "With several seeds the verdict is the worst seed's (ERROR > FAILS > ERRATUM > "
        "INCONCLUSIVE > NOT RUN > VACUOUS > HOLDS), `(k/n)` = seeds that hold. R = tests a RECONSTRUCTED formula.",
    ]
    for verdict in VERDICT_ORDER:
        group = [run for run in suite.runs if run.verdict.value == verdict]
        if not group:
            continue
        lines += ["", f"## {verdict} ({len(group)})", "", f"_{VERDICT_MEANING[verdict]}_", ""]
        if verdict != "HOLDS":
            for run in group:
                lines += _explained(run, suite.size, out_dir)
            continue
        lines += [f"One line per check; its values, detail and figures are in [{DETAILS}]"
                  f"({DETAILS}).", "", "| id | paper | kind | R | verdict | sensitivity |",
                  "|---|---|---|---|---|---|"]
        for run in group:
            c = run.check
            cells = [f"`{c.id}`", c.paper, c.kind, "R" if c.reconstructed else "",
                     f"**{_verdict_cell(run)}**", _sensitivity_cell(run)]
            lines.append("| " + " | ".join(_cell(x) for x in cells) + " |")
    lines += tightness_markdown(suite)  # bound/envelope checks (verification/core/tightness.py)
    if any(run.check.tolerance_reason for run in suite.runs):
        lines += ["", f"Every check's tolerance and its reason: [{DETAILS}]({DETAILS})."]
    return "\n".join(lines) + "\n"


#: the companion of report.md: what a reader looks up, not what needs attention (the
#: quick suite's report.md was 149 KB with it)
DETAILS = "details.md"


def details_markdown(suite: "SuiteRun", out_dir: Path | None = None) -> str:
    """The content of ``details.md``: every HOLDS check with its values, detail and figures,
    and every check's tolerance with its reason."""
    lines = ["# pfl-theory verification report: details", "",
             "The checks that hold, with their values, and the tolerances; the summary and the "
             "checks that need attention are in [report.md](report.md)."]
    group = [run for run in suite.runs if run.verdict.value == "HOLDS"]
    if group:
        lines += ["", f"## HOLDS ({len(group)})", "",
                  "| id | paper | reference | kind | R | measured | theoretical | verdict "
                  "| sensitivity | detail | figures |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        for run in group:
            c, r0 = run.check, _first(run)
            figs = _figures(run, out_dir)
            fig_cell = " ".join(f"[{Path(f).name}]({f})" for f in figs) or "-"
            cells = [f"`{c.id}`", c.paper, c.reference, c.kind, "R" if c.reconstructed else "",
                     *value_cells(run),
                     f"**{_verdict_cell(run)}**", _sensitivity_cell(run), short(r0.detail, None),
                     fig_cell]
            lines.append("| " + " | ".join(_cell(x) for x in cells) + " |")
    if any(run.check.tolerance_reason for run in suite.runs):
        lines += ["", "## Tolerances", ""]
        for run in suite.runs:
            c = run.check
            if c.tolerance_reason:
                lines.append(f"- `{c.id}`: {c.tolerance:g} — {c.tolerance_reason}"
                             if c.tolerance is not None else f"- `{c.id}`: {c.tolerance_reason}")
    return "\n".join(lines) + "\n"


#: width of the console table's value columns when the terminal's width is not known
CONSOLE_CELL = 28
#: lines a console cell may take: a longer value (a selection check's dozen numbers) is cut
#: with "…" — report.md and results.json hold it whole, ``--wide`` prints it on one line
MAX_CELL_LINES = 2
#: a value column is never narrower than this, however narrow the terminal
MIN_CELL = 14


def _tightness_cell(run: "CheckRun") -> str:
    """bound / measured of a ``bound``/``envelope`` check (the seed with the smallest), else
    ``-``."""
    from verification.core.tightness import _deciding, _num

    if run.check.kind not in BOUND_KINDS:
        return "-"
    r = _deciding(run.results)
    return "-" if r is None else _num(r.tightness)


def _sensitivity_columns(run: "CheckRun") -> tuple[str, str]:
    """``(sensitivity, off by)``: the factor that would flip a check that holds (how much the
    check could detect) and, apart, how far a FAILS or ERRATUM is from holding — one number
    never means both."""
    value = _short_sensitivity(run)
    if run.verdict.value in ("FAILS", "ERRATUM"):
        return "-", value
    return value, "-"


def _fit(text: str, width: int, max_lines: int) -> list[str]:
    """``text`` wrapped to ``width``, at most ``max_lines`` lines, the last ending in "…" when
    something was left out."""
    import textwrap

    lines = textwrap.wrap(text, width, break_long_words=True) or [""]
    if len(lines) <= max_lines:
        return lines
    last = lines[max_lines - 1]
    return lines[:max_lines - 1] + [(last[:width - 1] if len(last) >= width else last) + "…"]


def format_table(suite: "SuiteRun", *, width: int | None = CONSOLE_CELL,
                 terminal: int | None = None, max_lines: int = MAX_CELL_LINES) -> str:
    """A plain-text table for the terminal, followed by the summary line.  A value longer
    than its column wraps onto at most ``max_lines`` lines and is cut there with "…" (the
    whole value is in report.md and results.json); with ``terminal`` (its width in
    characters) the value columns share what the other columns leave, at least
    :data:`MIN_CELL` each; ``width=None``: one line per check, nothing cut (``pflt verify
    --wide``).  ``sens.`` is the factor that would flip a check that holds, ``off by`` how far
    a FAILS or ERRATUM is from holding."""
    header = ("id", "kind", "R", "measured", "theoretical", "tightness", "verdict", "sens.",
              "off by", "s")
    only_worst = bool(suite.runs) and all(run.check.kind == "worst_case" for run in suite.runs)
    if only_worst:  # pflt verify --kind worst_case: name the three numbers
        header = ("id", "kind", "R", "engine", "worst case", "bound", "tightness", "verdict",
                  "sens.", "off by", "s")
    value_columns = (3, 4, 5) if only_worst else (3, 4)
    cells_of = []
    for run in suite.runs:
        values = (worst_case_cells(run) if only_worst and run.verdict.value
                  not in ("NOT RUN", "ERROR") else ("-", "-", "-") if only_worst
                  else value_cells(run))
        cells_of.append((run.check.id, run.check.kind, "R" if run.check.reconstructed else "",
                         *values, _tightness_cell(run), _verdict_cell(run),
                         *_sensitivity_columns(run), f"{run.seconds:.1f}"))
    if width is not None and terminal is not None:
        fixed = sum(max([len(h)] + [len(c[i]) for c in cells_of]) + 2
                    for i, h in enumerate(header) if i not in value_columns)
        width = max(MIN_CELL, (terminal - fixed) // len(value_columns) - 2)
    rows: list[tuple[str, ...]] = []
    for cells in cells_of:
        if width is None:
            rows.append(cells)
            continue
        wrapped = [_fit(c, width, max_lines) if i in value_columns else [c]
                   for i, c in enumerate(cells)]
        for k in range(max(len(w) for w in wrapped)):
            rows.append(tuple(w[k] if k < len(w) else "" for w in wrapped))
    widths = [max([len(h)] + [len(row[i]) for row in rows]) for i, h in enumerate(header)]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(cell.ljust(w) for cell, w in zip(cells, widths)).rstrip()

    out = [line(header), line(tuple("-" * w for w in widths))] + [line(r) for r in rows]
    if any(r[i].endswith("…") for r in rows for i in value_columns):
        out.append("… = cut here: report.md and results.json hold every value "
                   "(pflt verify --wide prints them whole)")
    out.append(sensitivity_line(suite))
    out.extend(not_run_lines(suite))
    out.append(summary_line(suite.counts()))
    errors = [run for run in suite.runs if run.verdict.value == "ERROR"]
    for run in errors:
        bad = next(r for r in run.results if r.verdict.value == "ERROR")
        out.append(f"ERROR {run.check.id} (seed {bad.seed}): {bad.detail}")
    return "\n".join(out)


def _short_sensitivity(run: "CheckRun") -> str:
    from verification.core.sensitivity import format_factor

    return format_factor(_deciding_sensitivity(run))


def write_outputs(suite: "SuiteRun", out_dir: Path) -> tuple[Path, Path]:
    """Write ``results.json``, ``report.md`` and ``details.md`` into ``out_dir`` (each atomically: a
    failed write leaves no half file and its error names the file); return their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    from pfl_theory.safe_files import atomic_write_text   # names the file on a failed write
                                                          # (disk full, a file-size limit)
    results_path = out_dir / "results.json"
    atomic_write_text(results_path, json.dumps(results_dict(suite, out_dir), indent=2,
                                               allow_nan=False) + "\n")
    report_path = out_dir / "report.md"
    atomic_write_text(report_path, report_markdown(suite, out_dir))
    atomic_write_text(out_dir / DETAILS, details_markdown(suite, out_dir))
    return results_path, report_path
