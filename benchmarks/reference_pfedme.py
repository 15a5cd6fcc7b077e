"""pFedMe written the way per-client libraries run it — the benchmark's baseline.

Modelled on the public pFedMe code (``serverpFedMe.py`` / ``userpFedMe.py`` /
``pFedMeOptimizer``) for Synthetic + MLR:

* every client owns an ``nn.Linear`` (log-softmax output, ``NLLLoss``), a copy of its local
  model and a shuffled ``DataLoader`` over its own training set (batch ``|D|``, restarted
  when exhausted);
* a round: the server copies the global model into every client; each client runs ``R``
  local rounds of ``K`` steps of ``zero_grad / forward / backward / step`` on one
  mini-batch, the step being pFedMe's ``θ ← θ − η_p (∇f + λ(θ − w))``, then moves its
  local model ``w ← w − ηλ(w − θ)``; the server averages the local models of ``S``
  sampled clients.  The step is taken two ways: by a ``torch.optim.Optimizer`` subclass
  (:class:`PFedMeStep`, ``optimizer.zero_grad()`` / ``optimizer.step(local)``), as the
  public code's ``pFedMeOptimizer`` and PFLlib's pFedMe optimizer do — the baseline — and,
  with ``optimizer_step=False``, written inline under ``no_grad`` (an optimistic second
  baseline: it skips ``Optimizer.step``'s hooks and bookkeeping, ~12 µs a step here); both
  give the same parameters bit for bit (tested);
* evaluation (as ``pflt run`` does every round), for each client and each of the three
  models (personalized θ, global, local w), accuracy and loss on its whole test set and on
  its whole train set, read back per client — two ways:

  - :meth:`ReferencePFedMe.evaluate` (the baseline): as the public code's
    ``userbase.User.test`` / ``train_error_and_loss``: the model's parameters are copied
    into the client's ``nn.Linear`` (``update_parameters``), then a ``DataLoader`` over the
    client's data kept as a list of ``(x, y)`` samples, with the whole split as one batch
    (``testloaderfull`` / ``trainloaderfull``), is iterated — so every evaluation collates
    the split sample by sample;
  - :meth:`ReferencePFedMe.evaluate_sliced` (an optimistic second baseline, faster than
    any per-client library we know of): one ``F.linear`` on each client's slice of the
    flat tensors, no ``DataLoader``.

It shares no code with the batched engine beyond the data and the hyper-parameters.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torch import nn
from torch.optim import Optimizer
from torch.utils.data import DataLoader, TensorDataset


class PFedMeStep(Optimizer):
    """pFedMe's inner step as a ``torch.optim.Optimizer`` (how per-client libraries take it):
    ``step(anchor)`` sets ``θ ← θ − η_p (∇f(θ) + λ(θ − anchor) + μθ)`` for every parameter
    and returns the parameters."""

    def __init__(self, params, lr: float, lam: float, mu: float = 0.0):
        super().__init__(params, dict(lr=lr, lam=lam, mu=mu))

    @torch.no_grad()
    def step(self, anchor):  # type: ignore[override]
        for group in self.param_groups:
            for p, w in zip(group["params"], anchor):
                p.data = p.data - group["lr"] * (
                    p.grad.data + group["lam"] * (p.data - w.data) + group["mu"] * p.data)
        return self.param_groups[0]["params"]


class Client:
    """One client's model, local model and loaders (as ``userpFedMe.UserpFedMe``)."""

    def __init__(self, fed, i: int, batch_size: int, seed: int, optimizer=None):
        """``optimizer``: a callable ``params → PFedMeStep`` (the step as an ``Optimizer``),
        or None for the inline step."""
        o, c = int(fed.train.offsets[i]), int(fed.train.counts[i])
        ot, ct = int(fed.test.offsets[i]), int(fed.test.counts[i])
        self.train_x, self.train_y = fed.train.x[o:o + c], fed.train.y[o:o + c]
        self.test_x, self.test_y = fed.test.x[ot:ot + ct], fed.test.y[ot:ot + ct]
        self.model = nn.Linear(fed.train.x.shape[1], fed.num_classes).to(fed.device)
        self.local = [p.detach().clone() for p in self.model.parameters()]
        gen = torch.Generator().manual_seed(seed + i)
        self.loader = DataLoader(TensorDataset(self.train_x, self.train_y),
                                 batch_size=batch_size, shuffle=True, generator=gen)
        self.batches = iter(self.loader)
        self.loss = nn.NLLLoss()
        self.optimizer = None if optimizer is None else optimizer(self.model.parameters())
        # evaluation as userbase.User: samples as a list of (x, y), the whole split one batch
        test = list(zip(self.test_x, self.test_y))
        train = list(zip(self.train_x, self.train_y))
        self.testloaderfull = DataLoader(test, len(test))
        self.trainloaderfull = DataLoader(train, len(train))
        self.eval_model = nn.Linear(fed.train.x.shape[1], fed.num_classes).to(fed.device)

    def next_batch(self):
        try:
            return next(self.batches)
        except StopIteration:
            self.batches = iter(self.loader)
            return next(self.batches)

    def set_parameters(self, params) -> None:
        for p, g, w in zip(self.model.parameters(), params, self.local):
            p.data = g.clone()
            w.data = g.clone()

    def train(self, alg) -> None:
        self.model.train()
        for _ in range(alg.local_rounds):
            x, y = self.next_batch()
            for _ in range(alg.inner_steps):
                if self.optimizer is not None:                 # as pFedMeOptimizer
                    self.optimizer.zero_grad()
                    self.loss(torch.log_softmax(self.model(x), 1), y).backward()
                    self.optimizer.step(self.local)
                    continue
                self.model.zero_grad()
                loss = self.loss(torch.log_softmax(self.model(x), 1), y)
                loss.backward()
                with torch.no_grad():  # the same step, inline
                    for p, w in zip(self.model.parameters(), self.local):
                        p.data = p.data - alg.personal_lr * (
                            p.grad.data + alg.lam * (p.data - w.data) + alg.code_l2 * p.data)
            with torch.no_grad():
                for p, w in zip(self.model.parameters(), self.local):
                    w.data = w.data - alg.lam * alg.lr * (w.data - p.data)

    @torch.no_grad()
    def metrics(self, params) -> list[float]:
        """Accuracy and loss on the test set, then on the train set, with ``params``: the
        parameters copied into a model, then each full-split ``DataLoader`` iterated."""
        for p, new in zip(self.eval_model.parameters(), params):  # update_parameters
            p.data = new.data.clone()
        self.eval_model.eval()
        out = []
        for loader in (self.testloaderfull, self.trainloaderfull):
            correct, loss, count = 0, 0.0, 0
            for x, y in loader:
                logp = torch.log_softmax(self.eval_model(x), 1)
                correct += (torch.argmax(logp, 1) == y).sum().item()
                loss += self.loss(logp, y).item() * len(y)
                count += len(y)
            out += [correct / count, loss / count]
        return out

    @torch.no_grad()
    def metrics_sliced(self, params) -> list[float]:
        """As :meth:`metrics`, with one ``F.linear`` on the client's slices of the flat
        tensors (no model copy, no ``DataLoader``)."""
        out = []
        for x, y in ((self.test_x, self.test_y), (self.train_x, self.train_y)):
            logp = torch.log_softmax(torch.nn.functional.linear(x, *params), 1)
            out += [(logp.argmax(1) == y).sum().item() / len(y), self.loss(logp, y).item()]
        return out


