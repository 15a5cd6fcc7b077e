"""verification.selection.k_benchmark: the K-selection benchmark (tiny run + the summary arithmetic)."""

import numpy as np
import pytest

from verification.selection.k_data import SelectionCase
from verification.selection.k_benchmark import run_case, summarise
from verification.selection.k_cases import BenchConfig
from verification.selection.k_selectors import SELECTORS, VARIANTS


def test_run_case_records():
    cfg = BenchConfig(rounds=3, seeds=2, k_cap=3, select_round=2, restarts=3, large_test=200,
                      val_variants=True)
    res = run_case(SelectionCase("label", 8, 2, "equal", "easy"), cfg)
    for scored in (res, res["large"]):  # small scoring at the top level, large under "large"
        acc = np.asarray(scored["accuracy"])
        assert acc.shape == (2, 3) and np.all((acc >= 0) & (acc <= 1))
        assert scored["best_k"] == int(np.argmax(acc.mean(0))) + 1
        names = {r["selector"] for r in scored["records"]}
        assert names == set(SELECTORS)
        for r in scored["records"]:
            assert 1 <= r["k_hat"] <= 3 and r["acc_lost"] >= 0
            assert r["acc_lost"] == pytest.approx(acc.mean(0)[r["best_k"] - 1] - acc.mean(0)[r["k_hat"] - 1])
            assert r["within1"] == (abs(r["k_hat"] - r["best_k"]) <= 1)
            if r["selector"] == "grid_other_seed":  # the other seed's best under this scoring
                assert r["k_hat"] == int(np.argmax(acc[1 - r["seed"]])) + 1
    # the selectors see the same data under both scorings: same K̂ (the reference aside)
    pick = lambda recs: {(r["seed"], r["selector"]): r["k_hat"] for r in recs
                         if r["selector"] != "grid_other_seed"}
    assert pick(res["records"]) == pick(res["large"]["records"])
    # 8 clients × 200 samples against 8 × 10–20: the scorings differ
    assert res["large"]["accuracy"] != res["accuracy"]
    assert set(summarise([res])) == set(summarise([res], scoring="small")) == set(SELECTORS)
    # the cross-validated variants cost 4 folds, val* one: timed on their own folds
    sec = res["seconds"]
    assert sec["val_cv"] == sec["val_cv_smooth"] > sec["val"] == sec["val_smooth"] > 0
    assert sec["val_cv_loss"] == sec["val_cv_loss_1se"] == sec["val_cv"]
    assert sec["val_loss"] == sec["val_loss_1se"] == sec["val"]


def test_parallel_jobs_give_the_serial_results():
    from verification.selection.k_benchmark import run_benchmark

    cfg = BenchConfig(rounds=2, seeds=1, k_cap=2, select_round=1, restarts=2)
    cases = [SelectionCase("label", 6, 2, "equal", "easy"), SelectionCase("feature", 6, 3, "unequal", "hard")]
    def drop_times(results):
        return [{k: v for k, v in r.items() if k != "seconds"} for r in results]

    serial = run_benchmark(cases, cfg)
    assert {r["selector"] for r in serial[0]["records"]} == set(SELECTORS) - set(VARIANTS) - {"grid_other_seed"}  # 1 seed
    assert drop_times(run_benchmark(cases, cfg, jobs=2)) == drop_times(serial)
    with pytest.raises(ValueError, match="jobs"):
        run_benchmark(cases, cfg, jobs=0)


def test_summarise_counts():
    recs = [{"selector": "bic", "k_hat": k, "best_k": 3, "exact": k == 3,
             "within1": abs(k - 3) <= 1, "acc_lost": lost}
            for k, lost in ((3, 0.0), (4, 0.005), (6, 0.02), (1, 0.3))]
    s = summarise([{"records": recs}], scoring="small")["bic"]
    assert summarise([{"large": {"records": recs}}])["bic"] == s
    with pytest.raises(ValueError, match="scoring"):
        summarise([{"records": recs}], scoring="medium")
    assert s["exact"] == 0.25 and s["within1"] == 0.5 and s["lost_le_1pt"] == 0.5
    assert s["mean_lost"] == pytest.approx(0.325 / 4) and s["max_lost"] == 0.3 and s["records"] == 4

