"""The status of each ledger item, computed from its evidence and the last result files.

=============  ===========================================================================
``measured``   a result file holds numbers on the paper's data: every column of the item's
               reproductions has a finished row in ``paper_figures/results/NAME.csv``, or a
               named result file exists (never without a file; a *transfer* — the papers'
               claims on Fashion-MNIST in place of their data — is at most partial)
``checked``    a registered check of the item has a verdict (not NOT RUN) in the verify results read
               (``docs/results/verify_quick.json`` by default, or a ``pflt verify``
               results.json)
``partial``    some of it is covered; the reason says what is missing
``runnable``   one command away, not run here; the reason says why (data not on this
               machine, cost, a check registered after the last verify)
``absent``     nothing covers it; the item says why
=============  ===========================================================================

An item's ``missing`` note caps it at *partial*.  Evidence named by an item but not found
in the registries or the repository counts for nothing (the tests flag it): removing a
check lowers its items' status.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from verification.ledger.item import Item

ROOT = Path(__file__).resolve().parents[2]
#: the verify digest the statuses read by default (paper_figures/readme_blocks.py writes it)
VERDICTS = Path("docs/results/verify_quick.json")
#: the reproductions' CSVs (``pflt reproduce NAME --out`` default of the published runs)
REPRO_RESULTS = Path("paper_figures/results")
STATUSES = ("measured", "checked", "partial", "runnable", "absent")
#: higher is better; "turns down" = a lower rank
RANK = {s: len(STATUSES) - i for i, s in enumerate(STATUSES)}
#: verdicts that decide something (NOT RUN and ERROR computed nothing: the check is runnable)
DECIDED = frozenset({"HOLDS", "FAILS", "ERRATUM", "INCONCLUSIVE", "VACUOUS"})
#: datasets present on the project's machine (Fashion-MNIST, Debian package): a reproduction
#: needing any other is "runnable: data not on this machine"
LOCAL_DATA = frozenset({"fmnist"})


@dataclass(frozen=True)
class Evidence:
    """What the statuses are computed from: the registries, the verdicts of the last verify
    results and the reproductions' CSV rows."""

    checks: dict
    reproductions: dict
    verdicts: dict[str, str]
    verdict_source: str
    repro_rows: dict[str, list] = field(default_factory=dict)
    root: Path = ROOT
    #: reproductions whose CSV could not be read: ``{name: why}`` (counted as no rows)
    unreadable: dict[str, str] = field(default_factory=dict)


def load_verdicts(path: Path) -> tuple[dict[str, str], str]:
    """``({check id: verdict}, "file (size, date, commit)")`` of a verify results.json or
    its digest; a missing file gives no verdicts."""
    path = Path(path)
    if not path.is_file():
        return {}, f"{path} (absent: no verdicts)"
    data = json.loads(path.read_text(encoding="utf-8"))
    checks = data.get("checks") if isinstance(data, dict) else None
    if not isinstance(checks, list):
        raise ValueError(f"{path}: not a pflt verify results.json or digest (no 'checks' list)")
    env = data.get("environment") or {}
    when = env.get("date") or str(env.get("time_utc", "?"))[:16].replace("T", " ")
    verdicts = {str(c["id"]): str(c["verdict"]) for c in checks
                if isinstance(c, dict) and "id" in c and "verdict" in c}
    return verdicts, (f"{_shown(path)} (pflt verify --{data.get('size', '?')}, {when}"
                      + (f", commit {env['commit']}" if env.get("commit") else "") + ")")


