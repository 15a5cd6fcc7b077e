"""Tests of verification/core/runner.py, verification/core/report.py and ``pflt verify``.

Every test registers its own fake checks into an isolated registry (``fake_registry``
fixture, tests/verification/conftest.py), so nothing depends on the real checks."""

from __future__ import annotations

import json
import sys
import textwrap
import uuid

import numpy as np
import pytest

from pflt.cli import main
from verification.core import runner
from verification.core.registry import Outcome, Result, Verdict, check

REAL_LOAD_CHECKS = runner.load_checks  # saved before the fixture replaces it


def _strict_json(path):
    def reject(token):
        raise ValueError(f"non-strict JSON constant {token}")

    return json.loads(path.read_text(encoding="utf-8"), parse_constant=reject)


def register_trio(calls=None):
    """fake.true (1 + 1 == 2), fake.false (claims 2 < 1), fake.raises (divides by zero)."""
    calls = calls if calls is not None else []

    @check("fake.true", paper="Paper A", reference="eq. (1)", kind="identity",
           tolerance=1e-12, tolerance_reason="exact integer arithmetic",
           quick={"n": 2}, full={"n": 20})
    def true_claim(ctx):
        calls.append(("true", ctx.size, ctx.seed, ctx.params["n"]))
        measured = sum([1.0] * ctx.params["n"])
        return Outcome(measured=measured, theoretical=float(ctx.params["n"]),
                       holds=abs(measured - ctx.params["n"]) <= ctx.tolerance,
                       detail=f"sum of {ctx.params['n']} ones")

    @check("fake.false", paper="Paper B", reference="Theorem 2", kind="inequality",
           reconstructed=True)
    def false_claim(ctx):
        calls.append(("false", ctx.size, ctx.seed))
        measured, bound = 2.0, 1.0
        return Outcome(measured=measured, theoretical=bound, holds=measured <= bound,
                       detail="2 <= 1 is false")

    @check("fake.raises", paper="Paper B", reference="Lemma 3", kind="rate")
    def raising(ctx):
        calls.append(("raises", ctx.size, ctx.seed))
        return Outcome(measured=1 / 0, theoretical=0.0, holds=True)

    return calls


def test_verdicts_of_true_false_and_raising_checks(fake_registry):
    register_trio()
    suite = runner.run_suite(runner.select(fake_registry), size="quick", progress=False)
    verdicts = {run.check.id: run.verdict for run in suite.runs}
    assert verdicts == {"fake.false": Verdict.FAILS, "fake.raises": Verdict.ERROR,
                        "fake.true": Verdict.HOLDS}
    raised = next(r for r in suite.runs if r.check.id == "fake.raises").results[0]
    assert "ZeroDivisionError" in raised.detail
    assert suite.counts() == {"HOLDS": 1, "FAILS": 1, "ERROR": 1, "ERRATUM": 0, "VACUOUS": 0, "NOT RUN": 0,
                              "INCONCLUSIVE": 0, "total": 3}
    assert suite.exit_code == 1


def test_exit_code_zero_when_only_holds_and_fails(fake_registry):
    register_trio()
    chosen = runner.select(fake_registry, only=["fake.true", "fake.false"])
    suite = runner.run_suite(chosen, size="quick", progress=False)
    assert suite.exit_code == 0


def _result(verdict):
    return Result(check=None, verdict=verdict, measured=None, theoretical=None, detail="",
                  seconds=0.0, seed=0, size="quick")


@pytest.mark.parametrize("verdicts, expected", [
    (["HOLDS"], "HOLDS"), (["HOLDS", "HOLDS"], "HOLDS"), (["HOLDS", "FAILS"], "FAILS"),
    (["FAILS", "HOLDS", "ERROR"], "ERROR"), (["ERROR", "FAILS"], "ERROR"),
])
def test_aggregate_worst_verdict_wins(verdicts, expected):
    assert runner.aggregate([_result(Verdict(v)) for v in verdicts]) is Verdict(expected)


def test_aggregate_empty_raises():
    with pytest.raises(ValueError):
        runner.aggregate([])


def test_seeds_run_separately_and_aggregate(fake_registry):
    seen = []

    @check("fake.seed_dependent", paper="P", reference="eq. (9)", kind="identity")
    def seed_dependent(ctx):
        seen.append(ctx.seed)
        return Outcome(measured=ctx.seed, theoretical=0, holds=ctx.seed != 1)

    suite = runner.run_suite(runner.select(fake_registry), size="quick", seeds=3,
                             progress=False)
    assert seen == [0, 1, 2]
    (run,) = suite.runs
    assert [r.seed for r in run.results] == [0, 1, 2]
    assert [r.verdict for r in run.results] == [Verdict.HOLDS, Verdict.FAILS, Verdict.HOLDS]
    assert run.verdict is Verdict.FAILS and run.seeds_holding == 2
    assert suite.seeds == (0, 1, 2)
    explicit = runner.run_suite(runner.select(fake_registry), size="quick", seeds=[5, 7],
                                progress=False)
    assert [r.seed for r in explicit.runs[0].results] == [5, 7]


