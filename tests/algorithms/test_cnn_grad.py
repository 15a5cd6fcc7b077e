"""Tests of algorithms/engine/cnn_grad.py: the batched CNN's hand-written training pass equals,
client by client, autograd through ``F.conv2d`` / ``F.max_pool2d`` / ``F.cross_entropy`` (a
reference written here, sharing no code with the engine), ties in the pooling included; the
dense-weight gradients go into ``out``; the scratch is per thread."""

import threading

import pytest
import torch
import torch.nn.functional as F

from algorithms.engine import cnn_grad
from algorithms.engine.models import CNN

F64 = torch.float64

# float64, the same sums in other orders (unfold + bmm against mkldnn's convolution): a few
# ulps per product over ~10 layers of sums of ≤ 800 terms; 1e-12 absolute on gradients of
# size O(1) keeps ~3 decades of margin (observed ≤ 7e-16) and is ~10 decades below a wrong
# routing of one pooled entry (tests below).
ATOL = 1e-12


def reference_grad(model, params, x, y, i):
    """Client ``i``'s gradient and loss by autograd through ``torch.nn.functional``."""
    leaves = {k: v[i].clone().requires_grad_() for k, v in params.items()}
    h = x[i].reshape(-1, model.in_channels, model.image_size, model.image_size)
    h = F.max_pool2d(F.relu(F.conv2d(h, leaves["conv1.weight"], leaves["conv1.bias"])), 2)
    h = F.max_pool2d(F.relu(F.conv2d(h, leaves["conv2.weight"], leaves["conv2.bias"])), 2)
    h = h.flatten(1)
    last = len(model.widths) - 1
    for l in range(1, last + 1):
        h = h @ leaves[f"fc{l}.weight"] + leaves[f"fc{l}.bias"]
        h = F.relu(h) if l < last else h
    loss = F.cross_entropy(h, y[i])
    if model.l2:
        loss = loss + 0.5 * model.l2 * sum((v ** 2).sum() for k, v in leaves.items()
                                           if k.endswith("weight"))
    grads = torch.autograd.grad(loss, list(leaves.values()))
    return dict(zip(leaves, grads)), float(loss)


