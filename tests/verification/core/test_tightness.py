"""The tightness table (verification/core/tightness.py, in report.md), ``pflt verify --kind`` and
the figure paper_figures/bound_tightness.py, on fake bound/envelope checks (isolated
registry, tests/verification/conftest.py)."""

from __future__ import annotations

import csv
import json

import pytest

from paper_figures import bound_tightness
from pflt.cli import main
from verification.core.bound_grid import grid_bound_outcome
from verification.core.registry import Outcome, check, envelope_outcome


def register_bounds():
    @check("fake.bound_holds", paper="P", reference="Lemma 1", kind="bound")
    def holds(ctx):  # seed 0: tightness 8/2 = 4, seed 1: 16/6 = 2.67 (the deciding seed)
        m = [1.0, 2.0, 3.0 + 3.0 * ctx.seed]
        return grid_bound_outcome("n", [10, 100, 1000], m, [8.0, 8.0, 16.0], trivial=10.0)

    @check("fake.bound_fails", paper="P", reference="Theorem 2", kind="bound")
    def fails(ctx):
        return grid_bound_outcome("ε", [0.1, 1.0, 10.0], [1.0, 1.0, 1.0], [2.0, 0.5, 3.0])

    @check("fake.envelope", paper="P", reference="Theorem 3", kind="envelope")
    def env(ctx):
        t = [10, 100, 1000]
        shape = [1 / x for x in t]
        meas = [2 / x for x in t[:2]] + [3 / t[2]]
        return envelope_outcome(meas, shape, factor=2.0,
                                extra={"T": t, "measured": meas, "shape": shape})

    @check("fake.identity", paper="P", reference="eq. (1)", kind="identity")
    def ident(ctx):
        return Outcome(measured=1.0, theoretical=1.0, holds=True)


def test_verify_kind_runs_only_bounds_and_writes_the_tightness_table(fake_registry, tmp_path):
    register_bounds()
    out = tmp_path / "out"
    rc = main(["verify", "--quick", "--kind", "bound", "--kind", "envelope", "--seeds", "2",
               "--out", str(out), "--no-progress"])
    assert rc == 0
    data = json.loads((out / "results.json").read_text(encoding="utf-8"))
    by_id = {c["id"]: c for c in data["checks"]}
    assert set(by_id) == {"fake.bound_holds", "fake.bound_fails", "fake.envelope"}
    for c in by_id.values():  # numeric measured / theoretical / tightness on every seed
        for r in c["results"]:
            assert all(isinstance(r[k], (int, float)) for k in ("measured", "theoretical",
                                                                 "tightness"))
    report = (out / "report.md").read_text(encoding="utf-8")
    section = report.split("## Tightness of the bounds", 1)[1]
    rows = {line.split("`")[1]: line for line in section.splitlines()
            if line.startswith("| `fake.")}
    assert set(rows) == {"fake.bound_holds", "fake.bound_fails", "fake.envelope"}
    # the row is seed 1 at n = 1000: measured 6, bound 16 (above the trivial 10 there, but
    # below it at n = 10, 100: not vacuous — VACUOUS needs every grid point above)
    cells = [c.strip() for c in rows["fake.bound_holds"].split("|")]
    assert cells[3:10] == ["6", "16", "2.67", "no", "10", "-", "**HOLDS**"]
    cells = [c.strip() for c in rows["fake.bound_fails"].split("|")]
    assert cells[3:5] == ["1", "0.5"] and cells[5] == "0.5" and cells[9] == "**FAILS**"
    assert cells[6] == "n/a" and cells[7] == "-"  # no trivial bound stated
    cells = [c.strip() for c in rows["fake.envelope"].split("|")]
    assert cells[3] == "1.5" and cells[4] == "2 (C = 3)" and cells[5] == "1.33"


def test_kind_filter_rejects_unknown_kind(fake_registry, tmp_path):
    register_bounds()
    with pytest.raises(SystemExit):
        main(["verify", "--kind", "nonsense", "--out", str(tmp_path)])


def test_no_tightness_section_without_bound_checks(fake_registry, tmp_path):
    register_bounds()
    assert main(["verify", "--quick", "--kind", "identity", "--out", str(tmp_path),
                 "--no-progress"]) == 0
    assert "Tightness" not in (tmp_path / "report.md").read_text(encoding="utf-8")


