"""A PAC-Bayes-kl risk certificate for personalized nets: Gaussian posterior around the trained
weights, data-dependent prior trained on a split (verification/estimators/certificates.py has
the inequalities and the references).

The clients' predictors share parameters, so the posterior Q = N(w, σ²I) and the prior
P = N(w_prior, σ²I) are taken over *all* parameters (shared and every client's own): client
i's loss depends on some coordinates only, and KL(Q‖P) over the whole vector is ≥ the KL of
the coordinates it uses, so each client's bound stays valid (a little looser).  One bound per
client on its n_i held-back samples (the prior never saw them), a union bound over the N
clients and the σ grid, and the certificate is the mean over clients of the per-client
bounds on L_i(Q).
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch

from verification.estimators.certificates import (Certificate, gaussian_kl_same_sigma,
                                                  pac_bayes_kl)

__all__ = ["SIGMAS", "pac_bayes_certificate"]

#: posterior/prior scales tried (a union bound over them): wide enough to pass from "Q ≈ the
#: trained net" to "Q ≈ the prior"
SIGMAS = (0.003, 0.01, 0.03, 0.1)


def _flat(params: Sequence[torch.Tensor]) -> np.ndarray:
    return np.concatenate([p.detach().double().reshape(-1).numpy() for p in params])


def pac_bayes_certificate(posterior: Sequence[torch.Tensor], prior: Sequence[torch.Tensor],
                          client_risks: Callable[[list[torch.Tensor]], np.ndarray],
                          n_bound: int, *, delta: float, delta_mc: float, n_mc: int,
                          seed: int, sigmas: Sequence[float] = SIGMAS) -> Certificate:
    """Mean over clients of L_i(Q) ≤ pac_bayes_kl(…) (module docstring).  ``client_risks``
    maps a list of weight tensors (shaped like ``posterior``) to each client's mean loss in
    [0, 1] on its ``n_bound`` held-back samples; the best σ of ``sigmas`` is reported, δ and
    δ′ split over clients × σ's."""
    risks0 = np.asarray(client_risks(list(posterior)), dtype=float)
    n_clients = risks0.size
    split = n_clients * len(sigmas)
    gen = torch.Generator().manual_seed(int(seed))
    best: tuple[float, float, float] | None = None
    for sigma in sigmas:
        kl = gaussian_kl_same_sigma(_flat(posterior), _flat(prior), sigma)
        mc = np.zeros(n_clients)
        for _ in range(n_mc):
            draw = [p.detach() + sigma * torch.randn(p.shape, generator=gen, dtype=p.dtype)
                    for p in posterior]
            mc += np.asarray(client_risks(draw), dtype=float) / n_mc
        bounds = [pac_bayes_kl(float(np.clip(r, 0.0, 1.0)), n_mc=n_mc, kl=kl, n=n_bound,
                               delta=delta / split, delta_mc=delta_mc / split) for r in mc]
        value = float(np.mean(bounds))
        if best is None or value < best[0]:
            best = (value, sigma, kl)
    value, sigma, kl = best
    return Certificate(value, f"PAC-Bayes-kl bound on the mean client risk of Q = N(w, σ²I) "
                              f"around the trained weights, σ = {sigma:g} (best of "
                              f"{len(sigmas)}, union bound), prior trained on the other half "
                              f"of each client's data, KL = {kl:.3g}, {n_bound} bound samples "
                              f"per client, {n_mc} draws of Q", delta + delta_mc)
