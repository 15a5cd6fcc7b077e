"""Contract tests run on every registered algorithm — plugins included (``PFLT_PLUGINS=…
pytest tests/algorithms/test_contract.py``): deterministic, keeps dtype/device, learns a
planted problem, produces no NaN, names its evaluated models.  For one algorithm of your own
from your own tests: :func:`algorithms.testing.contract_battery`."""

import dataclasses

import pytest
import torch

from algorithms.engine.base import State, hyperparameters, registry
from algorithms.engine.evaluation import evaluate, model_for
from algorithms.engine.models import DNN
# small common settings, the planted problem and ``build``: those of the contract battery
# that users run on their own algorithms (algorithms/testing.py)
from algorithms.testing import SMALL, build, planted_federation


#: the contract holds on every device this machine has (CUDA tests run where it is present)
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(scope="module", params=DEVICES)
def fed(request):
    return planted_federation(device=request.param)


@pytest.fixture(scope="module")
def model():
    return DNN(5, 3, hidden=8)


ALGORITHMS = sorted(registry())


def _tensors(state: State):
    for p in state.models.values():
        yield from p.values()
    yield from state.tensors.values()


@pytest.mark.parametrize("name", ALGORITHMS)
def test_deterministic_dtype_finite(name, fed, model):
    alg = build(registry()[name])
    a = b = None
    for attempt in range(2):
        s = alg.init(fed, model, seed=4)
        for _ in range(2):
            s = alg.round(s, fed, model)
        a, b = (s, b) if attempt == 0 else (a, s)
    assert a.round == 2
    for x, y in zip(_tensors(a), _tensors(b)):
        assert torch.equal(x, y), f"{name}: same seed gave different states"
        if x.is_floating_point():
            assert x.dtype == torch.float64 and x.device == fed.device
            assert bool(torch.isfinite(x).all())


@pytest.mark.parametrize("name", ALGORITHMS)
def test_learns_planted_problem(name, fed, model):
    alg = build(registry()[name])
    s = alg.init(fed, model, seed=0)
    for _ in range(15):
        s = alg.round(s, fed, model)
    evaluated = alg.evaluated(s)
    assert evaluated, f"{name} evaluates no model"
    best = 0.0
    for label, params in evaluated.items():
        assert isinstance(label, str) and label
        acc, _ = evaluate(model_for(alg, model), params, fed.test)
        best = max(best, float(acc.mean()))
    # chance is 1/3; a learning algorithm clears 0.7 on separated blobs within 15 rounds
    assert best >= 0.7, f"{name}: best evaluated accuracy {best:.3f}"


@pytest.mark.parametrize("name", ALGORITHMS)
def test_hyperparameters_are_documented_and_frozen(name):
    cls = registry()[name]
    for f in hyperparameters(cls):
        assert f.metadata.get("help"), f"{name}.{f.name} has no help text"
    alg = build(cls)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(alg, hyperparameters(cls)[0].name, 1)


# ---- the client/server split (algorithms/engine/contract.py) ---------------------------------

@pytest.mark.parametrize("name", ALGORITHMS)
def test_client_by_client_equals_batched_engine(name, fed, model):
    """The same contract functions run one client at a time (each client seeing only its
    own rows and its own data) give the batched engine's state: what Flower relies on."""
    from algorithms.reference_loop import client_by_client_round

    alg = build(registry()[name])
    a = b = alg.init(fed, model, seed=2)
    for _ in range(3):
        a = alg.round(a, fed, model)
        b = client_by_client_round(alg, b, fed, model)
    assert a.round == b.round == 3 and sorted(a.models) == sorted(b.models)
    for x, y in zip(_tensors(a), _tensors(b)):
        # float64 rounding of batched vs one-row kernels (measured: 0, PPFE's SVD 3e-16)
        torch.testing.assert_close(x, y, rtol=0, atol=1e-12)


def test_per_client_loop_sees_a_changed_client(fed, model, monkeypatch):
    """The comparison above can fail: client 0's upload perturbed in the per-client loop."""
    from algorithms.methods.averaging.fedavg import FedAvg
    from algorithms.reference_loop import client_by_client_round

    alg = build(FedAvg)
    original = FedAvg.client_update
    state = alg.init(fed, model, seed=2)
    want = alg.round(state, fed, model)

    def skewed(self, phase, model, view):
        kept, upload = original(self, phase, model, view)
        return kept, {"global": {k: v + 1e-6 for k, v in upload["global"].items()}}

    monkeypatch.setattr(FedAvg, "client_update", skewed)
    got = client_by_client_round(alg, state, fed, model)
    diff = max(float((got.models["global"][k] - v).abs().max())
               for k, v in want.models["global"].items())
    assert diff > 1e-7


