"""synthetic/real_data/registry.py: the pins are consistent with themselves and with the
datasets' published totals (a typo in a count or a digest's length fails here)."""

from __future__ import annotations

import re

import pytest

from synthetic.real_data import registry

# the publishers' totals (train, test, classes), written from the datasets' pages/papers
TOTALS = {"mnist": (60000, 10000, 10), "fmnist": (60000, 10000, 10),
          "emnist-balanced": (112800, 18800, 47), "emnist-letters": (124800, 20800, 26),
          "emnist-byclass": (697932, 116323, 62), "emnist-bymerge": (697932, 116323, 47),
          "emnist-digits": (240000, 40000, 10), "emnist-mnist": (60000, 10000, 10),
          "cifar10": (50000, 10000, 10), "cifar100": (50000, 10000, 100)}


@pytest.mark.parametrize("name", list(TOTALS))
def test_split_pins_add_up(name):
    e = registry.entry(name)
    train, test, classes = TOTALS[name]
    assert (e.splits["train"].count, e.splits["test"].count) == (train, test)
    for pins in e.splits.values():
        assert pins.num_classes == classes
        if pins.class_counts is not None:
            assert len(pins.class_counts) == classes and sum(pins.class_counts) == pins.count


@pytest.mark.parametrize("name", list(TOTALS))
def test_every_file_is_fetchable_and_every_digest_well_formed(name):
    e = registry.entry(name)
    assert e.urls and all(u.startswith("https://") or u.startswith("http://") for u in e.urls)
    for f in (*e.files, *([e.archive] if e.archive else [])):
        assert f.md5 is None or re.fullmatch(r"[0-9a-f]{32}", f.md5)
        for digest in (f.sha256, f.content_sha256):
            assert digest is None or re.fullmatch(r"[0-9a-f]{64}", digest)
    if e.archive:
        assert all(f.member and f.member.endswith("/" + f.name) for f in e.files)
    else:
        assert all(f.pinned for f in e.files)


def test_idx_content_sizes_match_the_idx_header_arithmetic():
    # images: 16-byte header + n·28·28; labels: 8-byte header + n
    for name in ("mnist", "fmnist"):
        sizes = {f.name: f.content_size for f in registry.entry(name).files}
        assert sizes["train-images-idx3-ubyte.gz"] == 16 + 60000 * 784
        assert sizes["t10k-labels-idx1-ubyte.gz"] == 8 + 10000


def test_override_adds_and_restores():
    e = registry.entry("mnist")
    with registry.override({"other": e}):
        assert registry.entry("other") is e
    with pytest.raises(ValueError, match="unknown dataset 'other'"):
        registry.entry("other")
    assert registry.entry("emnist").name == "emnist-balanced"
