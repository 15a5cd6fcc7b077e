"""The runner's time estimate after the first round (algorithms/engine/runner.py
``estimate_line``, ``run(estimate=…)``; ``pflt run`` turns it on)."""

import pytest

from algorithms.engine import runner
from algorithms.engine.base import get_algorithm
from algorithms.engine.models import DNN
from algorithms.testing import planted


def test_estimate_line_only_for_long_runs():
    assert runner.estimate_line(1.0, 100) is None                   # 100 s: not shown
    line = runner.estimate_line(130.0, 49)
    assert "130.0 s per round" in line and "1.8 h" in line and "49 rounds left" in line
    assert "3 min" in runner.estimate_line(2.0, 90)


@pytest.mark.parametrize("estimate,shown", [(True, True), (False, False)])
def test_run_prints_the_estimate_once(monkeypatch, capsys, estimate, shown):
    monkeypatch.setattr(runner, "ESTIMATE_ABOVE_SECONDS", 0.0)      # any run is "long"
    fed = planted(None)
    alg = get_algorithm("fedavg")(local_rounds=2, batch_size=5, clients_per_round=3)
    runner.run(alg, fed, DNN(5, 3, hidden=4), rounds=3, progress=False, estimate=estimate)
    err = capsys.readouterr().err
    assert err.count("estimated time:") == (1 if shown else 0)
    if shown:
        assert "for the 2 rounds left" in err
