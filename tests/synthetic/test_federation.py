import numpy as np
import pytest
import torch
from hypothesis import given, strategies as st

from synthetic.federation import Federation, Split


def _arrays(sizes, dim=3, seed=0):
    rng = np.random.RandomState(seed)
    xs = [rng.randn(n, dim) for n in sizes]
    ys = [rng.randint(0, 4, n) for n in sizes]
    return xs, ys


@given(st.lists(st.integers(2, 40), min_size=1, max_size=6), st.floats(0.1, 0.9))
def test_flat_storage_preserves_every_sample(sizes, frac):
    xs, ys = _arrays(sizes)
    fed = Federation.from_client_arrays(xs, ys, num_classes=4, train_fraction=frac,
                                        device="cpu", dtype=torch.float64)
    for i, (x, y) in enumerate(zip(xs, ys)):
        parts = []
        for split in (fed.train, fed.test):
            o, c = int(split.offsets[i]), int(split.counts[i])
            parts.append(split.x[o:o + c].numpy())
        got = np.concatenate(parts)
        # same multiset of rows (shuffled): compare sorted rows
        np.testing.assert_array_equal(np.sort(got, axis=0), np.sort(x, axis=0))
        assert int(fed.train.counts[i]) >= 1 and int(fed.test.counts[i]) >= 1


def test_sample_batches_stay_inside_each_client_and_are_deterministic():
    xs, ys = _arrays([5, 50, 7])
    fed = Federation.from_client_arrays(xs, ys, num_classes=4, device="cpu")
    idx = fed.sample_batches(4, 30, torch.Generator().manual_seed(1))
    again = fed.sample_batches(4, 30, torch.Generator().manual_seed(1))
    assert idx.shape == (4, 3, 30) and torch.equal(idx, again)
    lo = fed.train.offsets[None, :, None]
    hi = lo + fed.train.counts[None, :, None]
    assert bool(((idx >= lo) & (idx < hi)).all())
    # with 4*30 draws from 3 train samples, every sample of client 0 appears
    assert set(idx[:, 0].flatten().tolist()) == set(range(int(lo[0, 0, 0]), int(hi[0, 0, 0])))


def test_sample_batches_equal_one_draw_for_all_steps_and_leave_the_generator_alike():
    """Drawing step by step gives the numbers of one ``rand((steps, N, B))`` (the formula
    before) and consumes the generator the same, so what is drawn after is unchanged."""
    xs, ys = _arrays([5, 50, 7, 2])
    fed = Federation.from_client_arrays(xs, ys, num_classes=4, device="cpu")
    g1, g2 = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    idx = fed.sample_batches(6, 11, g1)
    u = torch.rand((6, fed.num_clients, 11), generator=g2, dtype=torch.float64)
    counts = fed.train.counts
    local = torch.minimum((u * counts.double()[None, :, None]).long(), (counts - 1)[None, :, None])
    assert torch.equal(idx, fed.train.offsets[None, :, None] + local)
    assert torch.equal(torch.rand(5, generator=g1), torch.rand(5, generator=g2))


def test_chunks_cover_each_sample_once():
    xs, ys = _arrays([3, 17, 9, 2])
    fed = Federation.from_client_arrays(xs, ys, num_classes=4, device="cpu",
                                        dtype=torch.float64)
    seen = torch.zeros(fed.train.x.shape[0], dtype=torch.long)
    for clients, x, y, mask in fed.train.chunks(chunk=4):
        assert x.shape[:2] == mask.shape and y.shape == mask.shape
        # locate each valid row in the flat array by exact match of its features
        for row in range(clients.numel()):
            for col in torch.nonzero(mask[row]).flatten().tolist():
                hits = torch.nonzero((fed.train.x == x[row, col]).all(1)).flatten()
                assert hits.numel() == 1
                seen[hits] += 1
    assert torch.equal(seen, torch.ones_like(seen))


@pytest.mark.parametrize("bad", [
    dict(xs=[np.zeros((3, 2))], ys=[np.zeros(2, int)]),
    dict(xs=[np.zeros((1, 2))], ys=[np.zeros(1, int)]),
    dict(xs=[np.zeros((3, 2)), np.zeros((3, 4))], ys=[np.zeros(3, int)] * 2),
    dict(xs=[np.zeros((3, 2))], ys=[np.array([0, 1, 5])], num_classes=3),
    dict(xs=[np.zeros((3, 2))], ys=[np.array([0.5, 1, 2])]),
    dict(xs=[], ys=[]),
])
def test_bad_input(bad):
    with pytest.raises(ValueError):
        Federation.from_client_arrays(**bad, device="cpu")


def test_to_changes_dtype_keeps_labels():
    xs, ys = _arrays([4, 6])
    fed = Federation.from_client_arrays(xs, ys, num_classes=4, device="cpu").to(dtype=torch.float64)
    assert fed.dtype == torch.float64 and fed.train.y.dtype == torch.long