def test_figure_plots_every_grid_from_results_json(fake_registry, tmp_path, monkeypatch):
    register_bounds()
    run = tmp_path / "run"
    assert main(["verify", "--quick", "--out", str(run), "--no-progress"]) == 0
    monkeypatch.setenv(bound_tightness.ENV_VAR, str(run))
    png, csv_path = bound_tightness.make(tmp_path / "fig")
    assert png.stat().st_size > 1000
    with csv_path.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    by_check = {}
    for r in rows:
        by_check.setdefault(r["check"], []).append(r)
    assert set(by_check) == {"fake.bound_holds", "fake.bound_fails", "fake.envelope"}
    env = by_check["fake.envelope"]
    assert [float(r["x"]) for r in env] == [10, 100, 1000] and env[0]["variable"] == "T"
    # bound = C · shape with C = max ratio = 3: 0.3, 0.03, 0.003
    assert [float(r["bound"]) for r in env] == pytest.approx([0.3, 0.03, 0.003])
    holds = by_check["fake.bound_holds"]
    assert [float(r["bound"]) for r in holds] == [8.0, 8.0, 16.0]
    assert [float(r["trivial"]) for r in holds] == [10.0] * 3
    assert holds[0]["variable"] == "n"


def test_figure_rejects_a_file_that_is_not_results_json(tmp_path, monkeypatch):
    bad = tmp_path / "results.json"
    bad.write_text("{}", encoding="utf-8")
    monkeypatch.setenv(bound_tightness.ENV_VAR, str(bad))
    with pytest.raises(ValueError, match="not a pflt verify results.json"):
        bound_tightness.make(tmp_path / "fig")


def test_figure_module_is_registered_with_the_driver():
    from paper_figures import driver

    assert "bound_tightness" in driver.discover()


def test_figure_without_results_says_so_and_runs_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv(bound_tightness.ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)  # no ./verify_out here
    png, csv_path = bound_tightness.make(tmp_path / "fig")
    assert png.is_file()
    assert csv_path.read_text(encoding="utf-8").strip().splitlines() == [
        "check,verdict,variable,x,measured,bound,trivial,worst_case"]


def _strict(text):
    """json.loads refusing NaN/Infinity (strict JSON)."""
    def refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")
    return json.loads(text, parse_constant=refuse)


def test_a_measurement_of_zero_gives_null_tightness_with_a_note_and_inf_in_markdown(
        fake_registry, tmp_path):
    # seed 0 measures 0 everywhere (bound / measured has no finite value), seed 1 measures
    # 1 at the last point (tightness 4): the deciding seed (and the figure's) is 1; with one
    # seed, seed 0
    from verification.core.registry import UNBOUNDED_TIGHTNESS

    @check("fake.bound_zero", paper="P", reference="Lemma 4", kind="bound")
    def zero(ctx):
        return grid_bound_outcome("n", [1, 2], [0.0, float(ctx.seed)], [4.0, 4.0])

    for seeds, want in (("1", None), ("2", 4.0)):
        out = tmp_path / f"out{seeds}"
        assert main(["verify", "--quick", "--kind", "bound", "--seeds", seeds, "--out",
                     str(out), "--no-progress"]) == 0
        text = (out / "results.json").read_text(encoding="utf-8")
        assert "Infinity" not in text
        (entry,) = _strict(text)["checks"]
        first = entry["results"][0]
        assert first["tightness"] is None and first["tightness_note"] == UNBOUNDED_TIGHTNESS
        assert "tightness ∞" in first["detail"]
        if want is not None:
            assert entry["results"][1]["tightness"] == want
            assert "tightness_note" not in entry["results"][1]
        report = (out / "report.md").read_text(encoding="utf-8")
        section = report.split("## Tightness of the bounds", 1)[1]
        row = next(ln for ln in section.splitlines() if ln.startswith("| `fake.bound_zero"))
        assert [c.strip() for c in row.split("|")][5] == ("∞" if want is None else "4")
        assert bound_tightness.series(entry)["measured"] == [0.0, 0.0 if want is None else 1.0]


def test_figure_draws_worst_case_checks_with_their_three_numbers(fake_registry, tmp_path,
                                                                  monkeypatch):
    from verification.worst_case.outcome import worst_case_outcome

    @check("fake.worst_case", paper="P", reference="Theorem 4", kind="worst_case",
           tolerance=1e-6, tolerance_reason="solver accuracy")
    def worst(ctx):
        return worst_case_outcome(measured=1.0, worst=2.0, bound=8.0, exact=True, rel_tol=1e-6)

    run = tmp_path / "run"
    assert main(["verify", "--quick", "--out", str(run), "--no-progress"]) == 0
    monkeypatch.setenv(bound_tightness.ENV_VAR, str(run))
    png, csv_path = bound_tightness.make(tmp_path / "fig")
    assert png.stat().st_size > 1000
    with csv_path.open(encoding="utf-8") as fh:
        (row,) = list(csv.DictReader(fh))
    assert row["check"] == "fake.worst_case" and row["verdict"] == "HOLDS"
    assert (float(row["measured"]), float(row["worst_case"]), float(row["bound"])) == (1, 2, 8)