def test_phase_only_drops_clients_payload_rows_and_uploaders():
    from algorithms.engine.contract import Phase

    phase = Phase("train", torch.tensor([1, 3, 4]), payload={"w": torch.tensor([[1.], [3.], [4.]]),
                                                            "p": {"a": torch.tensor([10, 30, 40])}},
                  uploaders=torch.tensor([3, 4]))
    part = phase.only([1, 4])
    assert part.clients.tolist() == [1, 4] and part.uploaders.tolist() == [4]
    assert part.payload["w"].flatten().tolist() == [1.0, 4.0]
    assert part.payload["p"]["a"].tolist() == [10, 40]
    assert phase.upload_clients().tolist() == [3, 4]


def test_every_algorithm_declares_the_split(fed, model):
    """Client-held entries have a client row each; server rows are where they say."""
    for name in ALGORITHMS:
        alg = build(registry()[name])
        s = alg.init(fed, model, seed=0)
        for m in s.models:
            if alg.is_client_model(m) and s.models[m]:
                assert next(iter(s.models[m].values())).shape[0] == fed.num_clients, (name, m)
        for t in alg.client_tensors:
            assert s.tensors[t].shape[0] == fed.num_clients, (name, t)
        for k, axis in alg.server_rows.items():
            v = s.models[k] if k in s.models else s.tensors[k]
            v = next(iter(v.values())) if isinstance(v, dict) else v
            assert v.shape[axis] == fed.num_clients, (name, k)


@pytest.mark.parametrize("name", ALGORITHMS)
def test_every_hyperparameter_has_a_symbol_and_the_class_cites_its_paper(name):
    """Paper symbols (or the explicit NO_SYMBOL) on every field; the class docstring names
    its paper (a venue year or an arXiv number) and the symbol of ``lr`` when it has one."""
    import re

    cls = registry()[name]
    for f in hyperparameters(cls):
        assert f.metadata.get("symbol"), f"{name}.{f.name} has no paper symbol"
    doc = cls.__dict__.get("__doc__") or ""
    assert doc and not doc.startswith(cls.__name__ + "("), f"{name} has no class docstring"
    assert re.search(r"(19|20)\d\d|arXiv", doc), f"{name}: docstring cites no paper"
    text = " ".join(c.__doc__ or "" for c in cls.__mro__)
    names = {f.name for f in hyperparameters(cls)}
    if "lr" in names:
        assert "``lr``" in text, f"{name}: the docstrings do not say which symbol lr is"


# ---- lazy mini-batches (contract.LazyRows; issue 15) ------------------------------------

LAZY = [n for n in ALGORITHMS if registry()[n].lazy_batches]
# PPFE over 3 rounds: stage 0's last round (every client trains) and a stage transition
LAZY_SETTINGS = {"ppfe": {"total_rounds": 4, "stages": 2}}


def test_the_algorithms_whose_clients_all_train_gather_lazily():
    # every client trains (or fine-tunes / adapts) in a phase of these: without the opt-in
    # the engine gathers R·N·|D|·d at once (9.6 GB at N = 100,000, R = 20, |D| = 20, d = 60)
    assert {"cgpfl", "cgpfl-heur", "ditto", "fedavg-ft", "fedbabu", "l2sgd", "local",
            "perfedavg", "pfedme", "ppfe"} <= set(LAZY)


def _lazy_and_eager(name, fed, model, monkeypatch, rounds=3):
    """(index sizes of every lazy gather, lazy state, eager state) after ``rounds`` rounds."""
    from algorithms.engine.contract import LazyRows

    cls = registry()[name]
    alg = dataclasses.replace(build(cls), **LAZY_SETTINGS.get(name, {}))
    sizes = []
    take = LazyRows.take
    monkeypatch.setattr(LazyRows, "take",
                        staticmethod(lambda s, i: sizes.append(i.numel()) or take(s, i)))
    lazy = eager = alg.init(fed, model, seed=3)
    for _ in range(rounds):
        lazy = alg.round(lazy, fed, model)
        with monkeypatch.context() as m:
            m.setattr(cls, "lazy_batches", False)
            eager = alg.round(eager, fed, model)
    return sizes, lazy, eager


