"""synthetic/real_data/home.py: $PFLT_DATA, else the user cache; OS package directories;
`--data NAME` without a directory; the real Debian Fashion-MNIST when installed."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from synthetic.real_data import registry
from synthetic.real_data.home import data_home, find_dataset, resolve_dataset
from synthetic.sources import DataSpec, build_federation

DEBIAN_FMNIST = Path("/usr/share/datasets/fashion-mnist")


def test_pflt_data_wins_over_the_user_cache(tmp_path, monkeypatch):
    # mutation caught: $PFLT_DATA ignored
    monkeypatch.setenv("PFLT_DATA", str(tmp_path / "d"))
    assert data_home() == tmp_path / "d"
    monkeypatch.delenv("PFLT_DATA")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "c"))
    if sys.platform.startswith("linux"):      # the XDG cache directory
        assert data_home() == tmp_path / "c" / "pfl-theory" / "data"


def test_data_without_a_directory_reads_the_home_then_system_dirs(tmp_path, monkeypatch,
                                                                   fakes):
    # mutation caught: the home not searched / system directories not searched
    files = fakes.fake_idx_files()
    monkeypatch.setenv("PFLT_DATA", str(tmp_path / "home"))
    system = fakes.write_files(tmp_path / "usr-share", files)
    entry = fakes.fake_entry("fmnist", files, home="fmnist", system_dirs=[system])
    with registry.override({"fmnist": entry}):
        assert find_dataset("fmnist") == system
        fakes.write_files(tmp_path / "home" / "fmnist", files)
        assert find_dataset("fmnist") == tmp_path / "home" / "fmnist"
        fed = build_federation(DataSpec(data="fmnist", num_clients=3, partition="iid"),
                               device="cpu")
    assert int(fed.train.counts.sum() + fed.test.counts.sum()) == 90


def test_not_found_says_where_it_looked_and_how_to_fetch(tmp_path, monkeypatch, fakes):
    monkeypatch.setenv("PFLT_DATA", str(tmp_path))
    entry = fakes.fake_entry("mnist", fakes.fake_idx_files(), home="mnist")
    with registry.override({"mnist": entry}), pytest.raises(FileNotFoundError) as err:
        resolve_dataset("mnist")
    msg = str(err.value)
    assert "\n" not in msg and str(tmp_path / "mnist") in msg
    assert "pflt data fetch mnist" in msg and "--data mnist:DIR" in msg


@pytest.mark.skipif(not DEBIAN_FMNIST.is_dir(),
                    reason="Debian's Fashion-MNIST is absent: apt-get install "
                    "dataset-fashion-mnist")
def test_debian_fashion_mnist_verifies_with_the_published_counts(monkeypatch, tmp_path):
    # mutation caught: any pinned content digest or count that does not match the real data
    from synthetic.real_data.load import load_validated, verify_directory

    monkeypatch.setenv("PFLT_DATA", str(tmp_path))     # nothing in the home: the system dir
    assert find_dataset("fmnist") == DEBIAN_FMNIST
    lines = verify_directory("fmnist", DEBIAN_FMNIST)
    assert sum("content sha256 ok" in line for line in lines) == 4
    for split, n, per in (("train", 60000, 6000), ("test", 10000, 1000)):
        x, y = load_validated("fmnist", DEBIAN_FMNIST, split)
        assert x.shape == (n, 1, 28, 28) and x.dtype == np.float32
        assert np.bincount(y).tolist() == [per] * 10
