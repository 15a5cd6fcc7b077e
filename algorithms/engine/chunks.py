"""How many clients a round trains at once: the client chunk from a memory budget.

The engine runs a phase's client updates a chunk of clients at a time
(:func:`algorithms.engine.contract.client_chunks`; the same numbers as all at once, tested
for every registered algorithm), so the memory of training grows with the chunk, not with
N.  :func:`chunk_for_budget` sizes the chunk: a client's training costs about

    ``PARAM_COPIES × (its parameters) + ACTIVATION_COPIES × |D| × (activation bytes of
    one sample)``

— the parameters, their gradient, the update and the stacked upload/state row; the
activations autograd keeps for the backward pass and their gradients.  The activation
bytes of one sample are measured once by summing the tensors autograd saves in one
client's forward pass on one sample (``torch.autograd.graph.saved_tensors_hooks``), so the
estimate holds for any model trained by autograd (ResNet-18-GN, a ``FunctionalModel``) and
over-estimates the hand-written CNN, whose scratch is smaller.  The default budget
(:func:`default_budget`) is half the memory the system reports available.
"""

from __future__ import annotations

import torch

#: copies of a client's parameters a training step holds (see the module docstring)
PARAM_COPIES = 6
#: activation bytes per sample held in a step: the saved tensors and their gradients
ACTIVATION_COPIES = 2
#: the default budget when the system does not say how much memory is available
FALLBACK_BUDGET = 4 * 2 ** 30


def default_budget() -> int:
    """Half of ``MemAvailable`` (Linux ``/proc/meminfo``), else :data:`FALLBACK_BUDGET`."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024 // 2
    except OSError:
        pass
    return FALLBACK_BUDGET


def activation_bytes(model, fed) -> int:
    """Bytes autograd saves for one sample of one client, the parameters (and views of
    them) left out (0 for a model without classes or whose loss cannot be taken on one
    sample)."""
    params = model.init(1, seed=0, device=fed.device, dtype=fed.dtype)
    x = fed.train.x[:1].unsqueeze(0)
    y = fed.train.y[:1].unsqueeze(0)
    total = 0
    # the parameters themselves (and views of them) are saved too: counted apart, once per
    # client, not per sample
    own = {v.untyped_storage().data_ptr() for v in params.values()}

    def pack(t: torch.Tensor):
        nonlocal total
        if t.untyped_storage().data_ptr() not in own:
            total += t.numel() * t.element_size()
        return t
    try:
        with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            leaves = {k: v.requires_grad_(True) for k, v in params.items()}
            model.per_client_loss(leaves, x, y).sum()
    except (RuntimeError, ValueError, TypeError, IndexError):
        return 0
    return total


def client_bytes(model, fed, batch_size: int) -> int:
    """Estimated bytes of one client's training (the module docstring's formula)."""
    params = model.init(1, seed=0, dtype=fed.dtype)
    param_bytes = sum(v.numel() * v.element_size() for v in params.values())
    return PARAM_COPIES * param_bytes + ACTIVATION_COPIES * batch_size * activation_bytes(
        model, fed)


def chunk_for_budget(model, fed, batch_size: int, budget: int | None = None) -> int | None:
    """Clients per chunk so that a chunk's training fits ``budget`` bytes (default:
    :func:`default_budget`); ``None`` when all N fit (no chunking)."""
    budget = default_budget() if budget is None else int(budget)
    if budget <= 0:
        raise ValueError(f"memory budget must be positive, got {budget} bytes")
    per_client = max(1, client_bytes(model, fed, batch_size))
    size = max(1, budget // per_client)
    return None if size >= fed.num_clients else int(size)