@pytest.mark.parametrize("name", LAZY)
def test_lazy_batches_give_the_same_rounds_bit_for_bit_one_step_at_a_time(
        name, fed, model, monkeypatch):
    # the eager gather of every step's [R, P, B, ...] at once is the reference: difference 0;
    # each gather is at most one step's batch of every client, N·|D| indices (R = 10 steps:
    # the eager gather is up to 10× that)
    sizes, lazy, eager = _lazy_and_eager(name, fed, model, monkeypatch)
    assert sizes and max(sizes) <= fed.num_clients * SMALL["batch_size"], (name, sizes)
    assert sorted(lazy.models) == sorted(eager.models)
    for (k, a), (_, b) in zip(sorted(lazy.models.items()), sorted(eager.models.items())):
        for p in b:
            assert torch.equal(a[p], b[p]), (name, k, p)
    for k, v in eager.tensors.items():
        assert torch.equal(lazy.tensors[k], v), (name, k)


def test_the_gather_bound_sees_a_whole_local_round_materialised(fed, model, monkeypatch):
    # the mutation the bound above catches: LazyRows gathering every step before picking one
    from algorithms.engine.contract import LazyRows

    getitem = LazyRows.__getitem__
    def eager_first(self, key):
        self.take(self.source, self.index)
        return getitem(self, key)

    monkeypatch.setattr(LazyRows, "__getitem__", eager_first)
    sizes, _, _ = _lazy_and_eager("ditto", fed, model, monkeypatch, rounds=1)
    assert max(sizes) > fed.num_clients * SMALL["batch_size"]


# ---- the sampled clients' mini-batches only (contract.train_phase) ---------------------

def _everyones_train_phase(state, fed, steps, batch_size, clients_per_round, *, name="train",
                           payload=None):
    """``train_phase`` as it was: every client's mini-batches kept ``[steps, N, B]``."""
    from algorithms.engine.base import sample_clients
    from algorithms.engine.contract import Phase

    gen = state.generator()
    batches = fed.sample_batches(steps, batch_size, gen)
    chosen = sample_clients(fed.num_clients, clients_per_round, gen)
    return Phase(name, chosen, {"sgd": batches}, payload or {})


def _unrewound_train_phase(state, fed, steps, batch_size, clients_per_round, *, name="train",
                           payload=None):
    """A mutation: the sampled clients' mini-batches drawn after the clients (another
    stream, of the clients' size only)."""
    from algorithms.engine.base import sample_clients
    from algorithms.engine.contract import Phase

    gen = state.generator()
    chosen = sample_clients(fed.num_clients, clients_per_round, gen)
    batches = fed.sample_batches(steps, batch_size, gen, clients=chosen)
    return Phase(name, chosen, {"sgd": batches}, payload or {})


def _with_train_phase(monkeypatch, replacement):
    """Every algorithm module's ``train_phase`` replaced; the names of those modules."""
    import sys

    from algorithms.engine import contract

    patched = []
    for mod_name, mod in list(sys.modules.items()):
        if mod_name.startswith("algorithms.") and getattr(mod, "train_phase", None) is \
                contract.train_phase and mod is not contract:
            monkeypatch.setattr(mod, "train_phase", replacement)
            patched.append(mod_name)
    return patched


def _states(alg, fed, model, rounds=3, seed=5):
    state, out = alg.init(fed, model, seed=seed), []
    for _ in range(rounds):
        state = alg.round(state, fed, model)
        out.append(state)
    return out


def _identical(a: State, b: State) -> bool:
    return sorted(a.models) == sorted(b.models) and all(
        torch.equal(x, y) for x, y in zip(_tensors(a), _tensors(b)))


TRAIN_PHASE_USERS = ["apfl", "cfl", "ditto", "fedadagrad", "fedadam", "fedala", "fedamp",
                     "fedavg", "fedavg-ft", "fedavgm", "fedbabu", "fedbn", "fedem", "fedpac",
                     "fedper", "fedproto", "fedprox", "fedrep", "fedrod", "fedsam", "fedyogi",
                     "ifca", "knnper", "lgfedavg", "pfedfda", "pfedhn", "plgu-ghn", "plgu-grep",
                     "plgu-lf", "scaffold"]


def test_the_train_phase_users_are_listed(fed, model, monkeypatch):
    """Which algorithms draw through ``train_phase`` (so that the list below stays whole)."""
    from algorithms.engine import contract

    calls = []

    def spy(*args, **kwargs):
        calls.append(1)
        return contract.train_phase(*args, **kwargs)

    _with_train_phase(monkeypatch, spy)
    users = []
    for name in ALGORITHMS:
        if not registry()[name].__module__.startswith("algorithms."):
            continue                    # a plugin's algorithm (PFLT_PLUGINS): not listed here
        calls.clear()
        alg = build(registry()[name])
        alg.round(alg.init(fed, model, seed=0), fed, model)
        if calls:
            users.append(name)
    assert users == TRAIN_PHASE_USERS, " ".join(users)


