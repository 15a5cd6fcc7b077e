"""A fully connected network of any depth (batched over clients) for layer-wise algorithms.

PPFE personalizes one more layer per stage (the paper's image model: 2 conv layers + 3 fully
connected layers, §C.4), so its staged behaviour needs more than the two layers of
:class:`algorithms.models.DNN`.  ``MLP(dim, num_classes, hidden=(64, 32, 16))``:
``x → relu(x W1 + b1) → … → W_L h + b_L`` (ReLU between layers, none after the last), with
the same initialisation and batched ``baddbmm`` layers as :mod:`algorithms.models`.
``layers[l] = ["fc{l+1}.weight", "fc{l+1}.bias"]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from algorithms.models import Model, _dense, _uniform
from pfl_theory.validation import nonnegative, positive_int


@dataclass
class MLP(Model):
    dim: int
    num_classes: int
    hidden: tuple[int, ...] = (64, 32, 16)
    l2: float = 0.0

    def __post_init__(self):
        positive_int("dim", self.dim)
        positive_int("num_classes", self.num_classes, minimum=2)
        self.hidden = tuple(positive_int("hidden width", h) for h in self.hidden)
        nonnegative("l2", self.l2)
        self.widths = (self.dim, *self.hidden, self.num_classes)
        self.layers = [[f"fc{l}.weight", f"fc{l}.bias"] for l in range(1, len(self.widths))]

    def init_single(self, gen):
        out = {}
        for l in range(1, len(self.widths)):
            d_in, d_out = self.widths[l - 1], self.widths[l]
            out[f"fc{l}.weight"] = _uniform((d_in, d_out), d_in, gen)
            out[f"fc{l}.bias"] = _uniform((d_out,), d_in, gen)
        return out

    def forward(self, params, x):
        h = x.flatten(2)
        last = len(self.widths) - 1
        for l in range(1, last + 1):
            h = _dense(h, params[f"fc{l}.weight"], params[f"fc{l}.bias"])
            if l < last:
                h = torch.relu(h)
        return h
