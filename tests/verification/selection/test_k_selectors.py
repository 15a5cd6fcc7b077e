"""verification.selection.k_selectors: each selector's K̂ for one (case, seed) and its seconds,
on a tiny planted federation (8 clients, K ≤ 3)."""

import dataclasses

import numpy as np
import pytest

from algorithms.engine.base import flatten, get_algorithm
from algorithms.engine.models import build_model
from verification.experiments.cgpfl import CGPFL_HP
from verification.selection.k_data import SelectionCase, make_case_federation
from verification.selection.k_cases import TRAIN_RESTARTS, BenchConfig
from verification.selection.k_selectors import (SELECTORS, VARIANTS, model_selections,
                                                validation_selections)

MODEL_ONLY = ("e_relative", "e_lambda", "bic", "peer", "peer_1se")
REFERENCES = ("grid_other_seed", "planted_k0")  # set by selection_k.run_case
K_HI = 3


@pytest.fixture(scope="module")
def tiny():
    fed, _ = make_case_federation(SelectionCase("label", 8, 2, "equal", "easy"))
    return fed, build_model("mlr", fed)


def test_model_selections_on_the_k1_models(tiny):
    fed, model = tiny
    alg = get_algorithm("cgpfl")(num_contexts=1, **{**CGPFL_HP, "kmeans_restarts": TRAIN_RESTARTS})
    state = alg.init(fed, model, 0)
    for _ in range(2):
        state = alg.round(state, fed, model)
    theta = flatten(state.models["personalized"]).detach().cpu().double().numpy()
    like = {n: v[:1] for n, v in state.models["personalized"].items()}
    cfg = BenchConfig(restarts=3)
    seconds = {}
    pick = model_selections(theta, like, fed, model, cfg, 0, K_HI, seconds)
    assert set(pick) == set(seconds) == set(MODEL_ONLY)
    assert all(1 <= k <= K_HI for k in pick.values())
    assert pick["peer_1se"] <= pick["peer"]  # the smallest K within one SE of the maximum
    assert seconds["peer"] == seconds["peer_1se"] > seconds["bic"] == seconds["e_relative"] > 0
    # seeded: the same picks again; the seconds accumulate (run_case sums them over seeds)
    twice = dict(seconds)
    assert model_selections(theta, like, fed, model, cfg, 0, K_HI, twice) == pick
    assert all(twice[k] > seconds[k] for k in seconds)


def test_validation_selections_names_and_first_fold_timing(tiny):
    fed, model = tiny
    cfg = BenchConfig(restarts=2, val_warmup=1, val_rounds=1, val_variants=True)
    seconds = {}
    pick = validation_selections(fed, model, cfg, 0, K_HI, seconds)
    assert set(pick) == set(seconds) == set(SELECTORS) - set(MODEL_ONLY) - set(REFERENCES)
    assert all(1 <= k <= K_HI for k in pick.values())
    # the cross-validated variants cost all folds, val* their first fold only
    assert seconds["val_cv"] == seconds["val_cv_loss"] > seconds["val"] == seconds["val_loss"] > 0
    plain = {}
    one = validation_selections(fed, model, dataclasses.replace(cfg, val_variants=False), 0, K_HI,
                                plain)
    assert set(one) == set(pick) - set(VARIANTS)
    # val* are read off the first fold of the cross-validated run: the same K̂ as a 1-fold run
    assert {k: pick[k] for k in one} == one
    assert np.isfinite(list(plain.values())).all()
