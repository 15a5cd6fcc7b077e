import pytest
import torch

from algorithms.engine.models import CNN, DNN, MLR, QuadraticMean, build_model

torch.manual_seed(0)


def _fd_check(model, n=2, b=3, shape=(4,), classes=3, eps=1e-6):
    params = model.init(n, seed=1, dtype=torch.float64, same=False)
    x = torch.randn(n, b, *shape, dtype=torch.float64)
    y = torch.randint(0, classes, (n, b))
    grads, _ = model.grad(params, x, y)
    for k, v in params.items():
        flat = v.reshape(n, -1)
        for j in range(0, flat.shape[1], max(1, flat.shape[1] // 5)):
            plus = {kk: vv.clone() for kk, vv in params.items()}
            minus = {kk: vv.clone() for kk, vv in params.items()}
            plus[k].view(n, -1)[:, j] += eps
            minus[k].view(n, -1)[:, j] -= eps
            fd = (model.per_client_loss(plus, x, y) - model.per_client_loss(minus, x, y)) / (2 * eps)
            # central differences in float64: truncation O(eps^2), round-off ~1e-16/eps
            torch.testing.assert_close(grads[k].reshape(n, -1)[:, j], fd, atol=1e-7, rtol=1e-6)


def test_mlr_gradient_matches_finite_differences():
    _fd_check(MLR(4, 3, l2=0.1))


def test_dnn_gradient_matches_finite_differences():
    _fd_check(DNN(4, 3, hidden=5))


def test_cnn_gradient_matches_finite_differences():
    _fd_check(CNN(2, 16, 3, channels=(2, 3), hidden=4), shape=(2, 16, 16))


@pytest.mark.parametrize("model,shape", [(MLR(6, 4), (6,)), (DNN(6, 4, hidden=7), (6,)),
                                         (CNN(1, 16, 4, channels=(2, 3), hidden=5), (1, 16, 16))])
def test_batched_forward_equals_per_client_forward(model, shape):
    params = model.init(3, seed=2, dtype=torch.float64, same=False)
    x = torch.randn(3, 5, *shape, dtype=torch.float64)
    out = model.forward(params, x)
    for i in range(3):
        single = model.forward({k: v[i:i + 1] for k, v in params.items()}, x[i:i + 1])
        torch.testing.assert_close(out[i:i + 1], single, rtol=0, atol=1e-12)


def test_mlr_forward_is_affine_softmax_logits():
    model = MLR(3, 2)
    params = model.init(1, seed=0, dtype=torch.float64)
    x = torch.randn(1, 4, 3, dtype=torch.float64)
    expected = x[0] @ params["fc.weight"][0] + params["fc.bias"][0]
    torch.testing.assert_close(model.forward(params, x)[0], expected)


def test_init_same_and_independent():
    model = DNN(4, 3, hidden=5)
    same = model.init(3, seed=0)
    diff = model.init(3, seed=0, same=False)
    assert torch.equal(same["fc1.weight"][0], same["fc1.weight"][2])
    assert not torch.equal(diff["fc1.weight"][0], diff["fc1.weight"][2])
    assert torch.equal(model.init(1, seed=5)["fc2.bias"], model.init(1, seed=5)["fc2.bias"])


def test_quadratic_mean_gradient_is_theta_minus_batch_mean():
    model = QuadraticMean(3)
    params = {"theta": torch.randn(2, 3, dtype=torch.float64)}
    x = torch.randn(2, 5, 3, dtype=torch.float64)
    g, _ = model.grad(params, x, torch.zeros(2, 5, dtype=torch.long))
    torch.testing.assert_close(g["theta"], params["theta"] - x.mean(1))


def test_build_model_errors():
    class Fake:
        feature_shape = (3, 8, 9)
        num_classes = 2
    with pytest.raises(ValueError):
        build_model("cnn", Fake())
    with pytest.raises(ValueError):
        build_model("transformer", Fake())
    with pytest.raises(ValueError):
        MLR(0, 3)


@pytest.mark.parametrize("l2", [0.0, 0.3])
def test_mlr_hand_written_gradient_equals_autograd(l2):
    model = MLR(7, 5, l2=l2)
    params = model.init(4, seed=3, dtype=torch.float64, same=False)
    x = torch.randn(4, 6, 7, dtype=torch.float64)
    y = torch.randint(0, 5, (4, 6))
    g_hand, loss_hand = model.grad(params, x, y)
    g_auto, loss_auto = model.autograd_grad(params, x, y)
    for k in g_auto:  # float64; the two differ only in summation order
        torch.testing.assert_close(g_hand[k], g_auto[k], rtol=0, atol=1e-14)
    torch.testing.assert_close(loss_hand, loss_auto, rtol=0, atol=1e-14)


# ---- the papers' networks against per-client torch.nn.Module loops ----------------------

from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from algorithms.testing import module_difference  # noqa: E402


class _ConvNet(nn.Module):
    """2 × (conv 5×5 → ReLU → max-pool 2), flatten, then Linear layers of ``widths`` with
    ReLU between them — one client, written with torch.nn independently of the engine."""

    def __init__(self, in_channels, channels, widths):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, channels[0], 5)
        self.conv2 = nn.Conv2d(channels[0], channels[1], 5)
        for l in range(1, len(widths)):
            setattr(self, f"fc{l}", nn.Linear(widths[l - 1], widths[l]))
        self.depth = len(widths) - 1

    def forward(self, x):
        h = F.max_pool2d(torch.relu(self.conv1(x)), 2)
        h = F.max_pool2d(torch.relu(self.conv2(h)), 2).flatten(1)
        for l in range(1, self.depth + 1):
            h = getattr(self, f"fc{l}")(h)
            if l < self.depth:
                h = torch.relu(h)
        return h


class _Images:
    def __init__(self, shape, classes):
        self.feature_shape, self.num_classes = shape, classes


def _data(n, b, shape, classes, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(n, b, *shape, generator=gen, dtype=torch.float64),
            torch.randint(0, classes, (n, b), generator=gen))


# float64: the batched kernels (grouped conv, baddbmm) and the per-client ones sum in
# other orders; measured ≤ 1e-15 on these sizes, 1e-10 is the bound
TOL = 1e-10

PAPER_MODELS = {
    # CGPFL's DNN: one hidden layer of 128 (CGPFL §5.1) on Fashion-MNIST-shaped input
    "dnn-128": (lambda: build_model("dnn", _Images((1, 28, 28), 10), hidden=128), (1, 28, 28),
                lambda: nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(),
                                      nn.Linear(128, 10))),
    # CGPFL's CNN: 2 conv + 2 dense on CIFAR-10's shape
    "cnn": (lambda: build_model("cnn", _Images((3, 32, 32), 10)), (3, 32, 32),
            lambda: _ConvNet(3, (6, 16), (400, 64, 10))),
    # PPFE's CNN: 2 conv + 3 dense on CIFAR-10's shape
    "cnn3": (lambda: build_model("cnn3", _Images((3, 32, 32), 10)), (3, 32, 32),
             lambda: _ConvNet(3, (6, 16), (400, 120, 84, 10))),
}