def _shown(path: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def gather(results: Path | None = None, repro_dir: Path | None = None,
           checks: dict | None = None) -> Evidence:
    """The evidence of this checkout: every registered check (``load_all``), the
    reproduction registry, the verdicts of ``results`` (default :data:`VERDICTS`) and the
    CSVs of ``repro_dir`` (default :data:`REPRO_RESULTS`)."""
    from verification.core.registry import load_all
    from verification.experiments.reproduction_run import read_rows
    from verification.experiments.reproductions import REPRODUCTIONS

    verdicts, source = load_verdicts(results if results is not None else ROOT / VERDICTS)
    repro_dir = Path(repro_dir) if repro_dir is not None else ROOT / REPRO_RESULTS
    rows, unreadable = {}, {}
    for name in REPRODUCTIONS:
        try:
            rows[name] = read_rows(repro_dir / f"{name}.csv")
        except (ValueError, KeyError) as exc:    # a broken file measures nothing; say so
            rows[name], unreadable[name] = [], " ".join(str(exc).split())[:200]
    return Evidence(load_all() if checks is None else checks, dict(REPRODUCTIONS), verdicts,
                    source, rows, unreadable=unreadable)


@dataclass(frozen=True)
class Entry:
    """An item with its computed status, the reason, the verdicts of its checks and the
    command that shows it."""

    item: Item
    status: str
    reason: str
    verdicts: dict
    command: str

    def to_dict(self) -> dict:
        i = self.item
        return {"paper": i.paper, "label": i.label, "section": i.section, "kind": i.kind,
                "statement": i.statement, "text": i.text or None, "status": self.status,
                "reason": self.reason, "verdicts": self.verdicts, "command": self.command,
                "evidence": {"checks": list(i.checks), "reproductions": list(i.reproductions),
                             "files": list(i.files), "figures": list(i.figures),
                             "formulas": list(i.formulas), "tests": list(i.tests)}}


def _repro_state(name: str, ev: Evidence) -> tuple[str, str]:
    """``(measured | partial | runnable, reason)`` of one reproduction from its CSV."""
    from verification.experiments.reproduction import cells, cost_seconds
    from verification.experiments.reproduction_status import column_coverage

    from verification.experiments.reproductions_transfer import TRANSFERS

    rep = ev.reproductions[name]
    if name in ev.unreadable:
        return "runnable", f"{name}: its result file is unreadable ({ev.unreadable[name]})"
    covs = [column_coverage(rep, col, ev.repro_rows.get(name, [])) for col in rep.columns]
    states = {c.state for c in covs}
    if name in {t.name for t in TRANSFERS} and states != {"not run"}:
        return "partial", (f"{name} (a transfer: Fashion-MNIST in place of the paper's data, "
                           "never 'measured'): " + "; ".join(
                               f"{c.column.key} {c.describe()}" for c in covs))
    if states == {"measured"}:
        return "measured", f"{name}: " + "; ".join(f"{c.column.key} {c.describe()}" for c in covs)
    if states != {"not run"}:
        return "partial", f"{name}: " + "; ".join(
            f"{c.column.key} {c.state if c.state == 'not run' else c.describe()}" for c in covs)
    away = sorted(set(rep.datasets()) - LOCAL_DATA)
    if away:
        return "runnable", (f"{name}: data not on this machine ({', '.join(away)}: "
                            f"pflt data fetch NAME)")
    hours = cost_seconds(rep, cells(rep)) / 3600
    return "runnable", f"{name}: not run here (cost ≈ {hours:.0f} CPU-hours on 2 cores)"


def _command(item: Item, ev: Evidence, checks: list[str]) -> str:
    """The one command that shows the item: for an experiment its reproduction or result
    file first, else its checks; then a figure, a formula section, a test."""
    reps = [r for r in item.reproductions if r in ev.reproductions]
    files = [f for f in item.files if (ev.root / f).is_file()]
    data = []
    if reps:
        rep = ev.reproductions[reps[0]]
        where = "" if set(rep.datasets()) <= LOCAL_DATA else " --data-dir DIR"
        data.append(f"pflt reproduce {reps[0]}{where}")
    data += [f"cat {f}" for f in files]
    verify = [f"pflt verify --quick --only '{','.join(checks)}'"] if checks else []
    first = data + verify if item.kind == "experiment" else verify + data
    if first:
        return first[0]
    figs = [f for f in item.figures if (ev.root / "paper_figures" / f"{f}.py").is_file()]
    if figs:
        source = (ev.root / "paper_figures" / f"{figs[0]}.py").read_text(encoding="utf-8")
        return (f"pflt figures --only {figs[0]}" if "\ndef make(" in source
                else f"python -m paper_figures.{figs[0]}")          # a script of its own
    if item.formulas:
        return f"pflt formulas --section {item.formulas[0]}"
    if item.tests:
        return f"python -m pytest -q {item.tests[0]}"
    return ""


def assess(item: Item, ev: Evidence) -> Entry:
    """The item's status from its evidence (see the module docstring)."""
    from pfl_theory.formulas import section_ids

    checks = [c for c in item.checks if c in ev.checks]
    verdicts = {c: ev.verdicts[c] for c in checks if c in ev.verdicts}
    decided = {c: v for c, v in verdicts.items() if v in DECIDED}
    reps = [_repro_state(r, ev) for r in item.reproductions if r in ev.reproductions]
    files = [f for f in item.files if (ev.root / f).is_file()]
    figs = [f for f in item.figures if (ev.root / "paper_figures" / f"{f}.py").is_file()]
    formulas = [f for f in item.formulas if f in section_ids()]
    tests = [t for t in item.tests if (ev.root / t).is_file()]
    reasons: list[str] = []
    if reps or files:                          # numbers on the paper's data, or not yet
        states = [s for s, _ in reps] + ["measured"] * len(files)
        reasons += [r for _, r in reps] + [f"result file {f}" for f in files]
        if "measured" in states:               # the others are said in the reason
            status = "measured"
        elif any(s in ("measured", "partial") for s in states) or decided:
            status = "partial"
            if decided:
                reasons.append("checked: " + ", ".join(sorted(decided)))
        else:
            status = "runnable"
    elif decided:
        status = "checked"
    elif checks:
        status = "runnable"
        undecided = [c for c in checks if c not in decided]
        reasons.append("no verdict in the verify results read (registered after them, or NOT "
                       "RUN there): " + ", ".join(undecided))
    elif figs:
        status = "runnable"
        reasons.append("a figure script, not run here (figures are not committed)")
    elif formulas or tests:
        status = "partial"
        reasons.append("implemented: " + ", ".join([f"formulas §{f}" for f in formulas] + tests)
                       + ("" if item.missing else "; no check with a verdict"))
    else:
        status = "absent"
    if item.missing:
        if RANK[status] > RANK["partial"]:
            status = "partial"
        reasons.insert(0, item.missing)
    if status == "absent" and not item.missing:
        reasons.insert(0, "its evidence is not in the registries: "
                       + " ".join(item.checks + item.reproductions + item.figures))
    return Entry(item, status, "; ".join(reasons), verdicts, _command(item, ev, checks))
