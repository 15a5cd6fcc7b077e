"""``pflt ledger``: every item of the papers with its evidence and computed status.

Examples::

    pflt ledger                          # the four papers' items, in each paper's order
    pflt ledger --paper PLGU --status absent
    pflt ledger --paper all --json       # every item, the baselines' too, as JSON
    pflt ledger --results verify_out     # statuses from your own pflt verify run

Each item (a theorem, lemma, definition, equation, algorithm, table or figure, its label as
the paper prints it) has a status computed from its evidence and the last result files:
measured (a result file holds numbers on the paper's data), checked (a check of the item has
a verdict in the verify results read: docs/results/verify_quick.json unless --results),
partial (what is missing is said), runnable (one command, not run here: why), absent
(why).  The command shown is the one that shows the item.  The table of items and their
evidence: verification/ledger/items_*.py; docs/ledger/ renders it per paper.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "ledger", help="every item of the papers with its evidence and status",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--paper", metavar="P", default=None,
                   help="one paper (pfedme, cgpfl, ppfe, plgu, or a baseline's id such as "
                        "fedavg) or 'all' (default: the four papers)")
    p.add_argument("--status", metavar="S", default=None,
                   help="only items of this status: measured, checked, partial, runnable, "
                        "absent")
    p.add_argument("--json", action="store_true", help="print the entries as JSON")
    p.add_argument("--results", metavar="PATH", type=Path, default=None,
                   help="a pflt verify results.json (or its directory) to read the verdicts "
                        "from (default docs/results/verify_quick.json)")
    p.set_defaults(func=run)


def _entries(args: argparse.Namespace):
    from verification.core.papers import paper_id
    from verification.ledger import ITEMS, PAPERS, STATUSES, gather, ledger

    if args.status is not None and args.status not in STATUSES:
        raise ValueError(f"--status {args.status!r} is not a status; known: "
                         + ", ".join(STATUSES))
    results = args.results
    if results is not None and results.is_dir():
        results = results / "results.json"
    if results is not None and not results.is_file():
        raise FileNotFoundError(f"--results {args.results}: no pflt verify results.json there")
    known = dict.fromkeys(i.paper for i in ITEMS)
    if args.paper not in (None, "all") and paper_id(args.paper) not in known:
        raise ValueError(f"--paper {args.paper!r} has no ledger items; known: "
                         + ", ".join(known))
    ev = gather(results)
    entries = ledger(ev, status=args.status,
                     paper=None if args.paper in (None, "all") else args.paper)
    if args.paper is None:
        entries = [e for e in entries if e.item.paper in PAPERS]
    return entries, ev.verdict_source


def run(args: argparse.Namespace) -> int:
    from collections import Counter

    from verification.core.papers import display_name
    from verification.ledger import STATUSES

    entries, source = _entries(args)
    if args.json:
        print(json.dumps([e.to_dict() for e in entries], indent=1, ensure_ascii=False))
        return 0
    paper = None
    for e in entries:
        i = e.item
        if i.paper != paper:
            paper = i.paper
            print(f"\n== {display_name(paper)}")
        text = f" [{i.text} text]" if i.text else ""
        print(f"{e.status:<9} {i.label}{text} ({i.section}, {i.kind}) — {i.statement}")
        if e.verdicts:
            print("          verdicts: " + ", ".join(f"{c} {v}" for c, v in e.verdicts.items()))
        if e.reason:
            print(f"          {e.reason}")
        if e.command:
            print(f"          $ {e.command}")
    counts = Counter(e.status for e in entries)
    print(f"\n{len(entries)} item(s): " + ", ".join(f"{counts[s]} {s}" for s in STATUSES
                                                     if counts[s]))
    print(f"verdicts read from {source}; reproductions from paper_figures/results/*.csv")
    return 0
