from dataclasses import dataclass

import pytest
import torch

from algorithms.engine.base import (hp, hyperparameters, one_of, registry, round_generator,
                             validate_hyperparameters, weighted_mean)
from pfl_theory.validation import positive, positive_int


@dataclass(frozen=True)
class _Toy:
    lr: float = hp(0.1, "step", check=positive)
    steps: int = hp(2, "steps", check=positive_int)
    rule: str = hp("a", "rule", check=one_of("a", "b"))
    free: float = hp(-1.0, "no check")

    def __post_init__(self):
        validate_hyperparameters(self)


@pytest.mark.parametrize("kwargs,match", [(dict(lr=0), "lr"), (dict(steps=0), "steps"),
                                          (dict(steps=1.5), "steps"), (dict(rule="c"), "rule")])
def test_declared_checks_run(kwargs, match):
    with pytest.raises(ValueError, match=match):
        _Toy(**kwargs)
    assert _Toy(free=-5.0).free == -5.0


def _checked_numeric_fields():
    for name, cls in registry().items():
        for f in hyperparameters(cls):
            if f.metadata.get("check") in (positive, positive_int):
                yield name, f.name


@pytest.mark.parametrize("algorithm,field", sorted(_checked_numeric_fields()))
def test_every_checked_field_rejects_non_positive_values(algorithm, field):
    with pytest.raises(ValueError, match=field):
        registry()[algorithm](**{field: 0})


def test_round_generator_streams_are_distinct_and_reproducible():
    a = torch.rand(3, generator=round_generator(1, 2, 0))
    assert torch.equal(a, torch.rand(3, generator=round_generator(1, 2, 0)))
    assert not torch.equal(a, torch.rand(3, generator=round_generator(1, 2, 1)))
    assert not torch.equal(a, torch.rand(3, generator=round_generator(1, 3, 0)))


def test_weighted_mean_by_hand():
    p = {"w": torch.tensor([[1.0, 0.0], [3.0, 4.0]], dtype=torch.float64)}
    out = weighted_mean(p, torch.tensor([1.0, 3.0]))
    torch.testing.assert_close(out["w"], torch.tensor([[2.5, 3.0]], dtype=torch.float64))
