"""synthetic/real_data/validate.py and load.py: every load is checked against the pins; a
changed label byte, a missing file, an extra class, a wrong shape are refused with one line;
a recompressed or gunzipped copy verifies on its content digest."""

from __future__ import annotations

import gzip
import hashlib

import numpy as np
import pytest

from synthetic.real_data import registry
from synthetic.real_data.load import load_validated, verify_directory
from synthetic.real_data.registry import PinnedFile, SplitPins
from synthetic.real_data.validate import DataMismatch, check_file, check_split

LABELS = "train-labels-idx1-ubyte.gz"
IMAGES = "train-images-idx3-ubyte.gz"


@pytest.fixture
def good(tmp_path, fakes):
    files = fakes.fake_idx_files()
    fakes.write_files(tmp_path, files)
    return tmp_path, files, fakes.fake_entry("fake", files)


def _rewrite_labels(root, fakes, labels):
    (root / LABELS).write_bytes(gzip.compress(fakes.idx_bytes(labels)))


def test_good_directory_verifies_file_by_file_and_split_by_split(good):
    root, _, entry = good
    with registry.override({"fake": entry}):
        lines = verify_directory("fake", root)
        x, y = load_validated("fake", root)
    assert len(lines) == 6 and all(line.endswith("ok") for line in lines)
    assert x.shape == (90, 1, 28, 28) and np.bincount(y).tolist() == [9] * 10


def test_a_changed_label_byte_is_refused_on_load(good, fakes):
    # mutation caught: class counts not compared (the relabel would pass silently)
    root, _, entry = good
    labels = np.arange(60) % 10
    labels[7] = 3                       # class 7 loses one sample, class 3 gains one
    _rewrite_labels(root, fakes, labels)
    with registry.override({"fake": entry}), pytest.raises(
            DataMismatch, match="fake train split.*expected 6 samples of class 3, found 7"):
        load_validated("fake", root)


def test_an_extra_class_is_refused(good, fakes):
    # mutation caught: label range not checked against the pinned number of classes
    root, _, entry = good
    labels = np.arange(60) % 10
    labels[0] = 10
    _rewrite_labels(root, fakes, labels)
    with registry.override({"fake": entry}), pytest.raises(ValueError, match="labels"):
        load_validated("fake", root)
    ys = np.arange(60) % 11
    pins = SplitPins(60, 10, (1, 28, 28))
    with pytest.raises(DataMismatch, match=r"labels in 0\.\.9, found 0\.\.10"):
        check_split("fake", "train", np.zeros((60, 1, 28, 28), np.float32), ys, pins)


def test_a_wrong_shape_and_a_missing_file_are_refused(good, fakes):
    # mutation caught: image shape not compared with the pin
    root, _, entry = good
    (root / IMAGES).write_bytes(gzip.compress(fakes.idx_bytes(np.zeros((60, 27, 28)))))
    with registry.override({"fake": entry}), pytest.raises(
            DataMismatch, match=r"expected images of shape \(1, 28, 28\), found \(1, 27, 28\)"):
        load_validated("fake", root, "train")
    (root / IMAGES).unlink()
    with registry.override({"fake": entry}), pytest.raises(FileNotFoundError, match=IMAGES):
        verify_directory("fake", root)


def test_a_short_split_is_refused_by_its_count():
    # mutation caught: sample count not compared
    pins = SplitPins(5, 2, (1, 2, 2), (3, 2))
    x = np.zeros((4, 1, 2, 2), np.float32)
    with pytest.raises(DataMismatch, match="expected 5 samples, found 4 images"):
        check_split("d", "test", x, np.array([0, 0, 1, 1]), pins)
    with pytest.raises(DataMismatch, match="dtype float32, found float64"):
        check_split("d", "test", np.zeros((5, 1, 2, 2)), np.array([0, 0, 0, 1, 1]), pins)


def test_recompressed_and_gunzipped_copies_verify_on_content(tmp_path):
    # mutation caught: content digest taken of the compressed bytes (Debian's recompressed
    # Fashion-MNIST would be refused), or a changed content accepted
    raw = bytes(range(256)) * 40
    published = gzip.compress(raw, compresslevel=9, mtime=0)
    pin = PinnedFile("f.gz", md5=hashlib.md5(published).hexdigest(),
                     content_sha256=hashlib.sha256(raw).hexdigest(), content_size=len(raw))
    (tmp_path / "f.gz").write_bytes(published)
    assert check_file(tmp_path / "f.gz", pin) == "md5"
    recompressed = gzip.compress(raw, compresslevel=1, mtime=12345)
    assert recompressed != published
    (tmp_path / "f.gz").write_bytes(recompressed)
    assert check_file(tmp_path / "f.gz", pin) == "content sha256"
    (tmp_path / "f").write_bytes(raw)
    assert check_file(tmp_path / "f", pin) == "content sha256"
    (tmp_path / "f").write_bytes(raw[:-1] + b"x")
    with pytest.raises(DataMismatch, match="expected content sha256"):
        check_file(tmp_path / "f", pin)


def test_md5_only_pin_refuses_a_changed_file_with_expected_and_found(tmp_path):
    data = b"abc" * 100
    pin = PinnedFile("g.bin", md5=hashlib.md5(data).hexdigest(), size=len(data))
    (tmp_path / "g.bin").write_bytes(data[:-1] + b"d")
    found = hashlib.md5(data[:-1] + b"d").hexdigest()
    with pytest.raises(DataMismatch, match=f"expected md5 {pin.md5}, found {found}"):
        check_file(tmp_path / "g.bin", pin)


def test_embedded_datasets_are_checked_on_load_too(monkeypatch):
    # mutation caught: the embedded path skipping the validation
    pytest.importorskip("sklearn", reason="the 'data' extra provides scikit-learn")
    from synthetic import sources

    sources._embedded_pool.cache_clear()
    x, y = sources._embedded_pool("digits")
    assert np.bincount(y).tolist() == [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]
    wrong = SplitPins(1797, 10, (1, 8, 8), (180,) * 9 + (177,))
    monkeypatch.setitem(registry.EMBEDDED_PINS, "digits", wrong)
    sources._embedded_pool.cache_clear()
    try:
        with pytest.raises(DataMismatch, match="digits embedded split"):
            sources._embedded_pool("digits")
    finally:
        sources._embedded_pool.cache_clear()
