"""``pflt list``: what the toolkit offers, read from the code.

Examples::

    pflt list                       # everything, grouped
    pflt list algorithms            # each algorithm: paper, what it does, hyper-parameters
    pflt list checks --json         # machine-readable

Topics: ``algorithms`` (with their paper, a one-line description and every hyper-parameter
with its default and paper symbol), ``datasets`` (``--data`` of ``pflt run``), ``models``
(``--model``), ``checks`` (``pflt verify``), ``figures`` (``pflt figures``).  For one
algorithm's options with defaults: ``pflt run --algorithm NAME --help``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, Callable

TOPICS = ("algorithms", "datasets", "models", "checks", "figures")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "list", help="list algorithms, datasets, models, checks or figures",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("topic", nargs="?", choices=TOPICS, default=None,
                   help="what to list (default: all topics)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=run)


def collect(topic: str) -> list[dict[str, Any]]:
    """The entries of ``topic`` as JSON-ready dicts."""
    from pflt import catalog

    if topic == "algorithms":
        return [a.as_dict() for a in catalog.algorithms()]
    sources: dict[str, Callable[[], list[dict[str, Any]]]] = {
        "datasets": catalog.datasets, "models": catalog.models, "checks": catalog.checks,
        "figures": catalog.figures}
    return sources[topic]()


def format_algorithm(entry: dict[str, Any]) -> str:
    """One algorithm as a text block: name, paper, summary, hyper-parameter table."""
    from pflt.catalog import display_symbol

    lines = [f"{entry['name']}  —  {entry['summary']}", f"    paper: {entry['paper'] or '-'}"]
    for h in entry["hyperparameters"]:
        symbol = f" ({display_symbol(h['name'], h['symbol'])})" if h["symbol"] else ""
        lines.append(f"    --{h['name'].replace('_', '-'):<22} = {h['default']!r:<12}"
                     f"{symbol} {h['help']}")
    return "\n".join(lines)


def format_topic(topic: str, entries: list[dict[str, Any]]) -> str:
    """Human-readable listing of one topic."""
    if topic == "algorithms":
        body = "\n\n".join(format_algorithm(e) for e in entries)
    elif topic == "checks":
        width = max([len(e["id"]) for e in entries] + [2])
        body = "\n".join(f"{e['id']:<{width}}  {e['kind']:<10}  {e['paper']} — {e['reference']}"
                         for e in entries)
    else:
        width = max([len(e["name"]) for e in entries] + [2])
        body = "\n".join(f"{e['name']:<{width}}  {e.get('source', '') and e['source'] + ': '}"
                         f"{e['description']}" for e in entries)
    return f"# {topic} ({len(entries)})\n{body}"


def run(args: argparse.Namespace) -> int:
    topics = [args.topic] if args.topic else list(TOPICS)
    found = {t: collect(t) for t in topics}
    if args.json:
        print(json.dumps(found[args.topic] if args.topic else found, indent=1,
                         ensure_ascii=False, default=str))
    else:
        print("\n\n".join(format_topic(t, e) for t, e in found.items()))
    return 0