@pytest.mark.parametrize("seeds", [0, -1, [], [1, 1], [-2]])
def test_bad_seeds_rejected(fake_registry, seeds):
    with pytest.raises(ValueError):
        runner.run_suite([], seeds=seeds, progress=False)


def test_select_by_glob_and_kind(fake_registry):
    register_trio()
    ids = lambda checks: [c.id for c in checks]  # noqa: E731
    assert ids(runner.select(fake_registry)) == ["fake.false", "fake.raises", "fake.true"]
    assert ids(runner.select(fake_registry, only="fake.t*")) == ["fake.true"]
    assert ids(runner.select(fake_registry, only="fake.true,fake.raises")) == [
        "fake.raises", "fake.true"]
    assert ids(runner.select(fake_registry, kinds=["inequality"])) == ["fake.false"]
    with pytest.raises(ValueError, match="matches no check"):
        runner.select(fake_registry, only=["fake.*", "nope.*"])


def test_cli_writes_parseable_report_and_results(fake_registry, tmp_path, capsys):
    calls = register_trio()
    out = tmp_path / "out"
    rc = main(["verify", "--quick", "--seeds", "2", "--out", str(out), "--no-progress"])
    assert rc == 1  # fake.raises is an ERROR
    data = _strict_json(out / "results.json")
    assert data["summary"] == {"HOLDS": 1, "FAILS": 1, "ERROR": 1, "ERRATUM": 0, "VACUOUS": 0, "NOT RUN": 0,
                               "INCONCLUSIVE": 0, "total": 3}
    assert data["size"] == "quick" and data["seeds"] == [0, 1]
    env = data["environment"]
    assert env["device"] == "cpu" or env["device"].startswith("cuda")
    assert env["versions"]["numpy"] == np.__version__
    assert env["python"] == ".".join(map(str, sys.version_info[:3]))
    by_id = {c["id"]: c for c in data["checks"]}
    assert by_id["fake.true"]["verdict"] == "HOLDS"
    assert by_id["fake.false"]["verdict"] == "FAILS" and by_id["fake.false"]["reconstructed"]
    assert by_id["fake.raises"]["verdict"] == "ERROR"
    per_seed = by_id["fake.true"]["results"]
    assert [r["seed"] for r in per_seed] == [0, 1]
    assert all(r["measured"] == 2.0 and r["size"] == "quick" for r in per_seed)
    assert sorted(calls) == sorted([(k, "quick", s) + ((2,) if k == "true" else ())
                                    for k in ("true", "false", "raises") for s in (0, 1)])
    report = (out / "report.md").read_text(encoding="utf-8")
    summary = "3 checks: 1 HOLD, 1 FAIL, 0 ERRATUM, 0 INCONCLUSIVE, 1 ERROR, 0 VACUOUS"
    assert f"**{summary}.**" in report
    rows = [line for line in report.splitlines() if line.startswith("| `fake.")]
    assert len(rows) == 1 and "`fake.true`" in rows[0]  # only HOLDS are a table
    assert report.index("## FAILS (1)") < report.index("## ERROR (1)") < report.index("## HOLDS (1)")
    false_head = next(r for r in report.splitlines() if r.startswith("### `fake.false`"))
    assert "Theorem 2" in false_head and "RECONSTRUCTED" in false_head
    assert "- **Decided at:** quick size" in report
    details = (out / "details.md").read_text(encoding="utf-8")
    assert "exact integer arithmetic" in details  # tolerance reasons are listed
    assert "[details.md](details.md)" in report   # and report.md says where
    printed = capsys.readouterr().out
    assert "fake.raises" in printed and summary in printed
    assert "ZeroDivisionError" in printed


def test_cli_exit_zero_without_errors_and_default_size_is_full(fake_registry, tmp_path):
    calls = register_trio()
    rc = main(["verify", "--only", "fake.true", "--only", "fake.false",
               "--out", str(tmp_path), "--no-progress"])
    assert rc == 0
    assert ("true", "full", 0, 20) in calls and all(c[1] == "full" for c in calls)
    assert not any(c[0] == "raises" for c in calls)
    data = _strict_json(tmp_path / "results.json")
    assert sorted(c["id"] for c in data["checks"]) == ["fake.false", "fake.true"]


