"""``pflt worst-case``: hostile values and options that do not apply are one line, exit 2,
before any solve (issue 35 item 6: ``--rounds 0``/``-1`` were IndexError, ``--delta0 inf``
an ArithmeticError after 45 s, ``--sigma-sq nan`` and CGPFL's ``--lam nan``/``--beta nan``
solver tracebacks, ``--sigma-sq 1e308`` a number, options of other methods ignored); the
stochastic options' report.  Mutation that FAILS here: the option check in
``pflt.commands.worst_case.resolve`` removed (the solve is reached, or a traceback)."""

from __future__ import annotations

import json

import pytest

from pflt.cli import main

pytest.importorskip("PEPit")

BASE = ["worst-case", "--rounds", "1", "--local-rounds", "1", "--no-contraction"]


@pytest.fixture
def no_solve(monkeypatch):
    """Any solve fails the test: the errors must come before one."""
    import verification.worst_case.pep as pep

    def solve(*a, **k):
        raise AssertionError("a PEP was solved before the input was refused")
    monkeypatch.setattr(pep, "_solve_once", solve)


def _one_line_error(argv, capsys):
    code = main(argv)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


HOSTILE = [
    (["--rounds", "0"], "--rounds must be an integer >= 1"),
    (["--rounds", "-1"], "--rounds must be an integer >= 1"),
    (["--delta0", "inf"], "--delta0 must be a finite number"),
    (["--delta0", "1e308"], "beyond"),
    (["--sigma-sq", "nan"], "--sigma-sq must be a finite number"),
    (["--sigma-sq", "1e308"], "beyond"),
    (["--algorithm", "cgpfl", "--lam", "nan"], "--lam must be a finite number"),
    (["--algorithm", "cgpfl", "--beta", "nan"], "--beta must be a finite number"),
    (["--algorithm", "cgpfl", "--delta0", "inf"], "--delta0 must be a finite number"),
    (["--lr", "inf"], "--lr must be a finite number"),
    (["--L", "inf"], "--L must be a finite number"),
    (["--clients", "0"], "--clients must be an integer >= 1"),
    (["--noise-sq", "-1"], "--noise-sq must be >= 0"),
    (["--noise-sq", "nan"], "finite"),
    (["--noise-sq", "1", "--batch-size", "0"], "--batch-size must be an integer >= 1"),
    (["--batch-size", "2"], "needs --noise-sq"),
    (["--delta-sq", "inf"], "finite"),
    (["--delta-sq", "1", "--noise-sq", "1"], "either it or --noise-sq"),
    (["--prox", "steps", "--delta-sq", "1"], "only with --prox exact"),
    (["--inner-steps", "2"], "only with --prox steps"),
    (["--sampled", "0"], "--sampled must be an integer >= 1"),
    (["--sampled", "3"], "1 … N = 2"),
    (["--clients", "4", "--sampled", "2", "--rounds", "3"], "too large for an exact PEP"),
    (["--algorithm", "fedavg", "--lam", "3"], "--lam does not apply to --algorithm fedavg"),
    (["--algorithm", "fedavg", "--beta", "2"], "--beta does not apply"),
    (["--algorithm", "fedavg", "--delta-sq", "1"], "--delta-sq does not apply"),
    (["--algorithm", "cgpfl", "--noise-sq", "1"], "--noise-sq does not apply"),
    (["--algorithm", "cgpfl", "--mu", "0.2"], "--mu does not apply"),
    (["--alpha", "0.5"], "--alpha does not apply to --algorithm pfedme"),
    (["--nonconvex", "--mu", "0.2"], "--mu does not apply"),
    # issue 43: torch's 80 GB allocation error; "need 0 < 1 - eta*mu_F/2 < 1, got 1.0"
    (["--noise-sq", "1", "--batch-size", "1000000000"],
     "--batch-size 1000000000: the engine's measurement would need at least 29.8 GiB (its "
     "(R + 1)·N·|D| = 4,000,000,000 mini-batch indices alone"),
    (["--lr", "1e-300"], "--lr 1e-300: ηβRμ_F/2 = 4.97e-302 is below float64's resolution"),
    (["--lr", "100"], "need ηβRμ_F/2 < 1, got 4.967; use --lr < 20.13"),
]


@pytest.mark.parametrize("argv,expected", HOSTILE)
def test_hostile_values_are_one_line_before_any_solve(argv, expected, capsys, no_solve):
    assert expected in _one_line_error([*BASE, *argv], capsys)


def test_help_says_which_options_apply(capsys):
    with pytest.raises(SystemExit):
        main(["worst-case", "--help"])
    out = capsys.readouterr().out
    assert "Which options apply" in out and "--noise-sq V" in out and "cgpfl" in out


def test_noise_raises_the_reported_worst_case(capsys):
    argv = [*BASE, "--algorithm", "fedavg", "--lr", "0.5", "--local-rounds", "2",
            "--sigma-sq", "1", "--json"]
    assert main(argv) == 0
    det = json.loads(capsys.readouterr().out)
    assert main([*argv, "--noise-sq", "1"]) == 0
    noisy = json.loads(capsys.readouterr().out)
    assert det["exact"] and not noisy["exact"]
    assert noisy["worst_case"] > det["worst_case"] * 1.01
    assert noisy["measured_se"] > 0 and noisy["measured"] <= noisy["worst_case"]


def test_a_failed_solve_is_one_line_exit_1(monkeypatch, capsys):
    import verification.worst_case.pep as pep

    def failed(*a, **k):
        raise pep.SolverFailed("clarabel failed (forced)")
    monkeypatch.setattr(pep, "_solve_once", failed)
    code = main([*BASE, "--algorithm", "fedavg"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err and "gave no worst case" in err


def test_pfedme_with_delta_and_sampling_puts_delta_in_the_bound(capsys):
    argv = [*BASE, "--clients", "3", "--sampled", "2", "--local-rounds", "2", "--lr", "0.1",
            "--lam", "3", "--mu", "0.5", "--sigma-sq", "1", "--delta-sq", "0.05", "--json"]
    assert main(argv) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["delta_sq"] == 0.05 and not res["exact"]
    assert res["terms"]["neighbourhood"] == pytest.approx(3.0 ** 2 * 0.05 / (3 * 0.5 / 3.5))
    assert res["terms"]["sampling"] > 0 and res["setting"]["sampled"] == 2


def test_nonconvex_reports_the_theorems_own_initial_condition(capsys):
    # relaxed F(w⁰) − F(w_T) ≤ Δ₀ lets ‖∇F‖² reach ≈ Δ₀/(ηT); F(w⁰) − F* ≤ Δ₀ caps the
    # true worst at 2L_F·Δ₀ = 3 (envelope curvature in [−λL/(λ−L), λL/(λ+L)] = [−1.5, 0.75]),
    # and the PEP's value of it (a valid relaxation, measured 5.94) stays far below
    argv = ["worst-case", "--nonconvex", "--clients", "1", "--lam", "3", "--lr", "0.001",
            "--rounds", "2", "--local-rounds", "1", "--no-contraction", "--json"]
    assert main(argv) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["worst_case_theorem_condition"] < 0.05 * res["worst_case"]
