"""pflt/commands/_reproduce_check.py: `pflt reproduce` refuses a bad request before its first
cell — options, then the data, then each cell's setup — with one line and exit 2, and
writes nothing (issue 43.1–43.3)."""

from __future__ import annotations

import gzip
import shutil

import pytest

from pflt.cli import main
from synthetic.real_data import registry

BASE = ["reproduce", "cgpfl_table1_fmnist", "--seeds", "0", "--rounds", "2", "--columns",
        "fmnist_mlr", "--methods", "FedAvg", "CGPFL (K=4)"]
LABEL_SKEW = ["--option", "partition=label-skew", "--option", "size_range=20 30"]
SMALL = ["--option", "clients=4", "--option", "clients_per_round=4", *LABEL_SKEW]


def _one_line_error(capsys, *needles):
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in err, err
    return err


@pytest.mark.parametrize("argv, needle", [
    (["--seeds", "0", "0"], "seed(s) 0 given twice"),
    (["--option", "frobnicate=1"], "pflt run has no option --frobnicate"),
    (["--option", "clients=0"], "--clients must lie in [1, 2147483647], got 0"),
    (["--rounds", "99999999999"], "--rounds must lie in [1, 2147483647]"),
    (["--option", "algorithm=pfedme"], "--option algorithm=…: the row's algorithm"),
    (["--option", "rounds=3"], "--option rounds=…"),
    (["--option", "lam=x"], "invalid float value: 'x'"),
    (["--seeds", "-1"], "--seed must lie in [0,"),
    (["--methods", "pfedme-gm"], "unknown method 'pfedme-gm'"),
    (["--jobs", "0"], "--jobs must lie in [1, 256]"),
])
def test_bad_options_refused_before_anything(argv, needle, tmp_path, capsys):
    # each of these ran cells that failed (exit 0, a nan row) or ran the wrong thing
    out = tmp_path / "out"
    assert main([*BASE, *argv, "--out", str(out), "--runs-dir", str(tmp_path / "r")]) == 2
    _one_line_error(capsys, needle)
    assert not out.exists() and not (tmp_path / "r").exists()


def _corrupt_label_byte(d):
    p = d / "train-labels-idx1-ubyte.gz"
    raw = bytearray(gzip.decompress(p.read_bytes()))
    raw[8] = (raw[8] + 1) % 10
    p.write_bytes(gzip.compress(bytes(raw), mtime=0))


def _swap_train_test(d):
    for kind in ("images-idx3", "labels-idx1"):
        a, b = d / f"train-{kind}-ubyte.gz", d / f"t10k-{kind}-ubyte.gz"
        tmp = d / "tmp"
        a.rename(tmp)
        b.rename(a)
        tmp.rename(b)


def _truncate_images(d):
    p = d / "train-images-idx3-ubyte.gz"
    p.write_bytes(gzip.compress(gzip.decompress(p.read_bytes())[:-784], mtime=0))


def _empty(d):
    shutil.rmtree(d)
    d.mkdir()


@pytest.mark.parametrize("spoil", [_corrupt_label_byte, _swap_train_test, _truncate_images, _empty])
def test_bad_data_refused_before_the_first_cell(spoil, tmp_path, capsys, real_format_data):
    d, entry = real_format_data(tmp_path / "fmnist", "fmnist")
    spoil(d)
    out = tmp_path / "out"
    with registry.override({"fmnist": entry}):
        rc = main([*BASE, *SMALL, "--data-dir", str(d), "--out", str(out),
                   "--runs-dir", str(tmp_path / "r")])
    assert rc == 2
    _one_line_error(capsys, f"fmnist in {d}", "(nothing was run)")
    assert not (out / "cgpfl_table1_fmnist.csv").exists()


def test_corrupt_data_home_refused(tmp_path, capsys, real_format_data, monkeypatch):
    d, entry = real_format_data(tmp_path / "home" / "fmnist", "fmnist")
    _corrupt_label_byte(d)
    monkeypatch.setenv("PFLT_DATA", str(tmp_path / "home"))
    with registry.override({"fmnist": entry}):
        rc = main([*BASE, *SMALL, "--out", str(tmp_path / "out"),
                   "--runs-dir", str(tmp_path / "r")])
    assert rc == 2
    _one_line_error(capsys, "(nothing was run)")


def test_a_cell_its_data_cannot_hold_is_refused_before_the_first(tmp_path, capsys,
                                                                  real_format_data):
    # the smoke test the help once documented: --option clients=4 with the cells' own
    # --clients-per-round 40 > N = 4 (every cell failed, exit 0); and a partition the data
    # cannot give (CGPFL's [400, 5000] images per client from 40 per class)
    d, entry = real_format_data(tmp_path / "fmnist", "fmnist")
    common = ["--data-dir", str(d), "--out", str(tmp_path / "out"), "--runs-dir",
              str(tmp_path / "r")]
    with registry.override({"fmnist": entry}):
        assert main([*BASE, "--option", "clients=4", *LABEL_SKEW, *common]) == 2
        _one_line_error(capsys, "FedAvg on fmnist_mlr: clients_per_round S=40 > number of "
                        "clients N=4 (with --option clients=4, partition=label-skew, "
                        "size_range=20 30) (nothing was run)")
        assert main([*BASE, "--option", "clients=4", "--option", "clients_per_round=4",
                     *common]) == 2
        _one_line_error(capsys, "FedAvg on fmnist_mlr: client 0 needs", "(nothing was run)")
    assert not (tmp_path / "out" / "cgpfl_table1_fmnist.csv").exists()
