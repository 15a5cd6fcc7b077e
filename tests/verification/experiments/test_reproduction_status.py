"""verification/experiments/reproduction_status.py: a column is measured when every method
has a finished row, partial when some have, not run when none has."""

from __future__ import annotations

from verification.experiments.reproduction import cells
from verification.experiments.reproduction_status import column_coverage
from verification.experiments.reproductions import REPRODUCTIONS

REP = REPRODUCTIONS["cgpfl_table1_fmnist"]
COL = REP.columns[0]


def _rows(drop=(), status="ok", rounds=200):
    return [dict(method=c.row.label, model=c.column.model, seed=s, column=c.column.key,
                 rounds=rounds, status=status)
            for s in (0, 1) for c in cells(REP, seeds=[s], columns=[COL.key])
            if c.row.label not in drop]


def test_states_follow_the_finished_rows():
    assert column_coverage(REP, COL, []).state == "not run"
    assert column_coverage(REP, COL, []).describe() == "not run here"
    full = column_coverage(REP, COL, _rows())
    assert full.state == "measured" and full.describe() == "9/9 methods, seeds 0,1, T = 200"
    part = column_coverage(REP, COL, _rows(drop=("Ditto",)))
    assert part.state == "partial" and part.describe().startswith("8/9 methods")
    assert column_coverage(REP, COL, _rows(status="diverged")).state == "not run"


def test_a_shorter_run_names_the_paper_s_t():
    assert column_coverage(REP, COL, _rows(rounds=50)).describe().endswith("(paper T = 200)")


def test_rows_of_another_column_do_not_count():
    other = [dict(r, column=REP.columns[1].key) for r in _rows()]
    assert column_coverage(REP, COL, other).state == "not run"
