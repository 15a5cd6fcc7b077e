import math

import numpy as np
import torch
from hypothesis import given, strategies as st

from algorithms.evaluation import evaluate, summarize, tail_size
from algorithms.models import MLR
from synthetic.federation import Federation


@given(st.lists(st.floats(0, 1), min_size=1, max_size=80))
def test_low5_le_mean_le_top5(values):
    acc = torch.tensor(values, dtype=torch.float64)
    s = summarize(acc, torch.ones_like(acc))
    assert s["low5"] <= s["mean"] + 1e-12 <= s["top5"] + 2e-12


def test_summaries_hand_sized():
    acc = torch.tensor([0.1, 0.5, 0.9, 1.0] + [0.6] * 16, dtype=torch.float64)   # N = 20 -> tail of ceil(1.0) = 1
    counts = torch.tensor([10, 30, 30, 30] + [0] * 16)
    s = summarize(acc, counts)
    assert tail_size(20) == 1 and tail_size(21) == 2 and tail_size(1) == 1
    assert s["low5"] == 0.1 and s["top5"] == 1.0
    assert math.isclose(s["mean"], (0.1 + 0.5 + 0.9 + 1.0 + 0.6 * 16) / 20)
    assert math.isclose(s["weighted"], (1 + 15 + 27 + 30) / 100)


def test_evaluate_matches_a_per_client_loop():
    rng = np.random.RandomState(0)
    sizes = [7, 40, 3]
    xs = [rng.randn(n, 4) for n in sizes]
    ys = [rng.randint(0, 3, n) for n in sizes]
    fed = Federation.from_client_arrays(xs, ys, num_classes=3, device="cpu", dtype=torch.float64)
    model = MLR(4, 3)
    params = model.init(3, seed=0, dtype=torch.float64, same=False)
    acc, loss = evaluate(model, params, fed.test, chunk=4)
    for i in range(3):
        o, c = int(fed.test.offsets[i]), int(fed.test.counts[i])
        logits = fed.test.x[o:o + c] @ params["fc.weight"][i] + params["fc.bias"][i]
        y = fed.test.y[o:o + c]
        assert math.isclose(float(acc[i]), float((logits.argmax(1) == y).double().mean()))
        ce = torch.nn.functional.cross_entropy(logits, y)
        assert math.isclose(float(loss[i]), float(ce), rel_tol=1e-12)
