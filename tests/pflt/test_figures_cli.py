"""``pflt figures`` draws the verify results it is given and says which (issue 27 item 4):
never silently from whichever ``pflt verify`` ran last."""

from __future__ import annotations

import csv
import json

from paper_figures import verification_summary
from pflt.cli import main


def _results(path, papers_kinds, size="quick"):
    path.mkdir(parents=True, exist_ok=True)
    checks = [{"id": f"{p}.{i}", "paper": p, "kind": k, "verdict": "HOLDS"}
              for i, (p, k) in enumerate(papers_kinds)]
    (path / "results.json").write_text(json.dumps(
        {"size": size, "seeds": [0], "checks": checks,
         "environment": {"time_utc": "2026-11-26T12:00:00+00:00"}}))
    return path


def _papers(out):
    return [r["paper"] for r in csv.DictReader(open(out / "verification_summary.csv"))]


def _figures(argv, capsys):
    code = main(["figures", "--only", "verification_summary", "--no-progress", *argv])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_from_dir_is_drawn_and_named_with_what_it_covers(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(verification_summary.ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    _results(tmp_path / "verify_out", [("pFedMe", "rate")])           # the "last" verify
    given = _results(tmp_path / "bounds", [("CGPFL", "bound"), ("PLGU", "bound")])
    code, printed = _figures(["--out", "f", "--from", str(given)], capsys)
    assert code == 0 and _papers(tmp_path / "f") == ["CGPFL", "PLGU"]
    line = next(ln for ln in printed.splitlines() if ln.startswith("verify results drawn"))
    assert str(given / "results.json") in line
    assert "2 check(s) of 2 paper(s), kinds bound 2" in line and "size quick" in line


def test_without_from_the_default_is_named(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(verification_summary.ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    _results(tmp_path / "verify_out", [("pFedMe", "rate")])
    code, printed = _figures(["--out", "f"], capsys)
    assert code == 0 and _papers(tmp_path / "f") == ["pFedMe"]
    assert "verify results drawn: verify_out/results.json (1 check(s)" in printed


def test_the_readme_order_is_found(tmp_path, monkeypatch, capsys):
    """Issue 36: the README runs ``pflt verify --quick --out runs/verify`` then
    ``pflt figures --quick``; the figures drew nothing. ``verify_out`` still comes first."""
    monkeypatch.delenv(verification_summary.ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    _results(tmp_path / "runs" / "verify", [("pFedMe", "rate"), ("PPFE", "bound")])
    code, printed = _figures(["--out", "f"], capsys)
    assert code == 0 and sorted(_papers(tmp_path / "f")) == ["PPFE", "pFedMe"]
    assert "verify results drawn: runs/verify/results.json (2 check(s)" in printed
    _results(tmp_path / "verify_out", [("CGPFL", "rate")])
    code, printed = _figures(["--out", "f"], capsys)
    assert _papers(tmp_path / "f") == ["CGPFL"]


def test_results_lying_around_in_out_are_not_picked_up(tmp_path, monkeypatch, capsys):
    # before: the newest results.json anywhere under --out was drawn without a word
    monkeypatch.delenv(verification_summary.ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    _results(tmp_path / "f" / "old_verify", [("Stale", "rate")])
    code, printed = _figures(["--out", "f"], capsys)
    assert code == 0 and _papers(tmp_path / "f") == []
    assert "verify results drawn: none" in printed


def test_from_without_results_is_a_one_line_error(tmp_path, capsys):
    code, printed = _figures(["--out", str(tmp_path / "f"), "--from", str(tmp_path)], capsys)
    assert code == 2 and "pflt figures: error: --from" in printed
    assert "no pflt verify results.json" in printed


def test_a_failing_module_keeps_its_previous_files(tmp_path, monkeypatch, capsys):
    from paper_figures import driver

    fail = []

    def make(name):
        def write(out_dir, *, quick=False, seed=0):
            if name in fail:
                raise OSError(28, "No space left on device")
            files = [out_dir / f"{name}.png", out_dir / f"{name}.csv"]
            for f in files:
                f.write_text(name)
            return files
        return write

    monkeypatch.setattr(driver, "discover", lambda package=None: {n: make(n) for n in "ab"})
    out = tmp_path / "f"
    assert main(["figures", "--out", str(out), "--no-progress"]) == 0
    fail.append("b")
    assert main(["figures", "--out", str(out), "--no-progress"]) == 1
    assert "FAILED  b" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "a.csv", "a.png", "b.csv", "b.png"]


def test_checks_that_did_not_run_are_named_in_the_drawn_line(tmp_path, monkeypatch, capsys):
    """Issue 45 item 2: without PEPit the worst cases are NOT RUN; the command says so."""
    monkeypatch.delenv(verification_summary.ENV_VAR, raising=False)
    given = tmp_path / "v"
    given.mkdir()
    checks = [{"id": f"w{i}", "paper": "pFedMe", "kind": "worst_case", "verdict": "NOT RUN"}
              for i in range(3)] + [{"id": "b", "paper": "pFedMe", "kind": "bound",
                                     "verdict": "HOLDS"}]
    (given / "results.json").write_text(json.dumps({"size": "quick", "checks": checks}))
    code, printed = _figures(["--out", str(tmp_path / "f"), "--from", str(given)], capsys)
    assert code == 0 and "NOT RUN: 3 worst_case (the figures say so" in printed
