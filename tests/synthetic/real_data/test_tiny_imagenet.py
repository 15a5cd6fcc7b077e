"""synthetic/real_data/tiny_imagenet.py on a small fake tree in the real layout (wnids.txt,
train/<wnid>/images/*.JPEG, val/images + val/val_annotations.txt): every validation class
gets its 50 images, each image its own class (issue 42 item 5)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from PIL import Image

from synthetic.real_data import registry
from synthetic.real_data.load import load_validated
from synthetic.real_data.tiny_imagenet import FOLDER, load_tiny_imagenet
from synthetic.real_data.validate import DataMismatch, check_split

WNIDS = ["n01443537", "n01629819", "n01641577", "n01644900"]
TRAIN, VAL = 5, 50


def _jpeg(path, k: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # class k is a flat grey of level 40 + 50 k: JPEG keeps a flat image's level within ±2
    Image.fromarray(np.full((64, 64, 3), 40 + 50 * k, dtype=np.uint8)).save(path, "JPEG")


def _tree(root):
    base = root / FOLDER
    base.mkdir(parents=True)
    (base / "wnids.txt").write_text("\n".join(WNIDS) + "\n")
    for k, w in enumerate(WNIDS):
        for i in range(TRAIN):
            _jpeg(base / "train" / w / "images" / f"{w}_{i}.JPEG", k)
    # validation images interleaved across classes in one folder, as published
    order = np.random.default_rng(0).permutation(len(WNIDS) * VAL)
    lines = []
    for n, j in enumerate(order):
        k = int(j) % len(WNIDS)
        _jpeg(base / "val" / "images" / f"val_{n}.JPEG", k)
        lines.append(f"val_{n}.JPEG\t{WNIDS[k]}\t0\t0\t63\t63")
    (base / "val" / "val_annotations.txt").write_text("\n".join(lines) + "\n")
    return base


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return _tree(tmp_path_factory.mktemp("tiny"))


def test_each_validation_class_gets_its_50_images_and_each_image_its_class(tree):
    # mutation caught: labels from the folder (every validation image class 0), wnids order
    # ignored, annotations read off by one line
    x, y = load_tiny_imagenet(tree.parent, subset="test")
    assert x.shape == (len(WNIDS) * VAL, 3, 64, 64) and x.dtype == np.float32
    assert np.bincount(y, minlength=len(WNIDS)).tolist() == [VAL] * len(WNIDS)
    level = (x.mean(axis=(1, 2, 3)) * 255 - 40) / 50      # the class drawn into each image
    np.testing.assert_allclose(level, y, atol=0.1)         # JPEG: ±2 grey levels of 50


def test_train_and_all(tree):
    x, y = load_tiny_imagenet(tree, subset="train")
    assert np.bincount(y).tolist() == [TRAIN] * len(WNIDS)
    np.testing.assert_allclose((x.mean(axis=(1, 2, 3)) * 255 - 40) / 50, y, atol=0.1)
    xa, ya = load_tiny_imagenet(tree, subset="all")
    assert len(ya) == len(WNIDS) * (TRAIN + VAL) and (ya[:len(y)] == y).all()


def test_the_pins_refuse_a_loader_that_labels_every_validation_image_alike(tree):
    pins = registry.SplitPins(len(WNIDS) * VAL, len(WNIDS), (3, 64, 64), (VAL,) * len(WNIDS))
    x, y = load_tiny_imagenet(tree, subset="test")
    check_split("tinyimagenet", "test", x, y, pins)
    with pytest.raises(DataMismatch):
        check_split("tinyimagenet", "test", x, np.zeros_like(y), pins)


def test_registered_and_validated_on_load(tree):
    entry = registry.entry("tinyimagenet")
    assert entry.archive.md5 == "90528d7ca1a48142e341f4ef8d21d0de"
    assert entry.splits["test"].class_counts == (50,) * 200
    small = dataclasses.replace(entry, splits={
        "train": registry.SplitPins(len(WNIDS) * TRAIN, len(WNIDS), (3, 64, 64),
                                    (TRAIN,) * len(WNIDS)),
        "test": registry.SplitPins(len(WNIDS) * VAL, len(WNIDS), (3, 64, 64),
                                   (VAL,) * len(WNIDS))})
    with registry.override({"tinyimagenet": small}):
        x, y = load_validated("tinyimagenet", tree.parent, subset="all")
    assert len(y) == len(WNIDS) * (TRAIN + VAL)


def test_bad_trees_are_one_line_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="wnids.txt is missing"):
        load_tiny_imagenet(tmp_path)
    base = _tree(tmp_path / "t")
    ann = base / "val" / "val_annotations.txt"
    ann.write_text(ann.read_text().replace(WNIDS[2], "n99999999", 1))
    with pytest.raises(ValueError, match="line .*wnid of wnids.txt"):
        load_tiny_imagenet(base, subset="test")
    with pytest.raises(ValueError, match="subset"):
        load_tiny_imagenet(base, subset="val")


def test_pflt_run_trains_on_it(tree, tmp_path):
    # the dataset is usable end to end: `pflt run --data tinyimagenet:DIR` with the pins of
    # the small tree (mutation caught: the loader registered under another name)
    import json

    from pflt.cli import main

    small = dataclasses.replace(registry.entry("tinyimagenet"), splits={
        "train": registry.SplitPins(len(WNIDS) * TRAIN, len(WNIDS), (3, 64, 64)),
        "test": registry.SplitPins(len(WNIDS) * VAL, len(WNIDS), (3, 64, 64))})
    out = tmp_path / "run"
    with registry.override({"tinyimagenet": small}):
        assert main(["run", "--algorithm", "fedavg", "--data", f"tinyimagenet:{tree.parent}",
                     "--model", "cnn", "--clients", "4", "--classes-per-client", "2",
                     "--size-range", "20", "20", "--rounds", "1", "--clients-per-round", "2",
                     "--out", str(out), "--overwrite", "--no-progress"]) == 0
    assert 0.0 <= json.loads((out / "summary.json").read_text())["global_accuracy"] <= 1.0