class ReferencePFedMe:
    """The per-client baseline: ``round()`` trains, ``evaluate()`` evaluates three models."""

    def __init__(self, alg, fed, seed: int = 0, clients: Sequence[int] | None = None,
                 optimizer_step: bool = True):
        """``clients``: only these clients (default: all); a benchmark timing a subset
        scales the time by ``N / len(clients)``.  ``optimizer_step``: the inner step by
        :class:`PFedMeStep` (default, as the public code) or inline (optimistic)."""
        self.alg, self.fed = alg, fed
        torch.manual_seed(seed)
        ids = range(fed.num_clients) if clients is None else clients

        def optimizer(params):
            return PFedMeStep(params, alg.personal_lr, alg.lam, alg.code_l2)
        self.clients = [Client(fed, int(i), alg.batch_size, seed,
                               optimizer if optimizer_step else None) for i in ids]
        self.global_params = [p.detach().clone() for p in self.clients[0].model.parameters()]
        self.rng = np.random.RandomState(seed)

    def round(self) -> None:
        for c in self.clients:
            c.set_parameters(self.global_params)
            c.train(self.alg)
        chosen = self.rng.choice(len(self.clients), min(self.alg.clients_per_round,
                                                        len(self.clients)), replace=False)
        mean = [torch.zeros_like(p) for p in self.global_params]
        for i in chosen:
            for m, w in zip(mean, self.clients[i].local):
                m += w / len(chosen)
        b = self.alg.beta
        self.global_params = [(1 - b) * g + b * m for g, m in zip(self.global_params, mean)]

    def _evaluate(self, metrics) -> dict[str, np.ndarray]:
        out = {"personalized": [], "global": [], "local": []}
        for c in self.clients:
            out["personalized"].append(metrics(c, [p.detach() for p in c.model.parameters()]))
            out["global"].append(metrics(c, self.global_params))
            out["local"].append(metrics(c, c.local))
        return {k: np.asarray(v) for k, v in out.items()}

    def evaluate(self) -> dict[str, np.ndarray]:
        """Per-client [test acc, test loss, train acc, train loss] of the three models,
        through the full-split ``DataLoader`` of each client (the public code's way)."""
        return self._evaluate(Client.metrics)

    def evaluate_sliced(self) -> dict[str, np.ndarray]:
        """The same numbers from direct slices of the flat tensors (optimistic baseline)."""
        return self._evaluate(Client.metrics_sliced)
