"""ResNet-18 with GroupNorm (algorithms/engine/models_resnet.py): batched over clients, equal
to an ordinary torch.nn ResNet-18-GN run one client at a time (logits, loss, gradients);
18 layers; each client's GroupNorm statistics its own."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from algorithms.engine.models import build_model
from algorithms.engine.models_resnet import ResNet18GN, parameter_count
from algorithms.testing import module_difference


class BasicBlock(nn.Module):
    def __init__(self, c_in, c, stride, groups):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c, 3, stride, 1, bias=False)
        self.gn1 = nn.GroupNorm(groups, c)
        self.conv2 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
        self.gn2 = nn.GroupNorm(groups, c)
        self.shortcut = nn.Sequential()
        if stride != 1 or c_in != c:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c, 1, stride, bias=False),
                                          nn.GroupNorm(groups, c))

    def forward(self, x):
        out = torch.relu(self.gn1(self.conv1(x)))
        return torch.relu(self.gn2(self.conv2(out)) + self.shortcut(x))


class ResNet18(nn.Module):
    """The CIFAR ResNet-18 (3×3 stem, no max-pool) with GroupNorm, one client, torch.nn."""

    def __init__(self, in_channels, num_classes, width, groups, blocks=2):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, width, 3, 1, 1, bias=False)
        self.gn1 = nn.GroupNorm(groups, width)
        c_in = width
        for stage in range(1, 5):
            c = width * 2 ** (stage - 1)
            layer = [BasicBlock(c_in, c, 1 if stage == 1 else 2, groups)]
            layer += [BasicBlock(c, c, 1, groups) for _ in range(blocks - 1)]
            setattr(self, f"layer{stage}", nn.Sequential(*layer))
            c_in = c
        self.fc = nn.Linear(c_in, num_classes)

    def forward(self, x):
        h = torch.relu(self.gn1(self.conv1(x)))
        for stage in range(1, 5):
            h = getattr(self, f"layer{stage}")(h)
        return self.fc(h.mean((2, 3)))


def _data(n, b, shape, classes, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(n, b, *shape, generator=gen, dtype=torch.float64),
            torch.randint(0, classes, (n, b), generator=gen))


def _perturbed(model, n):
    """Independent clients with GroupNorm affines away from (1, 0), so a swapped or missing
    normalisation shows."""
    params = model.init(n, seed=3, dtype=torch.float64, same=False)
    gen = torch.Generator().manual_seed(5)
    for k in params:
        if ".gn" in k or k.startswith("gn") or "shortcut.1" in k:
            params[k] = params[k] + 0.3 * torch.randn(params[k].shape, generator=gen,
                                                      dtype=torch.float64)
    return params


@pytest.mark.parametrize("groups,width,side", [(2, 4, 16), (4, 8, 12)])
def test_equals_a_per_client_module_loop(groups, width, side):
    model = ResNet18GN(3, side, 10, width=width, groups=groups)
    params = _perturbed(model, 3)
    x, y = _data(3, 2, (3, side, side), 10)
    # float64; grouped vs per-client convolutions sum in other orders, 18 layers deep:
    # measured ≤ 1e-14; 1e-10 is the bound
    assert module_difference(model, params, x, y,
                             lambda: ResNet18(3, 10, width, groups)) <= 1e-10


def test_a_missing_block_or_swapped_blocks_are_seen():
    """The comparison can fail: a reference with one block per stage (blocks dropped), or
    with the two blocks of stage 1 swapped, is far from the batched network."""
    model = ResNet18GN(1, 12, 4, width=4)
    params = _perturbed(model, 2)
    x, y = _data(2, 2, (1, 12, 12), 4)
    class OneBlock(ResNet18):
        def forward(self, x):
            h = torch.relu(self.gn1(self.conv1(x)))
            for stage in range(1, 5):
                h = getattr(self, f"layer{stage}")[0](h)
            return self.fc(h.mean((2, 3)))

    class Swapped(ResNet18):
        def forward(self, x):
            h = torch.relu(self.gn1(self.conv1(x)))
            h = self.layer1[0](self.layer1[1](h))
            for stage in range(2, 5):
                h = getattr(self, f"layer{stage}")(h)
            return self.fc(h.mean((2, 3)))

    make = lambda: ResNet18(1, 4, 4, 2)  # noqa: E731
    assert module_difference(model, params, x, y, make) <= 1e-10
    assert module_difference(model, params, x, y, lambda: Swapped(1, 4, 4, 2)) > 1e-4
    assert module_difference(model, params, x, y, lambda: OneBlock(1, 4, 4, 2)) > 1e-4


def test_layers_and_sizes():
    model = ResNet18GN(3, 32, 10)
    assert len(model.layers) == 18      # 17 convolutions + 1 dense (shortcuts in their block)
    assert model.layers[-1] == ["fc.weight", "fc.bias"]
    params = model.init(1, seed=0)
    assert sorted(params) == sorted(k for layer in model.layers for k in layer)
    # ResNet-18 (CIFAR stem, 10 classes): 11,173,962 parameters with BatchNorm; GroupNorm
    # has the same affine parameters and no running statistics
    assert sum(v[0].numel() for v in params.values()) == 11_173_962
    assert parameter_count(3, 10) == 11_173_962
    small = ResNet18GN(1, 16, 7, width=6)
    assert parameter_count(1, 7, 6) == sum(v[0].numel() for v in small.init(1).values())
    assert model.feature_dim == 512


def test_group_norm_statistics_are_per_client():
    """Client 0's logits do not depend on client 1's inputs (a GroupNorm group spanning two
    clients would mix them)."""
    model = ResNet18GN(1, 8, 3, width=4)
    params = model.init(2, seed=0, dtype=torch.float64)
    x, _ = _data(2, 2, (1, 8, 8), 3)
    x2 = x.clone()
    x2[1] = 10 * x2[1] + 3
    assert torch.equal(model.forward(params, x)[0], model.forward(params, x2)[0])


def test_build_and_bad_input():
    class Images:
        feature_shape, num_classes = (3, 32, 32), 10
    model = build_model("resnet18-gn", Images(), hidden=8)
    assert isinstance(model, ResNet18GN) and model.width == 8
    with pytest.raises(ValueError, match="multiple of groups"):
        ResNet18GN(3, 32, 10, width=5, groups=2)
    with pytest.raises(ValueError, match="one base width"):
        build_model("resnet18-gn", Images(), hidden=(8, 8))

    class Flat:
        feature_shape, num_classes = (784,), 10
    with pytest.raises(ValueError, match="square image"):
        build_model("resnet18-gn", Flat())
