"""Every registered check runs at quick size, seed 0, without ERROR.

One test per check id (parametrized at collection time from the real registry), so a
failure names the check. ``FAILS``, ``ERRATUM`` and ``INCONCLUSIVE`` are allowed: it is a finding about a paper's claim (or our
reading of it), reported by ``pflt verify``, not a broken check. A check module that does not
import shows up as ``import.<module>`` and fails here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from verification.core import runner
from verification.core.registry import Verdict, run_check

_CHECKS, _IMPORT_ERRORS = runner.load_checks()
_PARAMS = ([pytest.param(cid, id=cid) for cid in _CHECKS]
           + [pytest.param(f"import.{m}", id=f"import.{m}") for m in _IMPORT_ERRORS])


@pytest.mark.parametrize("check_id", _PARAMS)
def test_check_runs_at_quick_size_without_error(check_id, tmp_path):
    if check_id.startswith("import."):
        module = check_id.removeprefix("import.")
        pytest.fail(f"check module {module} failed to import: {_IMPORT_ERRORS[module]}")
    chk = _CHECKS[check_id]
    result = run_check(chk, size="quick", seed=0, out_dir=tmp_path)
    assert result.verdict is not Verdict.ERROR, f"{check_id}: {result.detail}"
    if result.verdict is Verdict.NOT_RUN:
        # only an ordering check over a reproduction's results may not run (its cells were
        # not run here), and then it names the command that runs them
        assert chk.kind == "ordering" and "pflt reproduce" in result.detail, result.detail
        return
    assert result.verdict in (Verdict.HOLDS, Verdict.FAILS, Verdict.ERRATUM,
                              Verdict.INCONCLUSIVE, Verdict.VACUOUS)
    assert result.verdict is not Verdict.VACUOUS or chk.kind == "bound"
    # every result states its sensitivity: a factor, or n/a with the reason
    assert result.sensitivity is not None or result.sensitivity_note.startswith("n/a: ")
    for fig in result.figures:  # figures a check reports must exist
        assert Path(fig).exists() or (tmp_path / fig).exists(), fig
