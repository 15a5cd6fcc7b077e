"""What a reproduction's CSV holds for one column of its table: which methods have a
finished row, over which seeds and rounds — the one reading of "measured" used by the
real-data status table (:mod:`paper_figures.real_data_status`) and the paper ledger
(:mod:`verification.ledger`).  A column is *measured* when every method of the entry has a
finished (``status`` ok) row, *partial* when some have, *not run* when none has.
"""

from __future__ import annotations

from dataclasses import dataclass

from verification.experiments.reproduction import Column, Reproduction, cells


@dataclass(frozen=True)
class ColumnCoverage:
    """The finished rows of one column: methods wanted and had, seeds and rounds run."""

    column: Column
    wanted: frozenset
    have: frozenset
    seeds: tuple[int, ...]
    rounds: tuple[int, ...]
    paper_rounds: int

    @property
    def state(self) -> str:
        """``measured``, ``partial`` or ``not run``."""
        if not self.have & self.wanted:
            return "not run"
        return "measured" if self.wanted <= self.have else "partial"

    def describe(self) -> str:
        """``9/9 methods, seeds 0,1,2, T = 200`` (with the paper's T when it differs)."""
        if self.state == "not run":
            return "not run here"
        what = (f"{len(self.have & self.wanted)}/{len(self.wanted)} methods, seeds "
                f"{','.join(map(str, self.seeds))}, T = {','.join(map(str, self.rounds))}")
        if list(self.rounds) != [self.paper_rounds]:
            what += f" (paper T = {self.paper_rounds})"
        return what


def column_coverage(rep: Reproduction, column: Column, rows: list[dict]) -> ColumnCoverage:
    """The coverage of ``column`` by the CSV ``rows`` of ``rep`` (``read_rows``)."""
    mine = [r for r in rows if (r.get("column") or r["model"]) == column.key
            and r.get("status", "ok") == "ok"]
    wanted = {c.row.label for c in cells(rep, seeds=[0], columns=[column.key])}
    return ColumnCoverage(
        column, frozenset(wanted), frozenset(r["method"] for r in mine),
        tuple(sorted({int(r["seed"]) for r in mine})),
        tuple(sorted({int(r["rounds"]) for r in mine if r.get("rounds")})),
        column.rounds or rep.rounds)