def test_cli_only_unknown_pattern_and_bad_seeds_are_usage_errors(fake_registry, tmp_path,
                                                                 capsys):
    register_trio()
    assert main(["verify", "--only", "zzz.*", "--out", str(tmp_path)]) == 2
    assert "matches no check" in capsys.readouterr().err
    assert main(["verify", "--seeds", "0", "--out", str(tmp_path)]) == 2


def test_cli_list_prints_checks_and_runs_nothing(fake_registry, tmp_path, capsys):
    calls = register_trio()
    assert main(["verify", "--list"]) == 0
    printed = capsys.readouterr().out
    for cid in ("fake.true", "fake.false", "fake.raises"):
        assert cid in printed
    assert "3 check(s)" in printed and calls == []
    assert main(["verify", "--list", "--only", "fake.f*"]) == 0
    printed = capsys.readouterr().out
    assert "fake.false" in printed and "fake.true" not in printed


def test_figures_written_by_checks_are_linked(fake_registry, tmp_path):
    @check("fake.draws", paper="P", reference="Fig. 1", kind="identity")
    def draws(ctx):
        path = ctx.out_dir / "curve.csv"
        path.write_text("x,y\n1,2\n")
        return Outcome(measured=1.0, theoretical=1.0, holds=True, figures=(str(path),))

    @check("fake.silent", paper="P", reference="eq. (2)", kind="identity")
    def silent(ctx):
        return Outcome(measured=1.0, theoretical=1.0, holds=True)

    rc = main(["verify", "--quick", "--out", str(tmp_path), "--no-progress"])
    assert rc == 0
    data = _strict_json(tmp_path / "results.json")
    fig = next(c for c in data["checks"] if c["id"] == "fake.draws")["figures"]
    assert fig == ["figures/fake.draws/seed0/curve.csv"]
    assert (tmp_path / fig[0]).is_file()
    assert "(figures/fake.draws/seed0/curve.csv)" in (tmp_path / "details.md").read_text()
    assert not (tmp_path / "figures" / "fake.silent").exists()  # no empty directories


def test_non_finite_and_array_values_are_strict_json(fake_registry, tmp_path):
    @check("fake.values", paper="P", reference="eq. (3)", kind="identity")
    def values(ctx):
        return Outcome(measured=np.array([1.0, np.inf]), theoretical=float("nan"),
                       holds=False, detail="pipes | in | detail")

    main(["verify", "--quick", "--out", str(tmp_path), "--no-progress"])
    entry = _strict_json(tmp_path / "results.json")["checks"][0]["results"][0]
    assert entry["measured"] == [1.0, "Infinity"] and entry["theoretical"] == "NaN"
    # a non-HOLDS check is a list entry (no table): the detail is kept verbatim
    assert "- **Evidence** (seed 0): pipes | in | detail" in (tmp_path / "report.md").read_text()


def test_load_checks_reports_broken_modules(fake_registry, tmp_path, monkeypatch):
    pkg = f"fakechecks_{uuid.uuid4().hex[:8]}"
    (tmp_path / pkg).mkdir()
    (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / pkg / "good.py").write_text(textwrap.dedent("""
        from verification.core.registry import Outcome, check

        @check("fake.from_module", paper="P", reference="eq. (4)", kind="identity")
        def ok(ctx):
            return Outcome(measured=0.0, theoretical=0.0, holds=True)
    """))
    (tmp_path / pkg / "broken.py").write_text("raise ImportError('missing dependency xyz')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    checks, errors = REAL_LOAD_CHECKS(pkg)
    assert list(checks) == ["fake.from_module"]
    assert list(errors) == ["broken"] and "missing dependency xyz" in errors["broken"]


def test_import_errors_become_error_entries(fake_registry, tmp_path, monkeypatch):
    register_trio()
    monkeypatch.setattr(runner, "load_checks", lambda package="verification.checks", only=None: (
        dict(fake_registry), {"broken": "ImportError: missing dependency xyz"}))
    rc = main(["verify", "--quick", "--only", "fake.true", "--out", str(tmp_path),
               "--no-progress"])
    assert rc == 0  # the broken module is not selected by --only fake.true
    rc = main(["verify", "--quick", "--only", "fake.true,import.*", "--out", str(tmp_path),
               "--no-progress"])
    assert rc == 1
    data = _strict_json(tmp_path / "results.json")
    entry = next(c for c in data["checks"] if c["id"] == "import.broken")
    assert entry["verdict"] == "ERROR" and "missing dependency xyz" in entry["results"][0][
        "detail"]
