"""``pflt worst-case`` and ``pflt verify --kind worst_case``: output, JSON, one-line errors,
and the install hint without the [pep] extra."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pflt.cli import main

SMALL = ["--clients", "2", "--rounds", "1", "--local-rounds", "2", "--lr", "0.3",
         "--lam", "2", "--mu", "0.2", "--L", "1"]


def _err(argv, capsys):
    code = main(argv)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_importing_the_worst_case_modules_does_not_import_pepit():
    code = ("import sys, pfl_theory.oracle_methods, verification.checks.worst_case, "
            "verification.checks.bounds_pfedme, pflt.commands.worst_case, "
            "paper_figures.worst_case; "
            "print('PEPit' in sys.modules or 'cvxpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"


def test_missing_pepit_is_one_line_with_the_install_hint(monkeypatch, capsys):
    import verification.worst_case.pep as pep

    def missing():
        raise pep.PEPUnavailable(pep.INSTALL_HINT)
    monkeypatch.setattr(pep, "require_pepit", missing)
    line = _err(["worst-case", *SMALL, "--no-contraction"], capsys)
    assert line == "pflt worst-case: error: " + pep.INSTALL_HINT
    line = _err(["verify", "--quick", "--kind", "worst_case", "--no-progress"], capsys)
    assert "pip install -e '.[pep]'" in line


@pytest.mark.parametrize("argv,expected", [
    (["--rounds", "10", "--local-rounds", "5"], "too large for an exact PEP"),
    (["--prox", "steps", "--inner-steps", "3", "--rounds", "3", "--local-rounds", "5"],
     "45 oracle calls"),
    (["--mu", "2", "--L", "1"], "0 < mu < L"),
    (["--clients", "9"], "--clients"),
    (["--lam", "-1"], "lam must be > 0"),
    (["--algorithm", "fedavg", "--nonconvex"], "--nonconvex"),
])
def test_bad_settings_are_one_line_errors(argv, expected, capsys):
    assert expected in _err(["worst-case", *argv, "--no-contraction"], capsys)


def test_worst_case_report_and_json(capsys):
    pytest.importorskip("PEPit")
    assert main(["worst-case", *SMALL, "--no-contraction"]) == 0
    out = capsys.readouterr().out
    assert "worst case (exact PEP" in out and "paper bound" in out
    assert "smoothness exact 0.666667 vs paper L_F = λ = 2" in out     # λL/(λ+L) = 2/3
    assert main(["worst-case", *SMALL, "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["measured"] <= res["worst_case"] * (1 + 1e-6)
    assert res["rho"] < 1 and res["largest_contracting_step"] > res["admissible_step"]
    # largest step with ρ < 1 for R = 2 local envelope-GD steps, exact: 2/L_F = 3 at β = 1
    assert res["largest_contracting_step"] == pytest.approx(3.0, rel=2e-3)


def test_fedavg_worst_case_equals_the_textbook_rate(capsys):
    pytest.importorskip("PEPit")
    argv = ["worst-case", "--algorithm", "fedavg", "--lr", "1.5", "--local-rounds", "2",
            "--rounds", "2", "--mu", "0.1", "--L", "1", "--json", "--no-contraction"]
    assert main(argv) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["worst_case"] == pytest.approx(0.85 ** 8, rel=1e-6)
    assert res["looseness"] == pytest.approx(1.0, rel=1e-6)


CGPFL = ["worst-case", "--algorithm", "cgpfl", "--contexts", "2", "--clients", "4",
         "--rounds", "2", "--local-rounds", "1", "--lam", "3"]


def test_cgpfl_worst_case_report_and_json(capsys):
    pytest.importorskip("PEPit")
    assert main([*CGPFL, "--no-contraction"]) == 0
    out = capsys.readouterr().out
    assert "cgpfl, fixed assignment" in out and "the theorem: 4" in out
    assert "bound holds" in out and "as printed" in out and "4× the proof's" in out
    assert main([*CGPFL, "--no-contraction", "--json", "--beta", "0.01"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["setting"]["beta_used"] == 0.01 and res["setting"]["N"] == 4
    assert res["measured"] <= res["worst_case"] * 1.02 <= res["bound"]
    assert res["printed"]["factor"] == 4          # K|C_k| = N = 4


@pytest.mark.parametrize("argv,expected", [
    (["--clients", "3", "--contexts", "2"], "multiple of --contexts"),
    (["--lam", "1.5"], "lam >= 2L"),
    (["--alpha", "2"], "alpha"),
    (["--rounds", "9", "--local-rounds", "5"], "too large for an exact PEP"),
])
def test_cgpfl_bad_settings_are_one_line_errors(argv, expected, capsys):
    assert expected in _err(["worst-case", "--algorithm", "cgpfl", *argv, "--no-contraction"],
                            capsys)


def _res(ratio: float, held: bool, metric: str = "gap_avg") -> dict:
    return {"status": "optimal", "worst_case": ratio, "bound": 1.0, "metric": metric,
            "hypotheses": {"a": True, "b": held}, "exact": True}


@pytest.mark.parametrize("ratio", [0.5, 1.0, 2.0])
def test_the_outside_hypotheses_note_is_on_every_side(ratio):
    from pflt.commands.worst_case import verdict_line

    note = "(outside the theorem's hypotheses)"
    assert note in verdict_line(_res(ratio, held=False))
    assert note not in verdict_line(_res(ratio, held=True))


def test_the_header_names_only_the_methods_parameters():
    from pflt.commands.worst_case import header

    s = {"method": "fedavg", "inner": None, "clients": 2, "rounds": 2, "local_rounds": 2,
         "lr": 1.5, "lam": 15.0, "beta": 1.0, "mu": 0.1, "L": 1.0, "sigma_sq": 0.0,
         "Delta0": 1.0}
    fedavg = header(s)
    assert "λ" not in fedavg and "β" not in fedavg and "μ = 0.1" in fedavg
    pfedme = header({**s, "method": "pfedme"})
    assert "λ = 15" in pfedme and "β = 1" in pfedme and "exact prox" in pfedme
    nonconvex = header({**s, "method": "pfedme", "mu": None})
    assert "None" not in nonconvex and "non-convex" in nonconvex


@pytest.mark.parametrize("metric,words", [("gap_avg", "F(w̄_T) − F(w*)"),
                                          ("dist", "‖w^T − w*‖²"),
                                          ("grad_sq_avg", "‖∇F(w^t)‖²")])
def test_the_metric_line_says_what_the_metric_measures(metric, words):
    from pflt.commands.worst_case import metric_line

    line = metric_line({**_res(1.0, True, metric), "theorem": "T"})
    assert line.startswith(f"metric: {metric} = ") and words in line


def test_an_option_that_does_not_apply_is_refused_before_the_heavy_imports():
    code = ("import sys; from pflt.cli import main; "
            "rc = main(['worst-case', '--algorithm', 'fedavg', '--lam', '3']); "
            "print(rc, 'torch' in sys.modules, 'sympy' in sys.modules)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.stdout.split() == ["2", "False", "False"], run.stdout + run.stderr
    assert "--lam does not apply to --algorithm fedavg" in run.stderr
