"""verification.oracles.mutations: each wrapper changes exactly the one thing it names."""

import torch

from verification.oracles.mutations import scaled_lr, summed


def test_summed_turns_the_mean_of_p_uploads_into_their_sum():
    params = {"w": torch.arange(6.0).reshape(3, 2)}
    mean = lambda p: {k: v.mean(0) for k, v in p.items()}              # noqa: E731
    assert torch.equal(summed(mean)(params)["w"], params["w"].sum(0))
    assert summed(mean)({}) == {}                                      # no uploads: no change


def test_scaled_lr_passes_everything_but_the_step_unchanged():
    seen = {}

    def sgd(model, params, x, y, lr, *a, **k):
        seen.update(lr=lr, a=a, k=k)
        return params

    assert scaled_lr(sgd, 2.0)("m", "p", "x", "y", 0.5, 3, batch=4) == "p"
    assert seen == {"lr": 1.0, "a": (3,), "k": {"batch": 4}}
