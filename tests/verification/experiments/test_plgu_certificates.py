"""Certificates of PLGU nets' gaps (verification/experiments/plgu_certificates.py) on a toy
predictor: the test-set certificate covers the gap measured on samples it never saw."""

from __future__ import annotations

import torch

from verification.experiments import plgu_certificates as PC


def _loss(f, y):
    return torch.clamp(torch.nn.functional.softplus(-y * f), max=1.0)


def _draw(gen, n):
    x = torch.randn(3, n, generator=gen, dtype=torch.float64)
    y = torch.sign(x + 0.5 * torch.randn(3, n, generator=gen, dtype=torch.float64))
    return x, y


def test_test_set_gap_covers_the_gap_on_unseen_samples_and_names_itself():
    gen = torch.Generator().manual_seed(0)
    (x_tr, y_tr), (x_ce, y_ce), (x_ho, y_ho) = (_draw(gen, n) for n in (50, 1000, 20000))
    cert = PC.test_set_gap(_loss, 2 * x_tr, y_tr, 2 * x_ce, y_ce, "toy", 1000, 0.05)
    assert cert["delta"] == 0.05 and "1000 fresh samples per client" in cert["name"]
    assert cert["value"] >= PC.raw_gap(_loss, 2 * x_tr, y_tr, 2 * x_ho, y_ho)
    # the same numbers without the kl inverse's margin are below that gap about half the time;
    # with the margin the certificate sits above the empirical cert-set gap
    assert cert["value"] > PC.raw_gap(_loss, 2 * x_tr, y_tr, 2 * x_ce, y_ce)
