"""Cross-validated choice of PPFE's number of stages T (toolkit selector, not from the paper).

PPFE (:mod:`algorithms.methods.ppfe.ppfe`, Emrani, Najafi, Motahari 2026, Algorithm 1) with T stages and
the same per-stage rounds is the prefix of the t_max-stage run (same schedule, same seeded
draws), so the ensemble of the first T stages at the end of stage T − 1 (eq. 8, the running
stage with its provisional α, as :meth:`algorithms.methods.ppfe.ppfe.PPFE.diagnostics`) *is* T-stage
PPFE: one run gives the whole curve T = 1 … t_max.

* :func:`kfold` cuts every client's training data into F seeded folds;
* :func:`stage_ensembles` trains PPFE and yields the T-stage ensemble at the end of each stage;
* :func:`evaluate` scores an ensemble per held-out sample (0-1 correctness, cross-entropy);
* :func:`stage_validation`: per fold, PPFE trained on the other folds, each T-stage ensemble
  scored on the held-out fold; the per-sample cross-entropies and correct counts are summed
  over the folds and T̂ = argmin of the summed loss (smallest T on ties).

The neural stage benchmark (``verification.selection.stages_nn_cv``, selector
``val_cv_loss``) measured this as the best stage selector for neural PPFE
(docs/selection.md); ``pflt select-stages --from-run DIR --validation`` runs it on a run's
federation and hyper-parameters.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from algorithms.methods.ppfe.ppfe_ensemble import client_of, ensemble_scores, per_sample_logits
from synthetic.federation import Federation, Split

__all__ = ["kfold", "evaluate", "stage_ensembles", "fold_scores", "pick_t", "stage_validation",
           "StageValidation"]


def _split(x: torch.Tensor, y: torch.Tensor, parts: list[np.ndarray], device) -> Split:
    idx = torch.as_tensor(np.concatenate(parts), device=device)
    cnt = torch.tensor([len(p) for p in parts], device=device)
    return Split(x[idx], y[idx], torch.cumsum(cnt, 0) - cnt, cnt)


def kfold(fed: Federation, folds: int, seed: int) -> list[tuple[Federation, Split]]:
    """Per fold j: ``(federation trained on the other folds, fold j)``; client i's training
    rows permuted by ``numpy.random.default_rng(seed)`` (one permutation per client, in client
    order) and cut by ``np.array_split`` into ``folds`` parts, each sorted.  Needs
    ≥ ``folds`` ≥ 2 training samples per client."""
    if not isinstance(folds, int) or folds < 2:
        raise ValueError(f"folds must be an integer >= 2, got {folds!r}")
    rng = np.random.default_rng(seed)
    chunks = []
    for o, c in zip(fed.train.offsets.tolist(), fed.train.counts.tolist()):
        if c < folds:
            raise ValueError(f"{folds} folds need >= {folds} training samples per client, got {c}")
        chunks.append([np.sort(p) for p in np.array_split(o + rng.permutation(c), folds)])
    out = []
    for j in range(folds):
        keep = [np.sort(np.concatenate(ch[:j] + ch[j + 1:])) for ch in chunks]
        rest = Federation(_split(fed.train.x, fed.train.y, keep, fed.device), fed.test,
                          fed.num_classes, fed.name)
        out.append((rest, _split(fed.train.x, fed.train.y, [ch[j] for ch in chunks], fed.device)))
    return out


def evaluate(model, members, alphas, split, *, kind: str = "probs") -> tuple[np.ndarray, np.ndarray]:
    """Per sample of ``split``: the ensemble's 0-1 correctness (eq. 8 with ``kind`` outputs,
    argmax) and its cross-entropy −log H̄(x)_y, H̄ = the α-mixture of the stages' softmax
    outputs normalised to sum 1 (whatever ``kind``, as
    :func:`algorithms.methods.ppfe.ppfe_ensemble.ensemble_accuracy`'s ``loss``); both float64 ``[M]``."""
    logits = [per_sample_logits(model, p, split) for p in members]
    clients = client_of(split)
    mix = ensemble_scores(logits, alphas, clients, "probs")
    pred = mix if kind == "probs" else ensemble_scores(logits, alphas, clients, kind)
    correct = (pred.argmax(-1) == split.y).cpu().numpy().astype(np.float64)
    mix = mix / mix.sum(-1, keepdim=True)
    nll = -torch.log(mix.gather(1, split.y[:, None]).squeeze(1).clamp_min(1e-300))
    return correct, nll.cpu().numpy()


def stage_ensembles(alg, fed, model, seed: int):
    """Train PPFE ``alg`` on ``fed`` (init ``seed``) for its ``total_rounds`` and yield, at the
    end of each stage T = 1 … t_max, ``(members, alphas, stats)``: the T-stage ensemble with
    the running stage's provisional α (as PPFE's diagnostics compute it) and that stage's
    statistics (weighted training errors ``eps``)."""
    ends = set(np.cumsum(alg.schedule(model)).tolist())
    state = alg.init(fed, model, seed)
    for _ in range(alg.total_rounds):
        state = alg.round(state, fed, model)
        if state.round in ends:
            members, s = alg.ensemble_members(state)
            stats = alg._statistics(state, fed, model, members[-1])
            alphas = state.tensors["alphas"].clone()
            alphas[s] = stats["alpha"].to(alphas.dtype)   # provisional α, as diagnostics does
            yield members, alphas[:s + 1], stats


def fold_scores(alg, fed_rest, held: Split, model, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(correct, nll)``, each ``[t_max, M_fold]``: PPFE ``alg`` trained on ``fed_rest``, every
    T-stage ensemble scored on ``held`` (:func:`evaluate` with the run's ensemble kind)."""
    correct, nll = [], []
    for members, alphas, _ in stage_ensembles(alg, fed_rest, model, seed):
        c, l = evaluate(model, members, alphas, held, kind=alg.ensemble)
        correct.append(c)
        nll.append(l)
    return np.stack(correct), np.stack(nll)


def pick_t(loss_curve) -> int:
    """T̂ = 1 + argmin over T of the held-out loss curve ``[t_max]`` (smallest T on ties)."""
    loss = np.asarray(loss_curve, dtype=np.float64)
    if loss.ndim != 1 or loss.size < 1 or not np.all(np.isfinite(loss)):
        raise ValueError(f"the loss curve must be a finite [t_max >= 1] array, got {loss!r}")
    return int(np.argmin(loss)) + 1


@dataclass
class StageValidation:
    """Summed held-out scores per T: ``loss_curve`` (Σ cross-entropy / held-out samples),
    ``accuracy_curve`` (Σ correct / held-out samples), ``t_hat`` = 1 + argmin of the loss."""
    ts: np.ndarray
    loss_curve: np.ndarray
    accuracy_curve: np.ndarray
    t_hat: int
    samples: int
    per_fold: list = field(default_factory=list, repr=False)


def stage_validation(alg, fed: Federation, model, *, folds: int = 5, cv: int | None = None,
                     seed: int = 0, init_seed: int = 0, progress=None) -> StageValidation:
    """Cross-validated T̂ (module docstring): folds 0 … cv − 1 of :func:`kfold` (``cv``
    default ``folds``) each held out once, PPFE ``alg`` (init ``init_seed``) trained on the
    rest; ``progress(done, total)`` after each fold."""
    cv = folds if cv is None else cv
    if not isinstance(cv, int) or not 1 <= cv <= folds:
        raise ValueError(f"cv must be an integer in [1, folds = {folds}], got {cv!r}")
    splits = kfold(fed, folds, seed)[:cv]
    parts = []
    for j, (rest, held) in enumerate(splits):
        parts.append(fold_scores(alg, rest, held, model, init_seed))
        if progress is not None:
            progress(j + 1, cv)
    correct = np.concatenate([p[0] for p in parts], 1)
    nll = np.concatenate([p[1] for p in parts], 1)
    loss = nll.mean(1)
    return StageValidation(ts=np.arange(1, loss.shape[0] + 1), loss_curve=loss,
                           accuracy_curve=correct.mean(1), t_hat=pick_t(loss),
                           samples=int(nll.shape[1]), per_fold=parts)
