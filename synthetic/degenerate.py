"""A federation whose labels are (almost) all one class is reported, not used silently.

FedProx's Synthetic(α, β) with a huge α (``--synthetic-alpha 1e20``) draws models whose
weight columns are one float64 value, so every logit ties and the BLAS kernel's rounding
picks the class (99 % class 0 on one CPU, 63 % on an AMD EPYC): the labels say nothing of
the features, and every accuracy is then the share of the winning class — a number that looks like a result and says
nothing about the algorithm.  Decision (issue 23): **warn, do not refuse** — such data are a
legitimate stress input (divergence and extreme-value tests use them) and the run itself is
correct; but the condition is said once, on one line, before any number is reported.

:func:`check_labels` finds the dominant class and its share of the training labels;
:func:`warn_if_degenerate` issues a :class:`DegenerateDataWarning` when that share is at least
:data:`DOMINANT_SHARE` (``pflt`` prints it as ``pflt <command>: warning: …``).
"""

from __future__ import annotations

import warnings

import torch

#: the share of one class at which a federation's labels count as degenerate
DOMINANT_SHARE = 0.99


class DegenerateDataWarning(UserWarning):
    """The federation's labels are (almost) all one class."""


def check_labels(labels: torch.Tensor, num_classes: int) -> tuple[int, float]:
    """``(class, share)`` of the most frequent label among ``labels`` (share 0 when empty)."""
    labels = labels.reshape(-1).long()
    if labels.numel() == 0:
        return 0, 0.0
    counts = torch.bincount(labels.cpu(), minlength=max(int(num_classes), 1))
    top = int(counts.argmax())
    return top, float(counts[top]) / labels.numel()


def warn_if_degenerate(federation, *, hint: str = "") -> str | None:
    """Warn (:class:`DegenerateDataWarning`) when one class holds at least
    :data:`DOMINANT_SHARE` of ``federation``'s training labels; returns the message or
    ``None``."""
    top, share = check_labels(federation.train.y, federation.num_classes)
    if share < DOMINANT_SHARE:
        return None
    message = (f"the data {federation.name} are degenerate: {share:.2%} of the "
               f"{federation.train.y.numel()} training labels are class {top} (one class "
               f">= {DOMINANT_SHARE:.0%}), so an accuracy mostly measures that share"
               + (f" ({hint})" if hint else ""))
    warnings.warn(DegenerateDataWarning(message), stacklevel=2)
    return message