def problem(cin, side, hidden, l2, *, seed=0, n=3, b=7, zeros=True):
    gen = torch.Generator().manual_seed(seed)
    model = CNN(cin, side, 5, channels=(4, 6), hidden=hidden, l2=l2)
    params = model.init(n, seed=seed, dtype=F64, same=False)
    x = torch.randn(n, b, cin * side * side, generator=gen, dtype=F64)
    if zeros:         # a blank half, as Fashion-MNIST's background: ties in every pool window
        x[:, :, : side * side // 2] = 0
    y = torch.randint(0, 5, (n, b), generator=gen)
    return model, params, x, y


CASES = [(1, 16, 8, 0.0), (3, 17, (12, 20), 0.1), (1, 28, 32, 0.0), (2, 19, 16, 0.0)]


@pytest.mark.parametrize("cin,side,hidden,l2", CASES)
def test_gradient_equals_autograd_client_by_client(cin, side, hidden, l2):
    model, params, x, y = problem(cin, side, hidden, l2)
    g, loss = model.grad(params, x, y)
    for i in range(x.shape[0]):
        want, want_loss = reference_grad(model, params, x, y, i)
        assert abs(float(loss[i]) - want_loss) <= ATOL
        for k in want:
            torch.testing.assert_close(g[k][i], want[k], rtol=0, atol=ATOL, msg=k)


def _pool_gradient(pool, z, g):
    """``(pooled, gradient)`` of the 2×2 pool by ``cnn_grad.pool2`` / ``pool2_backward``."""
    pooled, winners = pool(z, record=True)
    return pooled, cnn_grad.pool2_backward(g, winners, torch.empty_like(z))


@pytest.mark.parametrize("shape", [(2, 3, 8, 8), (4, 5, 7)])
def test_pool_routes_ties_to_the_first_maximum_as_max_pool2d(shape):
    """Entries drawn from {0, 1, 2}: most windows hold ties; values and gradients equal
    ``F.max_pool2d``'s autograd exactly (odd sizes: the last row/column dropped)."""
    gen = torch.Generator().manual_seed(1)
    z = torch.randint(0, 3, shape, generator=gen).to(F64)
    leaf = z.clone().requires_grad_()
    want = F.max_pool2d(leaf, 2)
    g = torch.randn(want.shape, generator=gen, dtype=F64)
    (want_grad,) = torch.autograd.grad(want, leaf, g)
    pooled, grad = _pool_gradient(cnn_grad.pool2, z, g)
    assert torch.equal(pooled, want.detach())
    assert torch.equal(grad, want_grad)


def test_the_pool_check_fails_when_ties_go_to_the_last_maximum():
    gen = torch.Generator().manual_seed(1)
    z = torch.randint(0, 3, (2, 3, 8, 8), generator=gen).to(F64)
    leaf = z.clone().requires_grad_()
    want = F.max_pool2d(leaf, 2)
    g = torch.randn(want.shape, generator=gen, dtype=F64)
    (want_grad,) = torch.autograd.grad(want, leaf, g)

    def last_wins(z, *, record=False):
        tl, tr, bl, br = cnn_grad.quadrants(z)
        pooled = cnn_grad.max4(tl, tr, bl, br)
        return pooled, (torch.maximum(bl, br) >= torch.maximum(tl, tr), tr >= tl, br >= bl)
    _, grad = _pool_gradient(last_wins, z, g)
    assert not torch.equal(grad, want_grad)


def test_forward_equals_the_reference_logits():
    model, params, x, y = problem(3, 17, (12, 20), 0.0)
    logits = model.forward(params, x)
    for i in range(x.shape[0]):
        h = x[i].reshape(-1, 3, 17, 17)
        h = F.max_pool2d(F.relu(F.conv2d(h, params["conv1.weight"][i], params["conv1.bias"][i])), 2)
        h = F.max_pool2d(F.relu(F.conv2d(h, params["conv2.weight"][i], params["conv2.bias"][i])), 2)
        h = h.flatten(1)
        for l in (1, 2, 3):
            h = h @ params[f"fc{l}.weight"][i] + params[f"fc{l}.bias"][i]
            h = F.relu(h) if l < 3 else h
        torch.testing.assert_close(logits[i], h, rtol=0, atol=ATOL)


def test_dense_gradients_are_written_into_out():
    model, params, x, y = problem(1, 28, 32, 0.0)
    first, _ = model.grad(params, x, y)
    kept = {k: v.clone() for k, v in first.items()}
    again, _ = model.grad(params, x, y, out=first)
    assert again["fc1.weight"].data_ptr() == first["fc1.weight"].data_ptr()
    for k in kept:
        assert torch.equal(again[k], kept[k]), k


def test_scratch_is_per_thread_and_released():
    cnn_grad.release_workspace()
    mine = cnn_grad.workspace()
    other = []
    t = threading.Thread(target=lambda: other.append(cnn_grad.workspace()))
    t.start()
    t.join()
    assert other[0] is not mine
    model, params, x, y = problem(1, 16, 8, 0.0)
    model.grad(params, x, y)
    assert mine.buffers                          # cols, z1, dz1 kept for the next step
    cnn_grad.release_workspace()
    assert cnn_grad.workspace() is not mine


def test_evaluation_forward_reuses_scratch_without_aliasing_its_results():
    """Under ``no_grad`` the first convolution writes into the thread's scratch: results equal
    the autograd-mode forward, and a later call does not change an earlier result."""
    model, params, x, y = problem(1, 16, 8, 0.0)
    with torch.enable_grad():
        want = model.forward(params, x)
    with torch.no_grad():
        first = model.forward(params, x)
        kept = first.clone()
        model.forward(params, torch.randn_like(x))
    assert torch.equal(first, kept)
    torch.testing.assert_close(first, want.detach(), rtol=0, atol=ATOL)
    assert "eval_cols" in cnn_grad.workspace().buffers
