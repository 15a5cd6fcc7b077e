"""ResNet-18 with GroupNorm, batched over clients (PLGU's CIFAR-10 network; ``--model
resnet18-gn``).

PLGU (Qu et al., *How to Prevent the Poor Performance Clients for Personalized Federated
Learning?*, CVPR 2023, §5 and Table 5 of the supplement) trains "ResNet-18 [He et al. 2016]
… with group batch" on CIFAR-10: batch normalisation replaced by group normalisation
(Y. Wu, K. He, *Group Normalization*, ECCV 2018), as is usual in federated learning since
BatchNorm's running statistics do not average across non-IID clients (Hsieh et al., *The
Non-IID Data Quagmire*, ICML 2020, who also use 2 groups per layer).

The network (K. He, X. Zhang, S. Ren, J. Sun, *Deep Residual Learning*, CVPR 2016, Table 1's
ResNet-18 widths and depths, in the CIFAR adaptation that federated-learning code uses for
32×32 images): a 3×3 stem convolution (stride 1, no max-pool), four stages of two basic blocks with ``w, 2w, 4w, 8w``
channels (``w = width``, 64 in the paper; the first block of stages 2–4 has stride 2 and a
1×1 convolution + GroupNorm shortcut), global average pooling and one dense layer.  Every
convolution is followed by GroupNorm (``groups`` groups, affine, ε = 1e-5) and has no bias.

Batched as :class:`~algorithms.engine.models.CNN`: activations are laid out
``[B, N·C, H, W]``, a convolution is one grouped ``conv2d`` (``groups = N``) and a GroupNorm
over ``N·groups`` groups normalises each client's channel groups on their own (a group
never spans two clients, since each client's ``C`` channels are a multiple of ``groups``).

``layers``: 18 groups, one per weighted layer of the name — the stem, the 16 block
convolutions (each with its GroupNorm; a block's shortcut is grouped with its second
convolution) and the dense layer.  Initialisation as ``torch.nn.Conv2d``/``Linear``
defaults (uniform ±1/√fan_in), GroupNorm weight 1 and bias 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from algorithms.engine.model_base import Model, Params, _dense, _uniform
from pfl_theory.validation import nonnegative, positive_int

#: (stage, block) of ResNet-18: two basic blocks in each of four stages
BLOCKS = tuple((stage, block) for stage in range(1, 5) for block in range(2))
EPS = 1e-5


def parameter_count(in_channels: int, num_classes: int, width: int = 64) -> int:
    """Scalar parameters of one ResNet-18-GN client (without allocating it): convolutions
    ``k²·C_in·C_out``, two GroupNorm affines per convolution, the dense layer."""
    count, c_in = 9 * in_channels * width + 2 * width, width
    for stage, block in BLOCKS:
        c = width * 2 ** (stage - 1)
        count += 9 * c_in * c + 9 * c * c + 4 * c
        if ResNet18GN._has_shortcut(stage, block):
            count += c_in * c + 2 * c
        c_in = c
    return count + c_in * num_classes + num_classes


@dataclass
class ResNet18GN(Model):
    """ResNet-18 with GroupNorm (PLGU's CIFAR-10 network), batched by grouped convolution."""

    in_channels: int
    image_size: int
    num_classes: int
    width: int = 64
    groups: int = 2
    l2: float = 0.0

    def __post_init__(self):
        positive_int("in_channels", self.in_channels)
        positive_int("image_size", self.image_size, minimum=8)
        positive_int("num_classes", self.num_classes, minimum=2)
        positive_int("width", self.width)
        positive_int("groups", self.groups)
        nonnegative("l2", self.l2)
        if self.width % self.groups:
            raise ValueError(f"width {self.width} is not a multiple of groups {self.groups}")
        self.layers = [["conv1.weight", "gn1.weight", "gn1.bias"]]
        for stage, block in BLOCKS:
            p = f"layer{stage}.{block}"
            self.layers.append([f"{p}.conv1.weight", f"{p}.gn1.weight", f"{p}.gn1.bias"])
            second = [f"{p}.conv2.weight", f"{p}.gn2.weight", f"{p}.gn2.bias"]
            if self._has_shortcut(stage, block):
                second += [f"{p}.shortcut.0.weight", f"{p}.shortcut.1.weight",
                           f"{p}.shortcut.1.bias"]
            self.layers.append(second)
        self.layers.append(["fc.weight", "fc.bias"])

    @staticmethod
    def _has_shortcut(stage: int, block: int) -> bool:
        return stage > 1 and block == 0

    def _channels(self, stage: int) -> int:
        return self.width * 2 ** (stage - 1)

    @property
    def feature_dim(self) -> int:
        """``D``: the pooled feature width ``8·width`` (the dense layer's input)."""
        return self._channels(4)

    def init_single(self, gen):
        def conv(c_out, c_in, k):
            return _uniform((c_out, c_in, k, k), c_in * k * k, gen)

        def norm(prefix, c):
            out[f"{prefix}.weight"] = torch.ones(c, dtype=torch.float64)
            out[f"{prefix}.bias"] = torch.zeros(c, dtype=torch.float64)

        out = {"conv1.weight": conv(self.width, self.in_channels, 3)}
        norm("gn1", self.width)
        c_in = self.width
        for stage, block in BLOCKS:
            p, c = f"layer{stage}.{block}", self._channels(stage)
            out[f"{p}.conv1.weight"] = conv(c, c_in, 3)
            norm(f"{p}.gn1", c)
            out[f"{p}.conv2.weight"] = conv(c, c, 3)
            norm(f"{p}.gn2", c)
            if self._has_shortcut(stage, block):
                out[f"{p}.shortcut.0.weight"] = conv(c, c_in, 1)
                norm(f"{p}.shortcut.1", c)
            c_in = c
        d = self.feature_dim
        out["fc.weight"] = _uniform((d, self.num_classes), d, gen)
        out["fc.bias"] = _uniform((self.num_classes,), d, gen)
        return out

    def _conv_norm(self, params: Params, conv: str, norm: str, h: torch.Tensor, n: int,
                   stride: int) -> torch.Tensor:
        """Grouped convolution (client ``i`` its own kernels) then GroupNorm per client."""
        w = params[conv]
        h = F.conv2d(h, w.reshape(-1, *w.shape[2:]), stride=stride,
                     padding=w.shape[-1] // 2, groups=n)
        return F.group_norm(h, n * self.groups, params[f"{norm}.weight"].reshape(-1),
                            params[f"{norm}.bias"].reshape(-1), EPS)

    def features(self, params: Params, x: torch.Tensor) -> torch.Tensor:
        """The pooled features ``[N, B, 8·width]`` (the input of the dense layer)."""
        n, b = x.shape[:2]
        s, c0 = self.image_size, self.in_channels
        h = x.reshape(n, b, c0, s, s).transpose(0, 1).reshape(b, n * c0, s, s)
        h = torch.relu(self._conv_norm(params, "conv1.weight", "gn1", h, n, 1))
        for stage, block in BLOCKS:
            p = f"layer{stage}.{block}"
            stride = 2 if self._has_shortcut(stage, block) else 1
            out = torch.relu(self._conv_norm(params, f"{p}.conv1.weight", f"{p}.gn1", h, n,
                                             stride))
            out = self._conv_norm(params, f"{p}.conv2.weight", f"{p}.gn2", out, n, 1)
            if self._has_shortcut(stage, block):
                h = self._conv_norm(params, f"{p}.shortcut.0.weight", f"{p}.shortcut.1", h, n,
                                    stride)
            h = torch.relu(out + h)
        h = h.mean((2, 3))                                   # global average pooling
        return h.reshape(b, n, self.feature_dim).transpose(0, 1)

    def forward(self, params, x):
        return _dense(self.features(params, x), params["fc.weight"], params["fc.bias"])