@pytest.mark.parametrize("name", TRAIN_PHASE_USERS)
def test_sampled_clients_batches_give_the_rounds_of_everyones_bit_for_bit(
        name, fed, model, monkeypatch):
    """``train_phase`` keeps only the sampled clients' mini-batches (S = 4 of N = 6 here):
    every round's state is the one of the former draw of everyone's, bit for bit."""
    alg = build(registry()[name])
    new = _states(alg, fed, model)
    _with_train_phase(monkeypatch, _everyones_train_phase)
    old = _states(alg, fed, model)
    assert all(_identical(a, b) for a, b in zip(new, old))


def test_sampled_clients_batches_comparison_sees_another_stream(fed, model, monkeypatch):
    """The comparison above can fail: the sampled clients' batches drawn after the clients
    (no rewind) change FedAvg's rounds."""
    alg = build(registry()["fedavg"])
    new = _states(alg, fed, model)
    _with_train_phase(monkeypatch, _unrewound_train_phase)
    assert not _identical(new[-1], _states(alg, fed, model)[-1])


def test_train_phase_keeps_the_sampled_columns_and_the_full_draw_at_full_participation(fed):
    from algorithms.engine.contract import train_phase

    state = State(4, 7, {})
    part = train_phase(state, fed, 3, 5, 4)
    old = _everyones_train_phase(state, fed, 3, 5, 4)
    assert torch.equal(part.clients, old.clients) and part.batches["sgd"].shape == (3, 4, 5)
    assert torch.equal(part.batches["sgd"], old.batches["sgd"][:, old.clients])
    assert torch.equal(train_phase(state, fed, 3, 5, 4).batches["sgd"], part.batches["sgd"])
    full = train_phase(state, fed, 3, 5, fed.num_clients)      # S = N: the draw as before
    everyone_old = _everyones_train_phase(state, fed, 3, 5, fed.num_clients)
    assert torch.equal(full.batches["sgd"], everyone_old.batches["sgd"])
    assert torch.equal(full.clients, torch.arange(fed.num_clients))


def test_participant_batches_and_phase_only_with_the_participants_columns():
    from algorithms.engine.contract import Phase, participant_batches

    everyone = torch.arange(2 * 6 * 3).view(2, 6, 3)
    clients = torch.tensor([1, 3, 4])
    own = everyone[:, clients]
    assert torch.equal(participant_batches(everyone, clients, 6), own)
    assert participant_batches(own, clients, 6) is own
    with pytest.raises(ValueError, match="5 columns for 3 participants of 6"):
        participant_batches(everyone[:, :5], clients, 6)
    for batches in (everyone, own):
        part = Phase("train", clients, {"sgd": batches}).only([1, 4])
        got = participant_batches(part.batches["sgd"], part.clients, 6)
        assert torch.equal(got, everyone[:, [1, 4]])


def _everyones_perfedavg_phase(self, state, fed, model):
    """Per-FedAvg's first phase as it was: every client's three draws kept."""
    from algorithms.engine.base import sample_clients
    from algorithms.engine.contract import Phase

    gen = state.generator()
    outer = fed.sample_batches(self.local_rounds, self.batch_size, gen)
    chosen = sample_clients(fed.num_clients, self.clients_per_round, gen)
    inner = fed.sample_batches(self.local_rounds, self.batch_size, gen)
    hess = fed.sample_batches(self.local_rounds, self.batch_size, gen)
    return Phase("train", chosen, {"outer": outer, "inner": inner, "hess": hess})


@pytest.mark.parametrize("variant", ["fo", "hf"])
def test_perfedavg_keeps_the_sampled_columns_bit_for_bit(variant, fed, model, monkeypatch):
    """Per-FedAvg keeps the sampled clients' columns of its three draws: every round as
    with everyone's kept; the comparison fails when the inner and Hessian draws swap."""
    from algorithms.methods.regularized.perfedavg import PerFedAvg

    alg = dataclasses.replace(build(PerFedAvg), variant=variant)
    phase = alg.first_phase(alg.init(fed, model, seed=5), fed, model)
    assert all(b.shape[1] == 4 for b in phase.batches.values())          # S = 4 of N = 6
    new = _states(alg, fed, model)
    monkeypatch.setattr(PerFedAvg, "first_phase", _everyones_perfedavg_phase)
    assert all(_identical(a, b) for a, b in zip(new, _states(alg, fed, model)))

    def swapped(self, state, fed, model):
        p = _everyones_perfedavg_phase(self, state, fed, model)
        return dataclasses.replace(p, batches={"outer": p.batches["outer"],
                                               "inner": p.batches["hess"],
                                               "hess": p.batches["inner"]})

    monkeypatch.setattr(PerFedAvg, "first_phase", swapped)
    assert not _identical(new[-1], _states(alg, fed, model)[-1])
