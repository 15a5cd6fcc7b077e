"""Validation of resolved ``pflt run`` options before anything is allocated: ranges of the
integers (no platform overflow), finite floats, the device, the thread count, and an
estimate of the memory the run needs (refused with the estimate when it exceeds what the
machine has).  Every failure is a :class:`~pflt.cli.UserError` (one line, exit 2)."""

from __future__ import annotations

import math
import os
from typing import Any

from pflt.cli import UserError

INT_MAX = 2**31 - 1          # counts (rounds, clients, widths): C int on every platform
SEED_MAX = 2**32 - 1         # numpy's RandomState(seed + i) and torch generators accept these
FEATURES = {"synthetic": (60, 10), "synthetic-iid": (60, 10), "digits": (64, 10),
            "mnist5k": (784, 10), "mnist": (784, 10), "fmnist": (784, 10),
            "emnist": (784, 47), "cifar10": (3072, 10), "cifar100": (3072, 100)}
#: Synthetic(α, β): mean client size ≈ 2058 samples (205,795 over N = 100, pFedMe's data)
SYNTHETIC_MEAN_SIZE = 2058
#: per-client copies of the parameters an algorithm keeps at once (personal, local,
#: global broadcast, gradients, SAM perturbation, …): a generous upper count
PARAM_COPIES = 12


def _int(name: str, value: Any, lo: int, hi: int = INT_MAX) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"--{name} must be an integer, got {value!r}")
    if not lo <= value <= hi:
        raise UserError(f"--{name} must lie in [{lo}, {hi}], got {value}")


def _float(name: str, value: Any, lo: float | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UserError(f"--{name} must be a finite number, got {value!r}")
    if lo is not None and value < lo:
        raise UserError(f"--{name} must be >= {lo}, got {value!r}")


def check_options(values: dict[str, Any]) -> None:
    """Ranges and types of the run/data options (hyper-parameters are checked by the
    algorithm's own ``hp(check=...)``)."""
    for name in ("rounds", "clients", "eval_every", "classes_per_client"):
        _int(name.replace("_", "-"), values[name], 1)
    for name in ("seed", "data_seed"):
        _int(name.replace("_", "-"), values[name], 0, SEED_MAX)
    for name in ("checkpoint_every", "max_client_size"):
        if values.get(name) is not None and values.get(name) not in ("auto", "none"):
            _int(name.replace("_", "-"), values[name], 1 if name == "checkpoint_every" else 2)
    if values.get("size_range") is not None:
        sr = values["size_range"]
        if not isinstance(sr, (list, tuple)) or len(sr) != 2:
            raise UserError(f"--size-range takes two integers LO HI, got {sr!r}")
        for v in sr:
            _int("size-range", v, 1)
        if sr[0] > sr[1]:
            raise UserError(f"--size-range needs LO <= HI, got {sr[0]} {sr[1]}")
    hidden = values.get("hidden")
    if hidden is not None:
        for w in (hidden if isinstance(hidden, (list, tuple)) else [hidden]):
            _int("hidden", w, 1, 1_000_000)
    _float("l2", values["l2"], 0.0)
    _float("synthetic-alpha", values["synthetic_alpha"], 0.0)
    _float("synthetic-beta", values["synthetic_beta"], 0.0)
    _float("dirichlet-alpha", values["dirichlet_alpha"])
    _float("train-fraction", values["train_fraction"])
    vf = values.get("validation_fraction", 0.0)
    _float("validation-fraction", vf, 0.0)
    if not vf < 1.0:
        raise UserError(f"--validation-fraction must be < 1 (0: evaluate on the test split), "
                        f"got {vf!r}")
    _float("shift-rotation", values.get("shift_rotation", 0.0), 0.0)
    if values.get("shift_rotation", 0.0) > 180:
        raise UserError("--shift-rotation must be <= 180 degrees, got "
                        f"{values['shift_rotation']!r}")
    _float("shift-contrast", values.get("shift_contrast", 1.0), 1.0)
    _float("shift-noise", values.get("shift_noise", 0.0), 0.0)
    check_threads(values.get("threads"))
    values["device"] = check_device(values.get("device"))


def check_threads(threads: Any) -> None:
    if threads is None:
        return
    cpus = os.cpu_count() or 1
    _int("threads", threads, 1, max(4 * cpus, 4))


def check_device(device: Any) -> str | None:
    """``None`` (CUDA when available), ``cpu``, ``cuda`` or ``cuda:K`` that exists here."""
    if device is None:
        return None
    import torch

    if not isinstance(device, str):
        raise UserError(f"--device must be cpu or cuda[:K], got {device!r}")
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError):
        raise UserError(f"--device {device!r} is not a device; use cpu or cuda[:K]") from None
    if dev.type == "cpu":
        return "cpu"
    if dev.type != "cuda":
        raise UserError(f"--device {device!r} is not supported; use cpu or cuda[:K]")
    if not torch.cuda.is_available():
        raise UserError(f"--device {device}: CUDA is not available on this machine "
                        "(use --device cpu)")
    if dev.index is not None and dev.index >= torch.cuda.device_count():
        raise UserError(f"--device {device}: this machine has {torch.cuda.device_count()} "
                        "CUDA device(s)")
    return str(dev)


