"""PPFE for neural networks — progressive personalized federated ensembles.

Emrani, Najafi, Motahari — *Federated Ensemble Learning with Progressive Model
Personalization* (PPFE, arXiv 2602.14244, 2026), §4, Algorithm 1, App. A.4.  Nearly all of
the paper's equations are lost; this follows the reconstruction of docs/formulas.md §C.3–C.4
(RECONSTRUCTED).  Stages t = 0 … T−1, ``R_t`` rounds each (:func:`ppfe_reduction.stage_rounds`):

1. **Stage 0** — FedAvg on the whole network (eq. 5; no personal layers), π^{(0)} = 1/n_i.
2. **Stage t ≥ 1** — the last t layers are personal (``fixed_head = k``: always the last k).
   Start from stage t−1 (shared body; heads per client, the newly personal layer copied from
   the shared one), project the heads into Ψ_t (:class:`ppfe_reduction.Reduction`: SVD rank,
   width or structured masks, factor γ^t).  Each round the server samples S clients (all
   clients in the stage's last round, [SEED]: ``full_last_round``); each runs the
   local update on the weighted loss Σ_j π^{(t)}_{i,j} ℓ (eq. 6; by π-weighted mini-batch
   sampling, see :mod:`algorithms.methods.ppfe.ppfe_ensemble`); the server averages only the body
   (``aggregation``), heads stay personal.  Local update ``"fedrep"`` (default): FedRep's
   head steps then body steps (Collins et al. 2021) — chosen because Remark 3 states that one
   stage with a fixed head *is* FedRep; ``"joint"``: joint SGD on body and head (FedPer-style).
   The body learning rate is ``lr · body_lr_decay^t`` (the paper lowers it; values lost).
3. **Between stages** every client computes, on its training data, the stage model's weighted
   0-1 error ε_i, its coefficient α^{(t)}_i (SAMME by default) and, if ``reweighting``, the
   next weights π^{(t+1)}_i ∝ π^{(t)}_i exp(β s) (eq. 7; β = ``inverse_temperature``, or
   β_i = α_i with ``beta_rule="alpha"`` — SAMME's own update).
4. **Output** — H_i(x) = Σ_t α^{(t)}_i h^{(t)}_i(x) (eq. 8), over the stages done so far
   (the running stage with its provisional α); math in :mod:`pfl_theory.ppfe_boosting`.

Rounds beyond ``total_rounds`` continue the last stage.  State: ``body`` ``[1, ...]`` and
``heads`` ``[N, ...]`` of the running stage, ``stage<t>`` (full per-client networks) of the
finished stages; tensors ``weights`` (π, flat ``[M]`` aligned with ``fed.train.x``) and
``alphas [T, N]``.  The stage transition happens at the start of a stage's first round.

Evaluated model (runner): ``stage`` = the running stage's network g_ψi ∘ f_φ.  The ensemble
(the PPFE predictor) is not a single network of the model class, so the runner cannot
evaluate it; :meth:`PPFE.diagnostics` reports it as ``ensemble_accuracy`` (+ ``_mean``,
``_low5``, ``_top5``) and ``ensemble_loss`` on the test split, with the communication count
(2·participants·shared parameters per round: download + upload) in total and per stage.
Ablations: ``fixed_head`` = 1/2/3 (M1–M3), ``reduction="none"`` (w/o MR), ``reweighting=False``.

Client/server split: heads and finished stage models live on the clients; the server holds
the body, π (it draws the π-weighted mini-batches) and α.  A stage transition is one
exchange (``prepare``, every client): the client receives its π_i, computes ε_i, α_i and
π_i' on its data, keeps its stage model and projected heads, and uploads α_i and π_i'.
``finished_stages`` (a tensor) counts the finished stages on the server.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from algorithms.engine.base import (State, broadcast, check_clients_per_round, hp, register,
                             sample_clients, validate_hyperparameters)
from algorithms.engine.contract import Algorithm, Phase, everyone, run_phases, with_server
from algorithms.engine.heads import (aggregate, check_aggregation, fedrep_update, head_span,
                                  merge, split_keys, subset)
from algorithms.methods.ppfe.ppfe_ensemble import (ENSEMBLES, ensemble_accuracy, next_weights,
                                      stage_statistics, to_flat, to_padded, uniform_flat,
                                      weighted_batches)
from algorithms.methods.ppfe.ppfe_reduction import (REDUCTIONS, Reduction, parse_floats, personal_layer_count,
                                       stage_rounds)
from pfl_theory.validation import in_range, nonnegative, positive, positive_int


def joint_sgd(model, params, head_keys, x, y, *, lr: float, body_lr: float, project=None):
    """Joint SGD on every parameter (head at ``lr``, the rest at ``body_lr``)."""
    head = set(head_keys)
    for r in range(x.shape[0]):
        g, _ = model.grad(params, x[r], y[r])
        params = {k: v - (lr if k in head else body_lr) * g[k] for k, v in params.items()}
        if project is not None:
            params = project(params)
    return params


@register("ppfe")
@dataclass(frozen=True)
class PPFE(Algorithm):
    """PPFE (Emrani, Najafi, Motahari, arXiv 2602.14244), Algorithm 1 as reconstructed in
    docs/formulas.md §C.3–C.4.  Symbols: η = ``lr``, T = ``stages``, R_t from
    ``total_rounds`` × ``stage_fractions``, γ = ``shrink``, β = ``inverse_temperature``
    (eq. 7), π = the per-sample weights, α^{(t)}_i = the stage coefficients, S =
    ``clients_per_round``, |D| = ``batch_size``."""

    #: the model the paper's tables report (``pflt compare``'s headline column): the
    #: T-stage ensemble (eq. 8), recorded as ``ensemble_*`` by :meth:`diagnostics`
    headline_model = "ensemble"

    server_rows = {"alphas": 1}
    lazy_batches = True     # full_last_round: every client trains; batches gathered per step

    def is_client_model(self, name: str) -> bool:
        return name == "heads" or name.startswith("stage")

    lr: float = hp(0.02, "local SGD learning rate η (heads; the body uses lr·body_lr_decay^t)",
                   symbol="η")
    local_rounds: int = hp(10, "local SGD steps R per round on the body / jointly (one mini-batch each)",
                           symbol="R")
    head_steps: int = hp(10, "local SGD steps on the head before the body steps (local_update='fedrep')",
                         symbol="—")
    batch_size: int = hp(20, "mini-batch size |D|", symbol="|D|")
    clients_per_round: int = hp(10, "clients S sampled per round", symbol="S")
    aggregation: str = hp("uniform", "server mean: 'uniform' (papers) or 'weighted' by samples",
                          symbol="—")
    stages: int = hp(4, "number of stages T (stage 0 = FedAvg); at most L+1 used when progressive",
                     symbol="T")
    total_rounds: int = hp(160, "round budget split across the stages (later rounds continue the last stage)",
                           symbol="Σ_t R_t")
    stage_fractions: str = hp("30,50,40,40", "relative rounds per stage (paper images: 30/50/40/40 of 160)",
                              symbol="R_t")
    fixed_head: int = hp(0, "0 = progressive heads; k > 0 = every stage personalizes the last k layers",
                         symbol="—")
    local_update: str = hp("fedrep", "'fedrep' (head then body steps; Remark 3) or 'joint'",
                           symbol="—")
    reduction: str = hp("svd", "personalized-layer reduction: 'svd', 'width', 'mask' or 'none'",
                        symbol="Ψ_t")
    shrink: float = hp(0.5, "complexity factor γ: stage-t rank/width/fan-in = ⌈d·γ^t⌉",
                       check=positive, symbol="γ")
    ranks: str = hp("", "explicit SVD ranks for stages 1,2,… (comma-separated; overrides shrink)",
                    symbol="r_t")
    mask_seed: int = hp(0, "seed of the structured masks shared by all clients", symbol="—")
    reweighting: bool = hp(True, "reweight samples between stages (eq. 7); False = ablation",
                           symbol="π")
    inverse_temperature: float = hp(1.0, "inverse temperature β of the reweighting (eq. 7)",
                                    check=nonnegative, symbol="β")
    beta_rule: str = hp("constant", "'constant' (β) or 'alpha' (β_i = α_i, SAMME's update)",
                        symbol="—")
    score: str = hp("miss", "reweighting score: 'miss' (0-1 error) or 'loss' (cross-entropy)",
                    symbol="s")
    coefficients: str = hp("samme", "stage coefficients: 'samme', 'adaboost' or 'uniform'",
                           symbol="α^(t)")
    ensemble: str = hp("probs", "ensemble of stage outputs: 'probs', 'votes' or 'logits'",
                       symbol="H_i")
    body_lr_decay: float = hp(1.0, "body learning rate factor per stage (paper lowers it; value lost)",
                              symbol="—")
    full_last_round: bool = hp(True, "all clients take part in the last round of each stage",
                               symbol="—")

    def __post_init__(self):
        validate_hyperparameters(self)
        for name in ("lr", "body_lr_decay"):
            positive(name, getattr(self, name))
        for name in ("local_rounds", "head_steps", "batch_size", "clients_per_round", "stages",
                     "total_rounds"):
            positive_int(name, getattr(self, name))
        positive_int("fixed_head", self.fixed_head, minimum=0)
        check_aggregation(self.aggregation)
        in_range("shrink", self.shrink, 0.0, 1.0)
        stage_rounds(self.total_rounds, self.fractions, self.stages)   # validates the budget
        self.rank_list
        for name, value, allowed in (
                ("local_update", self.local_update, ("fedrep", "joint")),
                ("reduction", self.reduction, REDUCTIONS),
                ("beta_rule", self.beta_rule, ("constant", "alpha")),
                ("score", self.score, ("miss", "loss")),
                ("coefficients", self.coefficients, ("samme", "adaboost", "uniform")),
                ("ensemble", self.ensemble, ENSEMBLES)):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {value!r}")

    # ---- schedule --------------------------------------------------------------------
    @property
    def fractions(self) -> list[float]:
        return parse_floats("stage_fractions", self.stage_fractions)

    @property
    def rank_list(self) -> list[float]:
        ranks = parse_floats("ranks", self.ranks)
        if any(r != int(r) for r in ranks):
            raise ValueError(f"ranks must be integers, got {self.ranks!r}")
        return ranks

    def num_stages(self, model) -> int:
        return self.stages if self.fixed_head else min(self.stages, head_span(model) + 1)

    def schedule_rounds(self) -> int:
        """The length of PPFE's own schedule, ``total_rounds`` (every stage done): the
        default of ``pflt run --rounds`` for PPFE (a run of fewer rounds ends inside its
        stages; ``pflt run`` says so)."""
        return self.total_rounds

    def schedule(self, model) -> list[int]:
        """Rounds per stage (sums to ``total_rounds``)."""
        return stage_rounds(self.total_rounds, self.fractions, self.num_stages(model))

    def stage_at(self, t: int, model) -> int:
        """The stage that round ``t`` (0-based) belongs to."""
        end = 0
        for s, r in enumerate(self.schedule(model)):
            end += r
            if t < end:
                return s
        return self.num_stages(model) - 1

    def is_last_round(self, t: int, model) -> bool:
        ends = torch.tensor(self.schedule(model)).cumsum(0).tolist()
        return t + 1 in ends

    def keys_at(self, stage: int, model) -> tuple[list[str], list[str]]:
        """(shared body keys, personal head keys) of ``stage``."""
        k = personal_layer_count(stage, fixed_head=self.fixed_head, num_layers=head_span(model))
        if k == 0:
            return [n for layer in model.layers for n in layer], []
        return split_keys(model, k)

    def reduction_at(self, stage: int, model, like) -> Reduction:
        return Reduction(model, self.keys_at(stage, model)[1], stage, method=self.reduction,
                         shrink=self.shrink, ranks=self.rank_list, mask_seed=self.mask_seed,
                         like=like)

    # ---- algorithm -------------------------------------------------------------------
    def init(self, fed, model, seed: int) -> State:
        check_clients_per_round(self.clients_per_round, fed)
        if self.fixed_head > head_span(model):
            raise ValueError(f"fixed_head={self.fixed_head} exceeds the {head_span(model)} "
                             "layers the model's heads may span")
        w = model.init(1, seed=seed, device=fed.device, dtype=fed.dtype)
        body, head = self.keys_at(0, model)
        return State(0, seed, {"body": subset(w, body),
                               "heads": broadcast(subset(w, head), fed.num_clients)},
                     {"weights": uniform_flat(fed.train, dtype=fed.dtype),
                      "alphas": torch.zeros(self.num_stages(model), fed.num_clients,
                                            dtype=fed.dtype, device=fed.device),
                      "finished_stages": torch.tensor(0)})

    def checkpoint_reference(self, fed, model, seed: int, round_: int) -> State:
        """The layout after round ``round_``: the stages begun by then (a stage's transition
        happens in its first round) are finished but the last — ``stage<t>`` networks for the
        finished ones, ``body``/``heads`` split as in the running stage.  Expanded views (no
        copies): only names, shapes and dtypes matter."""
        state = self.init(fed, model, seed)
        s = self.stage_at(round_ - 1, model) if round_ > 0 else 0
        w = model.init(1, seed=seed, device=fed.device, dtype=fed.dtype)
        rows = {k: v.expand(fed.num_clients, *v.shape[1:]) for k, v in w.items()}
        body, head = self.keys_at(s, model)
        models = {"body": subset(w, body), "heads": subset(rows, head),
                  **{f"stage{t}": dict(rows) for t in range(s)}}
        return State(round_, seed, models, {**state.tensors, "finished_stages": torch.tensor(s)})

    @staticmethod
    def stored_stage(state: State) -> int:
        return sum(1 for k in state.models if k.startswith("stage"))

    @staticmethod
    def finished_stages(state: State) -> int:
        """Finished stages (the server's counter)."""
        return int(state.tensors["finished_stages"])

    @staticmethod
    def stage_model(state: State) -> dict:
        """The running stage's per-client networks ``[N, ...]``."""
        heads = state.models["heads"]
        n = next(iter(heads.values())).shape[0] if heads else state.tensors["alphas"].shape[1]
        return {k: v.contiguous() for k, v in
                merge(state.models["body"], state.models["heads"], n=n).items()}

    def _statistics(self, state, fed, model, params):
        return stage_statistics(model, params, fed.train, state.tensors["weights"],
                                num_classes=fed.num_classes, rule=self.coefficients,
                                score=self.score)

    def advance(self, state: State, fed, model) -> State:
        """Finish the stored stage s (α^{(s)}, π^{(s+1)}) and set up stage s + 1."""
        return run_phases(self, state, fed, model, self.prepare_phase(state, fed, only=True))

    def prepare_phase(self, state: State, fed, *, only: bool = False) -> Phase:
        s = self.finished_stages(state)
        padded, _ = to_padded(state.tensors["weights"], fed.train)
        n_max = int(fed.train.counts.max())
        return Phase("prepare", everyone(fed), payload={"weights": padded},
                     info={"stage": s, "n_max": n_max}, plan=only)

    def first_phase(self, state: State, fed, model) -> Phase:
        stage = self.stage_at(state.round, model)
        if self.finished_stages(state) < stage:
            return self.prepare_phase(state, fed)
        body_keys, head_keys = self.keys_at(stage, model)
        fedrep = self.local_update == "fedrep" and bool(head_keys)
        steps = (self.head_steps if fedrep else 0) + self.local_rounds
        gen = state.generator()
        if stage == 0 or not self.reweighting:
            batches = fed.sample_batches(steps, self.batch_size, gen)
        else:
            batches = weighted_batches(fed.train, state.tensors["weights"], steps,
                                       self.batch_size, gen)
        chosen = sample_clients(fed.num_clients, self.clients_per_round, gen)
        if self.full_last_round and self.is_last_round(state.round, model):
            chosen = everyone(fed)
        return Phase("train", chosen, {"sgd": batches}, info={"stage": stage})

    def client_update(self, phase, model, view):
        if phase.name == "prepare":
            return self._prepare_client(phase, model, view)
        stage = phase.info["stage"]
        body_keys, head_keys = self.keys_at(stage, model)
        fedrep = self.local_update == "fedrep" and bool(head_keys)
        x, y = view.batches["sgd"]
        body, heads = view.server["body"], view.models["heads"]
        if set(heads) != set(head_keys):
            raise RuntimeError(f"clients {view.clients.tolist()} missed the transition to stage "
                               f"{stage} (their heads are another stage's); they cannot rejoin")
        params = merge(body, heads, n=x.shape[1])
        project = self.reduction_at(stage, model, params).projector()
        body_lr = self.lr * self.body_lr_decay ** stage
        if fedrep:
            params = fedrep_update(model, params, head_keys, body_keys, x, y,
                                   head_steps=self.head_steps, lr=self.lr, body_lr=body_lr,
                                   project=project)
        else:
            params = joint_sgd(model, params, head_keys, x, y, lr=self.lr, body_lr=body_lr,
                               project=project)
        return {"heads": subset(params, heads) if heads else {}}, {"body": subset(params, body)}

    def _prepare_client(self, phase, model, view):
        """Between stages s and s + 1 on the client's data: α_i, π_i', the kept stage
        model and the projected heads of stage s + 1."""
        s, train = phase.info["stage"], view.train
        prev = {k: v.contiguous() for k, v in
                merge(view.server["body"], view.models["heads"], n=view.clients.numel()).items()}
        padded = view.payload["weights"]
        weights = to_flat(padded[:, :int(train.counts.max())], train)
        stats = stage_statistics(model, prev, train, weights, num_classes=view.num_classes,
                                 rule=self.coefficients, score=self.score)
        if self.reweighting:     # eq. (7) in float64, stored in the federation's dtype
            beta = self.inverse_temperature if self.beta_rule == "constant" else stats["alpha"]
            weights = next_weights(train, weights, stats["score"], beta).to(weights.dtype)
        new, _ = to_padded(weights, train)
        new = torch.nn.functional.pad(new, (0, int(phase.info["n_max"]) - new.shape[1]))
        head_keys = self.keys_at(s + 1, model)[1]
        heads = self.reduction_at(s + 1, model, prev).project({k: prev[k].clone()
                                                               for k in head_keys})
        return {f"stage{s}": prev, "heads": heads}, {"alpha": stats["alpha"], "weights": new}

    def server_aggregate(self, phase, state, uploads, fed, model):
        if phase.name == "prepare":
            s = phase.info["stage"]
            clients = phase.upload_clients().to(fed.device)
            alphas = state.tensors["alphas"].clone()
            alphas[s, clients] = uploads["alpha"].to(alphas.dtype)
            padded, _ = to_padded(state.tensors["weights"], fed.train)
            padded = padded.index_copy(0, clients, uploads["weights"].to(padded.dtype))
            body_keys = self.keys_at(s + 1, model)[0]
            state = with_server(state, {"body": {k: state.models["body"][k] for k in body_keys}},
                                {"weights": to_flat(padded, fed.train), "alphas": alphas,
                                 "finished_stages": torch.tensor(s + 1)})
            return state, None if phase.plan else self.first_phase(state, fed, model)
        counts = fed.train.counts[phase.upload_clients().to(fed.device)]
        return with_server(state, {"body": aggregate(uploads["body"], counts,
                                                     self.aggregation)}), None

    def evaluated(self, state: State) -> dict:
        return {"stage": self.stage_model(state)}

    # ---- reporting -------------------------------------------------------------------
    def communication(self, model, num_clients: int, rounds: int) -> list[int]:
        """Parameters sent in rounds ``0 … rounds−1``, per stage: Σ 2·participants·|body_t|."""
        like = model.init(1)
        per_stage = [0] * self.num_stages(model)
        for t in range(rounds):
            s = self.stage_at(t, model)
            shared = sum(like[k][0].numel() for k in self.keys_at(s, model)[0])
            full = self.full_last_round and self.is_last_round(t, model)
            per_stage[s] += 2 * (num_clients if full else self.clients_per_round) * shared
        return per_stage

    def ensemble_members(self, state: State) -> tuple[list[dict], int]:
        s = self.stored_stage(state)
        return [state.models[f"stage{t}"] for t in range(s)] + [self.stage_model(state)], s

    def diagnostics(self, state: State, fed, model) -> dict:
        members, s = self.ensemble_members(state)
        stats = self._statistics(state, fed, model, members[-1])
        alphas = state.tensors["alphas"].clone()
        alphas[s] = stats["alpha"].to(alphas.dtype)   # provisional α of the running stage
        _, summary = ensemble_accuracy(model, members, alphas[:s + 1], fed.test, kind=self.ensemble)
        body_keys, head_keys = self.keys_at(s, model)
        comm = self.communication(model, fed.num_clients, state.round)
        out = {"stage": float(s), "num_stages": float(self.num_stages(model)),
               "ensemble_accuracy": summary["weighted"], "ensemble_accuracy_mean": summary["mean"],
               "ensemble_accuracy_low5": summary["low5"], "ensemble_accuracy_top5": summary["top5"],
               "ensemble_loss": summary["loss"],
               "stage_weighted_error": float(stats["eps"].mean()),
               "stage_alpha_mean": float(stats["alpha"].mean()),
               "shared_params": float(sum(members[-1][k][0].numel() for k in body_keys)),
               "personal_params": float(self.reduction_at(s, model, members[-1])
                                        .effective_params(subset(members[-1], head_keys))),
               "comm_params_total": float(sum(comm))}
        out.update({f"comm_params_stage{t}": float(c) for t, c in enumerate(comm)})
        return out
