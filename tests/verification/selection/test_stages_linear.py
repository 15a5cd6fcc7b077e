"""verification.selection.stages_linear: PPFE stage-count benchmark on the linear generator."""

import numpy as np
import pytest

from synthetic.linear import make_linear_federation
from verification.selection.stage_selectors import REFERENCES
from verification.selection.stages_linear import (STAGE_SELECTORS, best_t_stability, config_halves,
                                           cv_losses, estimate_stage_inputs, full_configs,
                                           run_config, summarise_stages)


def test_run_config_records():
    res = run_config(dict(alpha=0.5, num_clients=8, n_train=30, dim=5), seeds=2, t_max=3)
    risk = np.asarray(res["risk"])
    assert risk.shape == (2, 3) and np.all(risk >= 0.25)  # ≥ Bayes risk σ_ε² = 0.25
    assert res["best_t"] == int(np.argmin(risk.mean(0))) + 1 and res["best_t"] in res["near_best"]
    assert {r["selector"] for r in res["records"]} == set(STAGE_SELECTORS + REFERENCES)
    assert all(r["excess"] >= -1e-12 and 1 <= r["t_hat"] <= 3 for r in res["records"])


def test_estimated_inputs_are_admissible_and_track_heterogeneity():
    lo = estimate_stage_inputs(make_linear_federation(num_clients=10, dim=5, n_train=40,
                                                      alpha=0.0), t_max=3)
    hi = estimate_stage_inputs(make_linear_federation(num_clients=10, dim=5, n_train=40,
                                                      alpha=1.0), t_max=3)
    for e in (lo, hi):
        assert 0.01 <= e["gamma"] <= 0.49 and e["kappa0"] > 0 and e["n"] == 32
        assert np.all(np.diff(e["train_curve"]) <= 1e-9)  # residual fits never raise train MSE
    # with alpha = 1 the personal stages carry the signal: larger train-MSE drop after stage 0
    assert hi["train_curve"][-1] / hi["train_curve"][0] < lo["train_curve"][-1] / lo["train_curve"][0]


def test_cv_losses_hold_every_sample_out_once():
    fed = make_linear_federation(num_clients=4, dim=3, n_train=12, alpha=0.5)
    cv = cv_losses(fed, t_max=2, folds=3)
    assert cv.shape == (2, 4 * 12) and np.all(cv > 0) and np.all(np.isfinite(cv))
    with pytest.raises(ValueError, match="folds"):
        cv_losses(fed, t_max=2, folds=7)


def test_summarise_stages():
    recs = [{"selector": "bound", "t_hat": t, "best_t": 2, "exact": t == 2, "exact_na": t in (2, 3),
             "within1": abs(t - 2) <= 1, "within1_na": t <= 4, "excess": e}
            for t, e in ((2, 0.0), (4, 0.02))]
    s = summarise_stages([{"records": recs}])["bound"]
    assert s["exact"] == 0.5 and s["within1"] == 0.5 and s["lost_le_1pt"] == 0.5
    assert s["exact_na"] == 0.5 and s["within1_na"] == 1.0
    assert s["max_lost"] == pytest.approx(0.02)


def test_full_grid_size():
    assert len(full_configs()) == 30


def test_risk_seeds_define_the_best_t_and_selectors_run_on_the_first_seeds():
    cfg = dict(alpha=0.5, num_clients=8, n_train=30, dim=5)
    few = run_config(cfg, seeds=2, t_max=3)
    many = run_config(cfg, seeds=2, t_max=3, risk_seeds=4)
    risk = np.asarray(many["risk"])
    assert risk.shape == (4, 3) and np.array_equal(risk[:2], np.asarray(few["risk"]))
    assert many["best_t"] == int(np.argmin(risk.mean(0))) + 1       # from all 4 seeds
    assert len(many["records"]) == 2 * len(STAGE_SELECTORS + REFERENCES)
    # the selectors' picks do not depend on how many seeds define the best T
    assert ([(r["selector"], r["t_hat"]) for r in many["records"]]
            == [(r["selector"], r["t_hat"]) for r in few["records"]])
    with pytest.raises(ValueError, match="risk_seeds"):
        run_config(cfg, seeds=3, t_max=3, risk_seeds=2)


def test_cv_repeats_draw_new_folds_and_keep_the_original():
    fed = make_linear_federation(num_clients=4, dim=3, n_train=12, alpha=0.5)
    a, a0 = cv_losses(fed, t_max=2, folds=3), cv_losses(fed, t_max=2, folds=3, repeat=0)
    b = cv_losses(fed, t_max=2, folds=3, repeat=1)
    assert np.array_equal(a, a0) and np.array_equal(b, cv_losses(fed, t_max=2, folds=3, repeat=1))
    assert b.shape == a.shape and np.all(b > 0) and not np.array_equal(a, b)
    with pytest.raises(ValueError, match="repeat"):
        cv_losses(fed, t_max=2, folds=3, repeat=-1)


def test_config_halves_checkerboard():
    dev, held = config_halves()
    assert len(dev) == len(held) == 15
    assert sorted(map(str, dev + held)) == sorted(map(str, full_configs()))
    for half in (dev, held):   # every value of every factor in each half
        assert {c["alpha"] for c in half} == {0.0, 0.3, 0.6, 1.0, "uniform"}
        assert {c["num_clients"] for c in half} == {10, 50, 200}
        assert {(c["n_train"], c["dim"]) for c in half} == {(40, 20), (100, 50)}
    # each (α, N) pair once per half
    assert len({(c["alpha"], c["num_clients"]) for c in dev}) == 15


def test_best_t_stability():
    flat = {"risk": [[2.0, 1.0, 1.01]] * 2 + [[2.0, 1.02, 1.0]] * 4, "best_t": 3, "near_best": [3]}
    sharp = {"risk": [[2.0, 1.0, 1.5]] * 6, "best_t": 2, "near_best": [2]}
    st = best_t_stability([flat, sharp], first=2)
    assert st["equal"] == 0.5 and st["within1"] == 1.0 and st["configs"] == 2
    with pytest.raises(ValueError, match="first"):
        best_t_stability([sharp], first=7)


def test_report_prints_both_halves_from_saved_results(tmp_path, capsys):
    import json
    from verification.selection.stages_linear import main
    dev, held = config_halves()
    # small stand-ins for the real configurations: the records carry the (tiny) config used
    res = [run_config(dict(alpha=0.5, num_clients=6, n_train=24, dim=3), seeds=2, t_max=2,
                      risk_seeds=4) | {"config": c} for c in (dev[0], held[0])]
    path = tmp_path / "res.json"
    path.write_text(json.dumps(res, default=str))
    assert main(["--load", str(path)]) == 0
    out = capsys.readouterr().out
    assert "dev half: 1 configurations" in out and "held-out half: 1 configurations" in out
    assert "best T of the first 3 seeds = best T of all 4" in out
