"""Tests of paper_figures/driver.py, ``pflt figures`` and paper_figures/verification_summary.py
(the figure tests live here with the other verification-machinery tests)."""

from __future__ import annotations

import csv
import json
import textwrap
import uuid

import pytest

from paper_figures import driver, verification_summary
from pflt.cli import main
from verification.core.registry import Outcome, check

GOOD = """
import matplotlib.pyplot as plt

def make(out_dir, *, quick=False, seed=0):
    n = 3 if quick else 10
    xs = list(range(1, n + 1))
    ys = [x * x + seed for x in xs]
    fig, ax = plt.subplots()
    ax.plot(xs, ys)
    png, data = out_dir / "good.png", out_dir / "good.csv"
    fig.savefig(png)
    data.write_text("x,y\\n" + "".join(f"{x},{y}\\n" for x, y in zip(xs, ys)))
    return [png, data]
"""

MODULES = {
    "good": GOOD,
    "bad": "def make(out_dir, *, quick=False, seed=0):\n    raise RuntimeError('kaputt')\n",
    "nocsv": ("def make(out_dir, *, quick=False, seed=0):\n"
              "    p = out_dir / 'nocsv.png'\n    p.write_bytes(b'x')\n    return [p]\n"),
    "ghost": "def make(out_dir, *, quick=False, seed=0):\n    return [out_dir / 'none.png']\n",
    "broken_import": "import module_that_does_not_exist_xyz\n",
    "helper": "def not_make():\n    return 1\n",
    "_private": "raise RuntimeError('must never be imported')\n",
    "driver": "raise RuntimeError('a driver module is never treated as a figure')\n",
}


@pytest.fixture
def fig_package(tmp_path, monkeypatch):
    """A throw-away figure package (unique name, so no module cache is shared)."""
    name = f"fakefigs_{uuid.uuid4().hex[:8]}"
    root = tmp_path / "src" / name
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    for mod, code in MODULES.items():
        (root / f"{mod}.py").write_text(textwrap.dedent(code))
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    monkeypatch.setattr(driver, "DEFAULT_PACKAGE", name)
    return name


def test_discover_skips_driver_private_and_helpers(fig_package):
    found = driver.discover(fig_package)
    assert sorted(found) == ["bad", "broken_import", "ghost", "good", "nocsv"]
    assert callable(found["good"]) and isinstance(found["broken_import"], str)
    assert "module_that_does_not_exist_xyz" in found["broken_import"]


def test_run_figures_reports_each_failure_and_runs_the_rest(fig_package, tmp_path):
    out = tmp_path / "figs"
    results = {r.name: r for r in driver.run_figures(out_dir=out, quick=True, seed=4,
                                                     progress=False)}
    assert results["good"].ok and results["good"].error == ""
    assert sorted(p.name for p in results["good"].files) == ["good.csv", "good.png"]
    assert (out / "good.png").stat().st_size > 0
    rows = list(csv.reader((out / "good.csv").open()))
    assert rows == [["x", "y"], ["1", "5"], ["2", "8"], ["3", "13"]]  # quick: n=3, +seed 4
    assert not results["bad"].ok and "RuntimeError: kaputt" in results["bad"].error
    assert not results["nocsv"].ok and "no .csv" in results["nocsv"].error
    assert not results["ghost"].ok and "do not exist" in results["ghost"].error
    assert not results["broken_import"].ok
    assert "import failed" in results["broken_import"].error
    summary = driver.format_results(list(results.values()))
    assert "5 figure module(s): 1 ok, 4 failed" in summary


def test_only_filter_and_unknown_name(fig_package, tmp_path):
    results = driver.run_figures(out_dir=tmp_path, only="go*", progress=False)
    assert [r.name for r in results] == ["good"] and results[0].ok
    with pytest.raises(ValueError, match="matches no figure module"):
        driver.run_figures(out_dir=tmp_path, only=["nothing_like_this"], progress=False)


def test_cli_exit_code_follows_failures(fig_package, tmp_path, capsys):
    assert main(["figures", "--quick", "--out", str(tmp_path), "--no-progress"]) == 1
    printed = capsys.readouterr().out
    assert "FAILED  bad" in printed and "ok      good" in printed
    assert main(["figures", "--only", "good", "--out", str(tmp_path / "g"),
                 "--no-progress"]) == 0
    assert (tmp_path / "g" / "good.png").is_file() and (tmp_path / "g" / "good.csv").is_file()
    assert main(["figures", "--only", "zzz", "--out", str(tmp_path)]) == 2
    assert main(["figures", "--list"]) == 0
    assert "broken_import  (import failed" in capsys.readouterr().out


def _read_csv(path):
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_verification_summary_from_results_json(fake_registry, tmp_path, monkeypatch):
    for i, holds in enumerate([True, True, False]):
        @check(f"fake.a{i}", paper="Paper A", reference="eq. (1)", kind="identity",
               reconstructed=(i == 0))
        def claim(ctx, holds=holds):
            return Outcome(measured=1.0, theoretical=1.0, holds=holds)

    @check("fake.b", paper="Paper B", reference="Lemma 1", kind="rate")
    def broken(ctx):
        raise RuntimeError("no")

    run_dir = tmp_path / "verify_run"
    assert main(["verify", "--quick", "--out", str(run_dir), "--no-progress"]) == 1
    monkeypatch.setenv(verification_summary.ENV_VAR, str(run_dir))
    files = verification_summary.make(tmp_path / "figs")
    assert sorted(p.name for p in files) == ["verification_summary.csv",
                                             "verification_summary.png"]
    assert all(p.is_file() and p.stat().st_size > 0 for p in files)
    rows = _read_csv(tmp_path / "figs" / "verification_summary.csv")
    # expected counts by construction of the fake checks above
    zero = {"ERRATUM": "0", "INCONCLUSIVE": "0", "NOT RUN": "0"}
    assert rows == [
        {"paper": "Paper A", "HOLDS": "2", "FAILS": "1", **zero, "ERROR": "0", "VACUOUS": "0",
         "total": "3", "reconstructed": "1", "sources": "Paper A"},
        {"paper": "Paper B", "HOLDS": "0", "FAILS": "0", **zero, "ERROR": "1", "VACUOUS": "0",
         "total": "1",
         "reconstructed": "0", "sources": "Paper B"},
    ]


