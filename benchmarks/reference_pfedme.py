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
  sampled clients;
* evaluation (as ``pflt run`` does every round): for each client and each of the three
  models (personalized θ, global, local w) one forward pass over its whole test set and one
  over its whole train set, accuracy and loss read back per client.

It shares no code with the batched engine beyond the data and the hyper-parameters.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Client:
    """One client's model, local model and loaders (as ``userpFedMe.UserpFedMe``)."""

    def __init__(self, fed, i: int, batch_size: int, seed: int):
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
                self.model.zero_grad()
                loss = self.loss(torch.log_softmax(self.model(x), 1), y)
                loss.backward()
                with torch.no_grad():  # pFedMeOptimizer.step
                    for p, w in zip(self.model.parameters(), self.local):
                        p.data = p.data - alg.personal_lr * (
                            p.grad.data + alg.lam * (p.data - w.data) + alg.code_l2 * p.data)
            with torch.no_grad():
                for p, w in zip(self.model.parameters(), self.local):
                    w.data = w.data - alg.lam * alg.lr * (w.data - p.data)

    @torch.no_grad()
    def metrics(self, params) -> list[float]:
        """Accuracy and loss on the test set, then on the train set, with ``params``."""
        out = []
        for x, y in ((self.test_x, self.test_y), (self.train_x, self.train_y)):
            logp = torch.log_softmax(torch.nn.functional.linear(x, *params), 1)
            out += [(logp.argmax(1) == y).sum().item() / len(y), self.loss(logp, y).item()]
        return out


class ReferencePFedMe:
    """The per-client baseline: ``round()`` trains, ``evaluate()`` evaluates three models."""

    def __init__(self, alg, fed, seed: int = 0, num_clients: int | None = None):
        """``num_clients``: only the first clients (the cost per client is what scales)."""
        self.alg, self.fed = alg, fed
        torch.manual_seed(seed)
        n = fed.num_clients if num_clients is None else min(num_clients, fed.num_clients)
        self.clients = [Client(fed, i, alg.batch_size, seed) for i in range(n)]
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

    def evaluate(self) -> dict[str, np.ndarray]:
        """Per-client [test acc, test loss, train acc, train loss] of the three models."""
        out = {"personalized": [], "global": [], "local": []}
        for c in self.clients:
            out["personalized"].append(c.metrics([p.detach() for p in c.model.parameters()]))
            out["global"].append(c.metrics(self.global_params))
            out["local"].append(c.metrics(c.local))
        return {k: np.asarray(v) for k, v in out.items()}