@given(st.lists(st.integers(0, 30), min_size=1, max_size=6), st.integers(1, 9))
def test_blocks_cover_each_sample_once_padding_only_the_last_block(sizes, size):
    counts = torch.tensor(sizes)
    offsets = torch.cumsum(counts, 0) - counts
    split = Split(torch.zeros(int(counts.sum()), 1), torch.zeros(int(counts.sum()), dtype=torch.long),
                  offsets, counts)
    client, index, valid = split.blocks(size)
    seen = torch.zeros(int(counts.sum()), dtype=torch.long)
    seen.index_add_(0, index[valid], torch.ones(int(valid.sum()), dtype=torch.long))
    assert torch.equal(seen, torch.ones_like(seen))
    for i, n in enumerate(sizes):
        mine = client == i
        assert int(mine.sum()) == -(-n // size)                      # ceil(n / size) blocks
        rows = index[mine]
        assert bool(((rows >= offsets[i]) & (rows < offsets[i] + max(n, 1))).all())
        assert int((~valid[mine]).sum()) == (-(-n // size)) * size - n   # padding: last block
    assert split.blocks(size)[1] is index                             # remembered


def test_stream_checks_the_announced_sizes():
    xs, ys = _arrays([4, 6])
    with pytest.raises(ValueError, match="announced"):
        Federation.from_client_stream([4, 5], zip(xs, ys), feature_shape=(3,), device="cpu")
    with pytest.raises(ValueError, match="3 client sizes announced, 2 clients given"):
        Federation.from_client_stream([4, 6, 5], zip(xs, ys), feature_shape=(3,), device="cpu")
    with pytest.raises(ValueError, match="client 1 has 1 samples"):
        Federation.from_client_stream([4, 1], iter([]), feature_shape=(3,), device="cpu")


def test_resolve_device():
    from synthetic.federation import resolve_device

    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(None).type in ("cpu", "cuda")
    with pytest.raises(ValueError, match="cpu or cuda"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            resolve_device("cuda")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_federation_built_on_cpu_and_moved_once_to_cuda():
    xs, ys = _arrays([4, 6])
    fed = Federation.from_client_arrays(xs, ys, num_classes=4, device="cuda")
    ref = Federation.from_client_arrays(xs, ys, num_classes=4, device="cpu")
    assert fed.device.type == "cuda" and torch.equal(fed.train.x.cpu(), ref.train.x)


@pytest.mark.parametrize("clients", [[2, 0], [3], [0, 1, 2, 3], []])
def test_sample_batches_of_some_clients_are_those_columns_of_everyones(clients):
    """``clients=`` keeps only those columns — the same numbers as the whole draw sliced
    there — and leaves the generator where the whole draw does."""
    xs, ys = _arrays([5, 50, 7, 2])
    fed = Federation.from_client_arrays(xs, ys, num_classes=4, device="cpu")
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    rows = torch.tensor(clients, dtype=torch.long)
    got = fed.sample_batches(6, 11, g1, clients=rows)
    want = fed.sample_batches(6, 11, g2)[:, rows]
    assert got.shape == (6, len(clients), 11) and torch.equal(got, want)
    assert torch.equal(torch.rand(5, generator=g1), torch.rand(5, generator=g2))


def test_sample_batches_of_some_clients_sees_a_shorter_draw():
    """The comparison above can fail: drawing only the clients' own uniforms (the random
    stream of a draw proportional to them) gives other numbers."""
    xs, ys = _arrays([5, 50, 7, 2])
    fed = Federation.from_client_arrays(xs, ys, num_classes=4, device="cpu")
    own = Federation.from_client_arrays([xs[2], xs[0]], [ys[2], ys[0]], num_classes=4,
                                        device="cpu")
    want = fed.sample_batches(6, 11, torch.Generator().manual_seed(3))[:, [2, 0]]
    short = own.sample_batches(6, 11, torch.Generator().manual_seed(3))
    shifted = short + torch.stack([fed.train.offsets[2], fed.train.offsets[0]])[None, :, None]
    assert not torch.equal(shifted, want)


def test_skip_batches_leaves_the_generator_as_the_draw_does():
    xs, ys = _arrays([5, 50, 7, 2])
    fed = Federation.from_client_arrays(xs, ys, num_classes=4, device="cpu")
    g1, g2 = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
    fed.skip_batches(4, 3, g1)
    fed.sample_batches(4, 3, g2)
    assert torch.equal(torch.rand(7, generator=g1), torch.rand(7, generator=g2))
    g3 = torch.Generator().manual_seed(9)
    fed.skip_batches(3, 3, g3)                        # one step short: another state
    assert not torch.equal(torch.rand(7, generator=g3), torch.rand(7, generator=g2))


@pytest.mark.parametrize("clients, match", [
    (torch.tensor([4]), "0..3"), (torch.tensor([-1]), "0..3"),
    (torch.tensor([[0]]), "1-d"), (torch.tensor([0.5]), "1-d")])
def test_sample_batches_rejects_bad_client_ids(clients, match):
    xs, ys = _arrays([5, 50, 7, 2])
    fed = Federation.from_client_arrays(xs, ys, num_classes=4, device="cpu")
    with pytest.raises(ValueError, match=match):
        fed.sample_batches(2, 3, torch.Generator().manual_seed(0), clients=clients)