def test_verification_summary_without_results_says_so_and_runs_nothing(fake_registry, tmp_path,
                                                                      monkeypatch):
    monkeypatch.delenv(verification_summary.ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)  # no ./verify_out here
    ran = []

    @check("fake.identity", paper="Paper C", reference="eq. (5)", kind="identity")
    def ident(ctx):  # must not run: the figure only reads results it is given
        ran.append(ctx.seed)
        return Outcome(measured=0.0, theoretical=0.0, holds=True)

    drawn = []
    import matplotlib.axes

    original = matplotlib.axes.Axes.text

    def spy(self, x, y, s, *a, **k):
        drawn.append(s)
        return original(self, x, y, s, *a, **k)

    monkeypatch.setattr(matplotlib.axes.Axes, "text", spy)
    files = verification_summary.make(tmp_path / "figs", quick=True, seed=3)
    assert ran == []
    assert any("no `pflt verify` results" in s for s in drawn)
    assert _read_csv(tmp_path / "figs" / "verification_summary.csv") == []
    assert all(p.is_file() for p in files)


def test_verification_summary_counts_erratum_and_inconclusive(tmp_path, monkeypatch):
    results = {"size": "quick", "seeds": [0], "checks": [
        {"paper": "P", "verdict": v, "kind": "identity"}
        for v in ("HOLDS", "ERRATUM", "ERRATUM", "INCONCLUSIVE")]}
    (tmp_path / "results.json").write_text(json.dumps(results))
    monkeypatch.setenv(verification_summary.ENV_VAR, str(tmp_path))
    verification_summary.make(tmp_path / "figs")
    rows = _read_csv(tmp_path / "figs" / "verification_summary.csv")
    assert rows == [{"paper": "P", "HOLDS": "1", "FAILS": "0", "ERRATUM": "2",
                     "INCONCLUSIVE": "1", "ERROR": "0", "VACUOUS": "0", "NOT RUN": "0", "total": "4", "reconstructed": "0",
                     "sources": "P"}]


def test_verification_summary_rejects_foreign_json(tmp_path, monkeypatch):
    bad = tmp_path / "results.json"
    bad.write_text('{"something": 1}')
    monkeypatch.setenv(verification_summary.ENV_VAR, str(bad))
    with pytest.raises(ValueError, match="not a pflt verify results.json"):
        verification_summary.make(tmp_path / "figs")
    monkeypatch.setenv(verification_summary.ENV_VAR, str(tmp_path / "missing.json"))
    with pytest.raises(FileNotFoundError):
        verification_summary.make(tmp_path / "figs")


def test_real_figure_modules_are_discovered():
    found = driver.discover()
    assert "verification_summary" in found and "driver" not in found


def test_figures_verify_results_option_reaches_the_summary(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(verification_summary.ENV_VAR, raising=False)
    results = {"size": "full", "seeds": [0, 1], "checks": [
        {"paper": "Q", "verdict": "FAILS", "kind": "rate"}]}
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "results.json").write_text(json.dumps(results))
    assert main(["figures", "--only", "verification_summary", "--out", str(tmp_path / "f"),
                 "--verify-results", str(tmp_path / "v"), "--no-progress"]) == 0
    rows = _read_csv(tmp_path / "f" / "verification_summary.csv")
    assert [(r["paper"], r["FAILS"]) for r in rows] == [("Q", "1")]
    assert main(["figures", "--verify-results", str(tmp_path / "nope"), "--out",
                 str(tmp_path / "f")]) == 2


TIMED = """
import time

def make(out_dir, *, quick=False, seed=0):
    {body}
    png, data = out_dir / "{name}.png", out_dir / "{name}.csv"
    png.write_bytes(b"x")
    data.write_text("x\\n1\\n")
    return [png, data]
"""


def test_each_module_reports_its_cpu_and_wall_time_as_it_finishes(tmp_path, monkeypatch,
                                                                  capsys):
    """Issue 45 item 4: a module that waits costs wall time but no CPU, one that computes
    costs CPU; both are printed when each finishes (stderr) and summed at the end."""
    name = f"timedfigs_{uuid.uuid4().hex[:8]}"
    root = tmp_path / "src" / name
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "sleeper.py").write_text(TIMED.format(name="sleeper", body="time.sleep(0.4)"))
    (root / "spinner.py").write_text(TIMED.format(
        name="spinner", body="t = time.process_time()\n    while time.process_time() - t "
                             "< 0.3:\n        pass"))
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    results = {r.name: r for r in driver.run_figures(out_dir=tmp_path / "o", package=name,
                                                     progress=True)}
    err = capsys.readouterr().err
    assert results["sleeper"].seconds >= 0.4 and results["sleeper"].cpu_seconds < 0.2
    assert results["spinner"].cpu_seconds >= 0.3
    for mod in ("sleeper", "spinner"):
        assert f"done  {mod}: {results[mod].timing()}" in err
    summary = driver.format_results(list(results.values()))
    cpu = results["sleeper"].cpu_seconds + results["spinner"].cpu_seconds
    assert f"total CPU {cpu:.1f} s" in summary.splitlines()[-1]
    assert f"ok      sleeper ({results['sleeper'].timing()})" in summary
