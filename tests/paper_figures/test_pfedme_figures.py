"""Smoke tests of the pFedMe figure scripts at tiny sizes (files written, sane contents)."""

import csv

from paper_figures import pfedme_rates, pfedme_table1
from verification.experiments import pfedme_table1 as ex

ACCS = {"FedAvg": [0.70, 0.72], "Per-FedAvg": [0.80, 0.82], "pFedMe-GM": [0.75, 0.77],
        "pFedMe-PM": [0.85, 0.87], "pFedMe-local (code's 'PM')": [0.84, 0.86]}


def _result(model, accs):
    return {"rows": {k: {m: list(v) for m in ex.METRICS} for k, v in accs.items()},
            "seeds": [0, 1], "rounds": 7, "model": model, "federation": "fake",
            "seconds": {}}


def test_write_outputs_table_contents(tmp_path):
    bad = {**ACCS, "Per-FedAvg": [0.60, 0.60]}
    paths = pfedme_table1.write_outputs({"mlr": _result("mlr", ACCS), "dnn": _result("dnn", bad)},
                                        tmp_path, note="test note")
    assert {p.name for p in paths} == {"table1.md", "table1.csv", "table1.png"}
    md = (tmp_path / "table1.md").read_text()
    assert "83.20 ± 0.06" in md and "86.36 ± 0.15" in md  # the paper's PM numbers
    assert "86.00 ± 1.00" in md  # ours: mean ± std of (0.85, 0.87) in %
    assert f"{86.0 - 83.20:+.2f}" in md
    assert md.count("Per-FedAvg > FedAvg FAILS") == 2  # dnn: best and final
    assert md.count("Per-FedAvg > FedAvg holds") == 2  # mlr
    rows = list(csv.DictReader((tmp_path / "table1.csv").open()))
    assert len(rows) == 2 * 5 * 2
    assert {r["algorithm"] for r in rows} == set(ACCS)


def test_table1_make_quick_tiny(tmp_path, monkeypatch):
    real = ex.table1
    monkeypatch.setattr(ex, "table1", lambda **kw: real(**{**kw, "rounds": 1}))
    paths = pfedme_table1.make(tmp_path, quick=True, seed=0)
    assert all(p.exists() and p.stat().st_size > 0 for p in paths)
    assert "QUICK" in (tmp_path / "table1.md").read_text()


def test_rates_make_tiny(tmp_path, monkeypatch):
    tiny = {"rounds": 12, "batch_sizes": (1, 2, 4), "floor_seeds": 1, "floor_rounds": 6, "sampled": (10, 20),
            "lams": (10.0, 30.0, 100.0), "ball_seeds": 1, "ball_rounds": 2, "nc_ts": (4, 8, 16),
            "nc_seeds": 2, "nc_lr0": 0.2, "clients": 4}
    monkeypatch.setitem(pfedme_rates.SIZES, "quick", tiny)
    paths = pfedme_rates.make(tmp_path, quick=True, seed=0)
    names = {p.name for p in paths}
    for stem in ("pfedme_rate_strongly_convex", "pfedme_ball_lambda", "pfedme_nonconvex_T"):
        assert {stem + ".png", stem + ".csv"} <= names
    assert all(p.stat().st_size > 0 for p in paths)
    rows = list(csv.DictReader((tmp_path / "pfedme_ball_lambda.csv").open()))
    assert [float(r["lambda"]) for r in rows] == [10.0, 30.0, 100.0]
    assert all(float(r["measured"]) > 0 and float(r["predicted"]) > 0 for r in rows)
    rows = list(csv.DictReader((tmp_path / "pfedme_nonconvex_T.csv").open()))
    assert [int(r["T"]) for r in rows] == [4, 8, 16]


def test_nonconvex_figure_has_the_checks_experiment_and_fit(tmp_path, monkeypatch):
    """pfedme_nonconvex_T.png draws the data and the fit of pfedme.nonconvex_rate_T: the
    same horizons, seeds and step at both sizes, and the same slope on the same data."""
    from verification.checks import pfedme_algorithm  # noqa: F401  (registers the check)
    from verification.core.registry import _REGISTRY, Context
    from verification.estimators import fitting
    from verification.experiments import pfedme_quadratic as ex

    chk = _REGISTRY["pfedme.nonconvex_rate_T"]
    for size, params in (("quick", chk.quick), ("full", chk.full)):
        z = pfedme_rates.SIZES[size]
        assert tuple(z["nc_ts"]) == tuple(params["ts"]) and z["nc_lr0"] == params["lr0"]
        assert tuple(range(z["nc_seeds"])) == tuple(params["seeds"])
    data = ex.nonconvex_rate_runs((4, 8, 16), (0, 1), lr0=0.2, seed=0)
    monkeypatch.setattr(ex, "nonconvex_rate_runs", lambda *a, **k: data)
    slopes = []
    real = fitting.fit_loglog

    def spy(*a, **k):
        fit = real(*a, **k)
        slopes.append(fit.slope)
        return fit

    monkeypatch.setattr(pfedme_rates, "fit_loglog", spy)
    pfedme_rates.nonconvex(tmp_path, {"nc_ts": (4, 8, 16), "nc_seeds": 2, "nc_lr0": 0.2}, 0)
    ctx = Context(size="quick", seed=0, params={"ts": (4, 8, 16), "seeds": (0, 1), "lr0": 0.2},
                  tolerance=None)
    reported = chk.fn(ctx).measured["slope"]
    assert slopes == [reported]
