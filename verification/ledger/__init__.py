"""The paper ledger: every item of the papers (theorems, lemmas, definitions, equations,
algorithms, tables, figures) with the evidence that covers it and a status computed from
that evidence and the last result files (``pflt ledger``).

* :data:`ITEMS` — the items, in each paper's order (tables in ``items_*.py``, rows as in
  :mod:`verification.ledger.item`);
* :func:`ledger` — the items with their computed status (:mod:`verification.ledger.status`);
* :func:`coverage` — per paper, how many items are measured / checked / partial / runnable /
  absent.

The four papers of the mission are :data:`PAPERS`; the other sources the checks cite (the
baselines' algorithms, data generators) have their items too, so that every registered check
and reproduction names a ledger item.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from verification.ledger.item import Item
from verification.ledger.items_cgpfl import ITEMS as _CGPFL
from verification.ledger.items_pfedme import ITEMS as _PFEDME
from verification.ledger.items_plgu import ITEMS as _PLGU
from verification.ledger.items_ppfe import ITEMS as _PPFE
from verification.ledger.items_sources import ITEMS as _SOURCES
from verification.ledger.status import RANK, STATUSES, Entry, Evidence, assess, gather

__all__ = ["ITEMS", "PAPERS", "STATUSES", "RANK", "Item", "Entry", "Evidence", "gather",
           "ledger", "coverage", "items_of"]

#: the papers of the mission (CGPFL's IJCAI and ICLR texts are one paper)
PAPERS = ("pfedme", "cgpfl", "ppfe", "plgu")
ITEMS: tuple[Item, ...] = _PFEDME + _CGPFL + _PPFE + _PLGU + _SOURCES


def items_of(paper: str | None = None) -> tuple[Item, ...]:
    """The items of one paper (an id, a short or a cited name), or all."""
    if paper is None:
        return ITEMS
    from verification.core.papers import paper_id

    pid = paper_id(paper)
    return tuple(i for i in ITEMS if i.paper == pid)


def ledger(evidence: Evidence | None = None, *, paper: str | None = None,
           status: str | None = None, results: Path | None = None,
           repro_dir: Path | None = None) -> list[Entry]:
    """The items (of ``paper``) with their computed status (only ``status`` if given)."""
    if status is not None and status not in STATUSES:
        raise ValueError(f"unknown status {status!r}; known: {', '.join(STATUSES)}")
    ev = evidence or gather(results, repro_dir)
    entries = [assess(i, ev) for i in items_of(paper)]
    return [e for e in entries if status is None or e.status == status]


def coverage(entries: list[Entry]) -> dict[str, Counter]:
    """``{paper id: Counter(status → items)}`` in the order of the entries."""
    out: dict[str, Counter] = {}
    for e in entries:
        out.setdefault(e.item.paper, Counter())[e.status] += 1
    return out
