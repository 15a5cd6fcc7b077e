"""Batched models: the client is the leading dimension of every parameter.

A model's parameters are a dict ``{name: Tensor[N, ...]}``; ``forward(params, x)`` maps
inputs ``x[N, B, ...]`` to logits ``[N, B, C]`` with one set of tensor ops for all N
clients (``baddbmm`` for dense layers, grouped convolution for the CNN).  The same code
serves ``N = 1``.  ``layers`` lists the parameter names of each layer in forward order
(used by layer-wise algorithms: PPFE stages, FedRep heads, PLGU scores).

* ``MLR`` — multinomial logistic regression (pFedMe §5, CGPFL §5), optional ℓ2 term
  ``l2/2 ‖W‖²`` added to the loss (biases not regularised).
* ``DNN`` — one hidden layer with ReLU (pFedMe: 20 hidden units on Synthetic, 100 on MNIST;
  CGPFL: 128); ``MLP`` — the same at any depth (PPFE's progressive stages).
* ``CNN`` — 2 conv (5×5, ReLU, 2×2 max-pool) + 2 fully connected layers (CGPFL on CIFAR,
  ``cnn``) or 3 (PPFE, ``cnn3``: its progressive heads span the dense layers).
* ``ResNet18GN`` — ResNet-18 with GroupNorm (PLGU; ``resnet18-gn``), in
  :mod:`algorithms.engine.models_resnet`.
* ``BatchNormMLP`` — an MLP with BatchNorm after every hidden layer, each client its own
  batch and running statistics (FedBN; ``mlp-bn``; training steps in
  :mod:`algorithms.engine.models_norm`).

Initialisation follows ``torch.nn.Linear``/``Conv2d`` defaults (uniform ±1/√fan_in),
drawn from an explicit CPU generator, so the same seed gives the same model on any device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

# the interface and the dense/initialisation helpers live in model_base (imported by
# models_resnet too, which build_model imports: no cycle); re-exported here
from algorithms.engine.model_base import Model, _dense, _uniform  # noqa: F401
from pfl_theory.validation import nonnegative, positive_int

Params = dict[str, torch.Tensor]


@dataclass
class MLR(Model):
    """Multinomial logistic regression ``softmax(x W + b)``."""

    dim: int
    num_classes: int
    l2: float = 0.0

    def __post_init__(self):
        positive_int("dim", self.dim)
        positive_int("num_classes", self.num_classes, minimum=2)
        nonnegative("l2", self.l2)
        self.layers = [["fc.weight", "fc.bias"]]

    def init_single(self, gen):
        return {"fc.weight": _uniform((self.dim, self.num_classes), self.dim, gen),
                "fc.bias": _uniform((self.num_classes,), self.dim, gen)}

    def forward(self, params, x):
        return _dense(x.flatten(2), params["fc.weight"], params["fc.bias"])

    def grad(self, params, x, y):
        """Hand-written batched gradient of the mean cross-entropy (+ ℓ2):
        ``∇_W = xᵀ(softmax(xW + b) − onehot(y)) / B + l2·W``, ``∇_b = Σ_B (…) / B`` —
        two ``bmm`` per step instead of autograd's three plus bookkeeping, the second one laid
        out as ``(gᵀx)ᵀ`` (tiny per-client matrices: ~3× faster on CPU than ``xᵀg``); checked
        against autograd and finite differences in the tests.

        Class-major throughout: logits ``zᵀ = wᵀxᵀ + b`` are ``[N, C, B]`` and the softmax
        runs over dim 1 with the batch contiguous — ~10× faster on CPU than a softmax over
        a last axis of length C (half the step's time before)."""
        w, b = params["fc.weight"], params["fc.bias"]
        x = x.flatten(2)
        z = torch.baddbmm(b.unsqueeze(2), w.transpose(1, 2), x.transpose(1, 2))  # [N, C, B]
        logp = torch.log_softmax(z, 1)
        yc = y.unsqueeze(1)
        loss = -logp.gather(1, yc).squeeze(1).mean(1)
        g = logp.exp_()
        g.scatter_add_(1, yc, torch.full_like(g[:, :1], -1.0))
        g.div_(x.shape[1])
        gw = torch.bmm(g, x).transpose(1, 2)  # (gᵀx)ᵀ: ~3× faster than xᵀg
        if self.l2 > 0:
            gw = gw + self.l2 * w
            loss = loss + 0.5 * self.l2 * (w ** 2).flatten(1).sum(1)
        return {"fc.weight": gw, "fc.bias": g.sum(2)}, loss


@dataclass
class MLP(Model):
    """Fully connected ReLU network of any depth:
    ``x → relu(x W1 + b1) → … → h W_L + b_L`` (no activation after the last layer);
    ``layers[l] = ["fc{l+1}.weight", "fc{l+1}.bias"]``.  PPFE personalizes one more layer
    per stage, so its staged behaviour needs depth (``hidden=(64, 32, 16)``)."""

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


def DNN(dim: int, num_classes: int, hidden: int = 20, l2: float = 0.0) -> MLP:
    """The papers' "DNN": one hidden ReLU layer (pFedMe: 20 units on Synthetic, 100 on
    MNIST; CGPFL: 128) — an :class:`MLP` with ``hidden=(hidden,)``."""
    return MLP(dim, num_classes, hidden=(hidden,), l2=l2)


@dataclass
class CNN(Model):
    """2 conv (5×5, ReLU, max-pool 2) + fully connected layers, batched by grouped convolution.

    ``x → pool(relu(conv1 x)) → pool(relu(conv2 ·)) → flatten → relu(fc1) → … → fc_last``:
    one hidden dense width (``hidden=64``) is CGPFL's "two convolutional layers and two fully
    connected layers" (CGPFL §5.1, CIFAR-10; ``--model cnn``); two, ``hidden=(120, 84)``, is
    PPFE's "two convolutional layers … followed by max-pooling and three fully connected
    layers" (PPFE §6, App. A.1; ``--model cnn3``).  Channel widths: PPFE's are "dataset
    dependent", CGPFL gives none — ``(6, 16)``, LeNet-5's (the CIFAR network of pFedMe's
    public code), is our default.  ``head_span`` (``None``: every layer) is the most trailing
    layers a layer-wise method may personalize: PPFE's heads span the dense layers only, the
    convolutions stay the shared feature extractor (PPFE App. A.1)."""

    in_channels: int
    image_size: int
    num_classes: int
    channels: tuple[int, int] = (6, 16)
    hidden: int | tuple[int, ...] = 64
    l2: float = 0.0
    head_span: int | None = None

    def __post_init__(self):
        positive_int("in_channels", self.in_channels)
        positive_int("num_classes", self.num_classes, minimum=2)
        self.channels = tuple(positive_int("channels", c) for c in self.channels)
        if len(self.channels) != 2:
            raise ValueError(f"the CNN has two convolutions, got channels {self.channels}")
        hidden = (self.hidden,) if isinstance(self.hidden, int) else tuple(self.hidden)
        self.dense = tuple(positive_int("hidden width", h) for h in hidden)
        nonnegative("l2", self.l2)
        side = (positive_int("image_size", self.image_size, minimum=12) - 4) // 2
        side = (side - 4) // 2
        if side < 1:
            raise ValueError(f"image_size {self.image_size} too small for two 5x5 conv+pool")
        self.flat = self.channels[1] * side * side
        self.widths = (self.flat, *self.dense, self.num_classes)
        self.layers = [["conv1.weight", "conv1.bias"], ["conv2.weight", "conv2.bias"]] + \
            [[f"fc{l}.weight", f"fc{l}.bias"] for l in range(1, len(self.widths))]
        if self.head_span is not None:
            positive_int("head_span", self.head_span)
            if self.head_span > len(self.layers):
                raise ValueError(f"head_span {self.head_span} exceeds the CNN's "
                                 f"{len(self.layers)} layers")

    @property
    def feature_dim(self) -> int:
        """``D``: the input width of the last dense layer."""
        return self.widths[-2]

    def init_single(self, gen):
        c0, (c1, c2) = self.in_channels, self.channels
        out = {"conv1.weight": _uniform((c1, c0, 5, 5), c0 * 25, gen),
               "conv1.bias": _uniform((c1,), c0 * 25, gen),
               "conv2.weight": _uniform((c2, c1, 5, 5), c1 * 25, gen),
               "conv2.bias": _uniform((c2,), c1 * 25, gen)}
        for l in range(1, len(self.widths)):
            d_in, d_out = self.widths[l - 1], self.widths[l]
            out[f"fc{l}.weight"] = _uniform((d_in, d_out), d_in, gen)
            out[f"fc{l}.bias"] = _uniform((d_out,), d_in, gen)
        return out

    @staticmethod
    def _grouped_conv(h: torch.Tensor, w: torch.Tensor, b: torch.Tensor, n: int) -> torch.Tensor:
        # h: [B, N*Cin, H, W]; w: [N, Cout, Cin, k, k] -> [B, N*Cout, H', W']
        from algorithms.engine.cnn_grad import pool2

        out = F.conv2d(h, w.reshape(-1, *w.shape[2:]), b.reshape(-1), groups=n)
        return pool2(out).clamp_min_(0)   # = max-pool ∘ ReLU (ReLU is monotone)

    def features(self, params: Params, x: torch.Tensor) -> torch.Tensor:
        """The input of the last dense layer, ``[N, B, D]`` (the head is not read).  The
        first convolution is one batched product over the unfolded input
        (:func:`algorithms.engine.cnn_grad.conv1_pool`), the second a grouped convolution."""
        from algorithms.engine.cnn_grad import conv1_pool, to_batch_major, workspace

        n, b = x.shape[:2]
        # without autograd (evaluation) the first convolution's large tensors go into this
        # thread's scratch, kept from one group of rows to the next: a plain convolution
        # of a shared model on a group of 668 rows allocated (and page-faulted in) 49 MB
        # per group, 0.9 M minor faults per W2 evaluation against 45 k
        ws = None if torch.is_grad_enabled() else workspace()
        h = to_batch_major(conv1_pool(self, params, x, ws, prefix="eval_")[0], n)
        h = self._grouped_conv(h, params["conv2.weight"], params["conv2.bias"], n)
        h = h.reshape(b, n, self.flat).transpose(0, 1)
        for l in range(1, len(self.widths) - 1):
            h = torch.relu(_dense(h, params[f"fc{l}.weight"], params[f"fc{l}.bias"]))
        return h

    def forward(self, params, x):
        last = len(self.widths) - 1
        return _dense(self.features(params, x), params[f"fc{last}.weight"],
                      params[f"fc{last}.bias"])

    #: :meth:`grad` writes dense-weight gradients into ``out`` (:func:`algorithms.engine.steps.model_grad`)
    reuses_out = True

    def grad(self, params, x, y, out=None):
        """Hand-written batched gradient (:func:`algorithms.engine.cnn_grad.cnn_grad`: the
        large scratch tensors kept across steps, dense-weight gradients written into
        ``out``, the previous step's gradient, when given)."""
        from algorithms.engine.cnn_grad import cnn_grad

        return cnn_grad(self, params, x, y, out)


@dataclass
class QuadraticMean(Model):
    """Client objective ``f_i(θ) = E_{x∼D_i} ½‖θ − x‖²`` (a strongly convex quadratic with
    ``μ = L = 1`` whose minimiser is the client's data mean).  Used by theory checks and
    tests (exact prox: ``θ̂ = (x̄_i + λw)/(1 + λ)``); it has no classes, so it is not
    evaluated for accuracy.  Parameters ``{"theta": [N, dim]}``."""

    dim: int

    def __post_init__(self):
        positive_int("dim", self.dim)
        self.layers = [["theta"]]

    def init_single(self, gen):
        return {"theta": torch.zeros(self.dim, dtype=torch.float64)}

    def forward(self, params, x):
        return -((params["theta"][:, None, :] - x.flatten(2)) ** 2).sum(-1, keepdim=True)

    def per_client_loss(self, params, x, y):
        return 0.5 * ((params["theta"][:, None, :] - x.flatten(2)) ** 2).sum(-1).mean(1)


# ---- batch normalisation (FedBN; per-client statistics) ---------------------------------

BUFFER_SUFFIXES = (".running_mean", ".running_var")


@dataclass
class BatchNormMLP(Model):
    """MLP with BatchNorm after every hidden dense layer (FedBN's layout), batched.

    A batched network with batch normalisation: every client its own BatchNorm statistics.

    :class:`BatchNormMLP` is :class:`~algorithms.engine.models.MLP` with a BatchNorm layer (S. Ioffe,
    C. Szegedy, *Batch Normalization*, ICML 2015, Algorithm 1) after every hidden dense layer,
    ``x → relu(BN(x W1 + b1)) → … → h W_L + b_L`` — the layout of FedBN's experiments (X. Li,
    M. Jiang, X. Zhang, M. Kamp, Q. Dou, *FedBN*, ICLR 2021: a BN layer after every hidden
    layer).  The client is the leading dimension of every parameter, so the batch statistics of
    a training step are each client's own (mean and variance over its mini-batch, dim 1).

    Parameters per BN layer ``l``: the affine ``bn{l}.weight`` (γ, init 1), ``bn{l}.bias`` (β,
    init 0) and the *buffers* ``bn{l}.running_mean`` (init 0), ``bn{l}.running_var`` (init 1),
    which are not trained: :meth:`BatchNormMLP.grad` returns zeros for them.  A training step
    (:func:`algorithms.engine.steps.local_sgd` on a model with ``buffers``) uses the batch statistics
    and moves the buffers as ``torch.nn.BatchNorm1d`` does (momentum m = 0.1):
    ``running ← (1 − m) running + m · batch``, with the unbiased batch variance
    (``B/(B − 1)``); :meth:`forward` (evaluation) normalises with the buffers.  A layer group of
    :attr:`layers` is the dense layer together with the BN layer after it, so ``head_layers``
    counts dense layers as for :class:`~algorithms.engine.models.MLP`.

    :attr:`norm_keys` names every BN entry (affine and buffers): what FedBN keeps local.
    """

    dim: int
    num_classes: int
    hidden: tuple[int, ...] = (32,)
    momentum: float = 0.1
    eps: float = 1e-5

    def __post_init__(self):
        positive_int("dim", self.dim)
        positive_int("num_classes", self.num_classes, minimum=2)
        self.hidden = tuple(positive_int("hidden width", h) for h in self.hidden)
        if not 0 < self.momentum <= 1:
            raise ValueError(f"momentum must be in (0, 1], got {self.momentum}")
        self.widths = (self.dim, *self.hidden, self.num_classes)
        last = len(self.widths) - 1
        self.layers = [[f"fc{l}.weight", f"fc{l}.bias"]
                       + ([f"bn{l}.weight", f"bn{l}.bias", f"bn{l}.running_mean",
                           f"bn{l}.running_var"] if l < last else [])
                       for l in range(1, last + 1)]
        self.norm_keys = tuple(k for layer in self.layers for k in layer if k.startswith("bn"))
        self.buffers = tuple(k for k in self.norm_keys if k.endswith(BUFFER_SUFFIXES))

    def init_single(self, gen):
        out = {}
        for l in range(1, len(self.widths)):
            d_in, d_out = self.widths[l - 1], self.widths[l]
            out[f"fc{l}.weight"] = _uniform((d_in, d_out), d_in, gen)
            out[f"fc{l}.bias"] = _uniform((d_out,), d_in, gen)
            if l < len(self.widths) - 1:
                out[f"bn{l}.weight"] = torch.ones(d_out, dtype=torch.float64)
                out[f"bn{l}.bias"] = torch.zeros(d_out, dtype=torch.float64)
                out[f"bn{l}.running_mean"] = torch.zeros(d_out, dtype=torch.float64)
                out[f"bn{l}.running_var"] = torch.ones(d_out, dtype=torch.float64)
        return out

    def _run(self, params: Params, x: torch.Tensor, train: bool):
        """Logits ``[N, B, C]`` and, in training mode, the moved buffers."""
        h = x.flatten(2)
        last = len(self.widths) - 1
        moved: Params = {}
        for l in range(1, last + 1):
            h = _dense(h, params[f"fc{l}.weight"], params[f"fc{l}.bias"])
            if l == last:
                break
            mean_key, var_key = f"bn{l}.running_mean", f"bn{l}.running_var"
            if train:
                batch = h.shape[1]
                if batch < 2:
                    raise ValueError("batch normalisation needs mini-batches of at least 2 "
                                     f"samples, got {batch}")
                mean = h.mean(1)                                    # [N, width]
                var = h.var(1, unbiased=False)
                m = self.momentum
                with torch.no_grad():
                    moved[mean_key] = (1 - m) * params[mean_key] + m * mean.detach()
                    moved[var_key] = ((1 - m) * params[var_key]
                                      + m * var.detach() * (batch / (batch - 1)))
            else:
                mean, var = params[mean_key], params[var_key]
            h = (h - mean.unsqueeze(1)) / torch.sqrt(var.unsqueeze(1) + self.eps)
            h = torch.relu(h * params[f"bn{l}.weight"].unsqueeze(1)
                           + params[f"bn{l}.bias"].unsqueeze(1))
        return h, moved

    def forward(self, params, x):
        """Evaluation mode: every BN layer normalises with the client's running statistics."""
        return self._run(params, x, train=False)[0]

    def train_grad(self, params: Params, x: torch.Tensor, y: torch.Tensor
                   ) -> tuple[Params, torch.Tensor, Params]:
        """Training mode (batch statistics): per-client gradients of the mean cross-entropy
        (zeros for the buffers), the losses ``[N]``, and the buffers moved by this batch."""
        with torch.enable_grad():
            leaves = {k: v if k in self.buffers else v.detach().requires_grad_(True)
                      for k, v in params.items()}
            logits, moved = self._run(leaves, x, train=True)
            loss = F.cross_entropy(logits.transpose(1, 2), y, reduction="none").mean(1)
            trained = [k for k in leaves if k not in self.buffers]
            grads = dict(zip(trained, torch.autograd.grad(loss.sum(),
                                                          [leaves[k] for k in trained])))
        grads.update({k: torch.zeros_like(params[k]) for k in self.buffers})
        return {k: grads[k] for k in params}, loss.detach(), moved

    def grad(self, params, x, y):
        g, loss, _ = self.train_grad(params, x, y)
        return g, loss


#: the ``--model`` names of :func:`build_model`
MODEL_NAMES = ("mlr", "dnn", "mlp", "mlp-bn", "cnn", "cnn3", "resnet18-gn")


def _image_shape(name: str, feat) -> tuple[int, int]:
    if len(feat) != 3 or feat[1] != feat[2]:
        raise ValueError(f"the {name} model needs square image features [C, H, H], "
                         f"got {list(feat)}")
    return int(feat[0]), int(feat[1])


def build_model(name: str, federation: Any, *, hidden: int | tuple[int, ...] | None = None,
                l2: float = 0.0) -> Model:
    """The model ``name`` (:data:`MODEL_NAMES`) sized for ``federation``'s features and
    classes.  ``hidden``: an int for dnn/cnn (the hidden width; CGPFL's DNN is ``dnn`` with
    128), a tuple of widths for mlp/mlp-bn/cnn3, the base width ``w`` of resnet18-gn (64 in
    the paper).  ``mlp-bn`` is :class:`BatchNormMLP` (default one hidden layer of 32);
    ``cnn`` CGPFL's CNN (2 conv + 2 dense), ``cnn3`` PPFE's (2 conv + 3 dense, heads over the
    dense layers), ``resnet18-gn`` PLGU's ResNet-18 with GroupNorm
    (:class:`algorithms.engine.models_resnet.ResNet18GN`)."""
    feat = federation.feature_shape
    c = federation.num_classes
    if name == "mlr":
        return MLR(int(torch.tensor(feat).prod()), c, l2=l2)
    if name == "dnn":
        return DNN(int(torch.tensor(feat).prod()), c, hidden=int(hidden or 20), l2=l2)
    if name == "mlp":
        widths = (hidden,) if isinstance(hidden, int) else tuple(hidden or (64, 32, 16))
        return MLP(int(torch.tensor(feat).prod()), c, hidden=widths, l2=l2)
    if name == "mlp-bn":
        if l2:
            raise ValueError("the mlp-bn model has no l2 term")
        widths = (hidden,) if isinstance(hidden, int) else tuple(hidden or (32,))
        return BatchNormMLP(int(torch.tensor(feat).prod()), c, hidden=widths)
    if name == "cnn":
        channels, side = _image_shape(name, feat)
        return CNN(channels, side, c, hidden=int(hidden or 64), l2=l2)
    if name == "cnn3":
        channels, side = _image_shape(name, feat)
        widths = (hidden,) * 2 if isinstance(hidden, int) else tuple(hidden or (120, 84))
        if len(widths) != 2:
            raise ValueError(f"the cnn3 model has two hidden dense widths, got {widths}")
        return CNN(channels, side, c, hidden=widths, l2=l2, head_span=3)
    if name == "resnet18-gn":
        from algorithms.engine.models_resnet import ResNet18GN

        channels, side = _image_shape(name, feat)
        if isinstance(hidden, tuple):
            raise ValueError(f"the resnet18-gn model takes one base width, got {hidden}")
        return ResNet18GN(channels, side, c, width=int(hidden or 64), l2=l2)
    raise ValueError(f"unknown model {name!r}; choose {', '.join(MODEL_NAMES)}")