def _params_per_client(model: str, dim: int, classes: int, hidden: Any) -> int:
    if model == "mlr":
        widths = [dim, classes]
    elif model == "dnn":
        widths = [dim, int(hidden or 20), classes]
    elif model == "mlp":
        widths = [dim, *((hidden,) if isinstance(hidden, int) else tuple(hidden or (64, 32, 16))),
                  classes]
    elif model == "mlp-bn":   # + 4 BatchNorm entries per hidden unit
        hid = (hidden,) if isinstance(hidden, int) else tuple(hidden or (32,))
        widths = [dim, *hid, classes]
        return sum(a * b + b for a, b in zip(widths, widths[1:])) + 4 * sum(hid)
    elif model == "resnet18-gn":
        from algorithms.engine.models_resnet import parameter_count

        return parameter_count(3, classes, int(hidden or 64))
    else:  # cnn/cnn3: two 5×5 convolutions (≤ 64 channels) and two or three dense layers
        hid = (hidden,) if isinstance(hidden, int) else tuple(hidden or (64,))
        if model == "cnn3":
            hid = hid * 2 if len(hid) == 1 else hid
            hid = tuple(hidden or (120, 84)) if not isinstance(hidden, int) else hid
        widths = [dim, *hid, classes]
        return 3 * 25 * 64 * 64 + sum(a * b + b for a, b in zip(widths, widths[1:]))
    return sum(a * b + b for a, b in zip(widths, widths[1:]))


def available_memory(device: str | None) -> int | None:
    """Bytes available on ``device`` (None: unknown)."""
    import torch

    if (device or "").startswith("cuda") or (device is None and torch.cuda.is_available()):
        try:
            return int(torch.cuda.mem_get_info(torch.device(device or "cuda"))[0])
        except Exception:  # pragma: no cover - no CUDA runtime
            return None
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def memory_estimate(values: dict[str, Any]) -> int:
    """A rough upper estimate in bytes: the data, ``PARAM_COPIES`` per-client parameter
    copies, and one step's mini-batch and activations for every client."""
    name = str(values["data"]).partition(":")[0]
    dim, classes = FEATURES.get(name, (784, 10))
    n = int(values["clients"])
    item = 8 if values.get("dtype") == "float64" else 4
    if name.startswith("synthetic"):
        per = SYNTHETIC_MEAN_SIZE
        cap = values.get("max_client_size")
        if cap == "auto":
            from synthetic.fedprox import auto_client_cap
            cap = auto_client_cap(n, dim=dim, seed=int(values.get("data_seed") or 0))
        if isinstance(cap, int):
            per = min(per, cap)
        data = n * per * (dim * item + 8)
    else:
        data = {"digits": 1797, "mnist5k": 5000}.get(name, 70_000) * (dim * item + 8)
    params = _params_per_client(values["model"], dim, classes, values.get("hidden"))
    hp = values.get("hyperparameters", {})
    batch = int(hp.get("batch_size", 20))
    steps = int(hp.get("local_rounds", 20))
    hidden = values.get("hidden")
    widest = max([dim, classes, *(hidden if isinstance(hidden, (list, tuple)) else
                                  [int(hidden or 64)])])
    batches = n * batch * (dim + 4 * widest) * item + steps * n * batch * 8
    if values["model"] == "resnet18-gn":
        # activations kept for the backward pass: ~12 tensors of w·2^(s-1) channels at
        # H·W/4^(s-1) pixels per stage s, i.e. ≈ 24·w·H·W per sample (H·W ≤ dim)
        batches += n * batch * 24 * int(hidden or 64) * dim * item
    return data + PARAM_COPIES * n * params * item + batches


def check_memory(values: dict[str, Any]) -> None:
    need = memory_estimate(values)
    have = available_memory(values.get("device"))
    if have is not None and need > have:
        raise UserError(f"this run needs about {need / 2**30:.3g} GiB "
                        f"(--clients {values['clients']}, --model {values['model']}, batch "
                        f"and widths as given) but {have / 2**30:.3g} GiB are available")
