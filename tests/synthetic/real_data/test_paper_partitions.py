"""synthetic/real_data/paper_partitions.py: the papers' partitions against their text
(CGPFL IJCAI'22 §5.1, PPFE §6.2.3/A.2, PLGU §6) and wired through `--partition NAME`."""

from __future__ import annotations

import numpy as np
import pytest

from synthetic.real_data import registry
from synthetic.real_data.paper_partitions import equal_fill_size, paper_partition
from synthetic.sources import DataSpec, build_federation


@pytest.mark.parametrize("paper, data, pool, c, assign, size, replace", [
    # CGPFL §5.1: 60,000 training images of (F)MNIST, whole CIFAR-10; 3 of 10; [400, 5000]
    # (no image twice in a client; 108k rows from 60k images force reuse across clients)
    ("cgpfl", "mnist", "train", 3, "cyclic", (400, 5000), "across-clients"),
    ("cgpfl", "fmnist", "train", 3, "cyclic", (400, 5000), "across-clients"),
    ("cgpfl", "cifar10", "all", 3, "cyclic", (400, 5000), "across-clients"),
    # pFedMe §5.1: MNIST's 70,000, N = 20, 2 of 10 labels, [1165, 3834]
    ("pfedme", "mnist", "all", 2, "cyclic", (1165, 3834), "across-clients"),
    # FMNIST transfers: the paper's 10-class setting
    ("pfedme", "fmnist", "all", 2, "cyclic", (1165, 3834), "across-clients"),
    ("ppfe", "fmnist", "all", 2, "random", (150, 150), False),
    ("plgu", "fmnist", "all", 3, "cyclic", None, False),
    # PPFE §6.2.3: CIFAR-10 S = 2, 150 per client; CIFAR-100 S = 5, 400 per client
    ("ppfe", "cifar10", "all", 2, "random", (150, 150), False),
    ("ppfe", "cifar100", "all", 5, "random", (400, 400), False),
    # PLGU §6: 3 labels on CIFAR-10, 10 on CIFAR-100, equal sizes
    ("plgu", "cifar10", "all", 3, "cyclic", None, False),
    ("plgu", "cifar100", "all", 10, "cyclic", None, False),
])
def test_each_paper_partition_has_the_papers_settings(paper, data, pool, c, assign, size,
                                                      replace):
    p = paper_partition(paper, data)
    assert (p.pool, p.classes_per_client, p.class_assignment, p.size_range, p.replace) == \
        (pool, c, assign, size, replace)


def test_datasets_a_paper_does_not_use_and_lost_settings_are_one_line_errors():
    with pytest.raises(ValueError, match="partitions mnist, fmnist, cifar10 only, not cifar100"):
        paper_partition("cgpfl", "cifar100")
    with pytest.raises(ValueError, match="lost") as err:
        paper_partition("ppfe", "emnist-letters")
    assert "\n" not in str(err.value)


def test_equal_fill_size_by_hand():
    # 6,000 per class; N = 100, c = 3: each class held by 30 clients -> 200 each -> 600;
    # N = 40: 12 clients per class -> 500 each -> 1,500.  mutation caught: load ignored
    y = np.repeat(np.arange(10), 6000)
    assert equal_fill_size(y, 100, 3) == 600
    assert equal_fill_size(y, 40, 3) == 1500


def _client_classes(fed, i):
    parts = []
    for split in (fed.train, fed.test):
        o, n = int(split.offsets[i]), int(split.counts[i])
        parts.append(np.asarray(split.y[o:o + n]))
    return set(np.concatenate(parts).tolist())


def test_cgpfl_draws_from_the_training_split_only(tmp_path, fakes):
    # the test images are all 255 (pixel 1.0); training pixels are <= 200.
    # mutation caught: pool "all" (test images in the clients), 2 classes, sizes off-range
    # 1,700 per class: a client takes up to 5000/3 + 1 of a class, never one image twice
    files = fakes.fake_idx_files(n_train=17000, test_pixel=255)
    entry = fakes.fake_entry("fmnist", files, n_train=17000)
    fakes.write_files(tmp_path, files)
    with registry.override({"fmnist": entry}):
        fed = build_federation(DataSpec(data=f"fmnist:{tmp_path}", num_clients=5,
                                        partition="cgpfl"), device="cpu")
    for split in (fed.train, fed.test):
        assert float(split.x.max()) <= 200 / 255 + 1e-6
    sizes = (fed.train.counts + fed.test.counts).tolist()
    assert all(400 <= n <= 5000 for n in sizes)
    for i in range(5):
        assert _client_classes(fed, i) == {(i + j) % 10 for j in range(3)}


def test_plgu_gives_every_client_the_same_size(tmp_path, fakes):
    # 90 samples, 9 per class, N = 10, c = 3: 3 clients per class -> 3 each -> size 9
    files = fakes.fake_idx_files()
    fakes.write_files(tmp_path, files)
    entry = fakes.fake_entry("cifar10", files)       # the IDX fake stands in for CIFAR-10
    with registry.override({"cifar10": entry}):
        fed = build_federation(DataSpec(data=f"cifar10:{tmp_path}", num_clients=10,
                                        partition="plgu"), device="cpu")
    assert (fed.train.counts + fed.test.counts).tolist() == [9] * 10
    assert all(len(_client_classes(fed, i)) == 3 for i in range(10))