def _named_module(make):
    """``nn.Sequential`` names its layers 0, 1, …: rename to the engine's fc1, fc2."""
    class Named(nn.Module):
        def __init__(self):
            super().__init__()
            seq = make()
            dense = [m for m in seq if isinstance(m, nn.Linear)]
            for l, m in enumerate(dense, 1):
                setattr(self, f"fc{l}", m)
            self.seq = seq

        def forward(self, x):
            return self.seq(x)
    return Named


@pytest.mark.parametrize("name", sorted(PAPER_MODELS))
def test_paper_model_equals_a_per_client_module_loop(name):
    make_model, shape, make_module = PAPER_MODELS[name]
    model = make_model()
    if name == "dnn-128":
        make_module = _named_module(make_module)
    params = model.init(3, seed=1, dtype=torch.float64, same=False)
    x, y = _data(3, 4, shape, 10)
    assert module_difference(model, params, x, y, make_module) <= TOL


def test_the_per_client_comparison_sees_a_missing_activation():
    """The comparison can fail: a reference without the ReLU after fc1 (one layer of the
    forward dropped) is far from the batched CNN."""
    model = build_model("cnn3", _Images((3, 32, 32), 10))
    params = model.init(2, seed=1, dtype=torch.float64, same=False)
    x, y = _data(2, 4, (3, 32, 32), 10)

    class NoReLU(_ConvNet):
        def forward(self, x):
            h = F.max_pool2d(torch.relu(self.conv1(x)), 2)
            h = F.max_pool2d(torch.relu(self.conv2(h)), 2).flatten(1)
            return self.fc3(torch.relu(self.fc2(self.fc1(h))))

    assert module_difference(model, params, x, y,
                             lambda: NoReLU(3, (6, 16), (400, 120, 84, 10))) > 1e-4
