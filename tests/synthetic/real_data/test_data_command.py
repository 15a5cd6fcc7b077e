"""pflt/commands/data.py (`pflt data fetch|verify|list`) and every command that reads a
dataset directory: a bad directory is one line on stderr and exit code 2."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from pflt.cli import main
from synthetic.real_data import registry


@pytest.fixture
def fake(tmp_path, fakes, http_server, monkeypatch):
    """A fake 'fmnist' served by the local server, pinned; PFLT_DATA in tmp_path."""
    monkeypatch.setenv("PFLT_DATA", str(tmp_path / "home"))
    files = fakes.fake_idx_files()
    fakes.serve(http_server, "fm", files)
    entry = fakes.fake_entry("fmnist", files, urls=[http_server.url("fm")], home="fmnist")
    with registry.override({"fmnist": entry}):
        yield files


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "error:" in err
    return err


def test_fetch_then_verify_then_list(fake, tmp_path, capsys):
    assert main(["data", "fetch", "fmnist", "--no-progress"]) == 0
    home = tmp_path / "home" / "fmnist"
    assert sorted(p.name for p in home.glob("*.gz")) == sorted(fake)
    assert main(["data", "verify", "fmnist"]) == 0
    assert "fmnist: verified" in capsys.readouterr().out
    assert main(["data", "list"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines()
               if line.startswith("fmnist "))
    assert str(home) in row and "digests ok" in row and "pflt data fetch fmnist" in row
    (home / "t10k-labels-idx1-ubyte.gz").write_bytes(b"not the pinned bytes")
    assert main(["data", "list"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines()
               if line.startswith("fmnist "))
    assert "digest MISMATCH: t10k-labels-idx1-ubyte.gz" in row


def test_fetch_into_dir_from_a_mirror(fake, tmp_path, http_server, fakes, capsys):
    fakes.serve(http_server, "mine", fake)
    out = tmp_path / "elsewhere"
    assert main(["data", "fetch", "fmnist", "--dir", str(out), "--mirror",
                 http_server.url("mine"), "--no-progress"]) == 0
    assert all(p.startswith("/mine/") for p, _ in http_server.log)
    assert f"--data fmnist:{out}" in capsys.readouterr().out


@pytest.mark.parametrize("damage", ["label byte", "missing file", "extra class", "shape"])
def test_a_bad_directory_is_refused_by_every_command_that_reads_it(fake, fakes, tmp_path,
                                                                   damage, capsys):
    # mutation caught: any command reading the directory without the validation
    d = fakes.write_files(tmp_path / "d", fake)
    labels = np.arange(60) % 10
    if damage == "label byte":
        labels[0] = 1
    elif damage == "extra class":
        labels[0] = 10
    if damage in ("label byte", "extra class"):
        (d / "train-labels-idx1-ubyte.gz").write_bytes(gzip.compress(fakes.idx_bytes(labels)))
    elif damage == "missing file":
        (d / "t10k-labels-idx1-ubyte.gz").unlink()
    else:
        images = np.zeros((60, 28, 27))
        (d / "train-images-idx3-ubyte.gz").write_bytes(gzip.compress(fakes.idx_bytes(images)))
    assert main(["data", "verify", f"fmnist:{d}"]) == 2
    _one_line_error(capsys)
    run = ["run", "--data", f"fmnist:{d}", "--clients", "3", "--partition", "iid",
           "--rounds", "1", "--out", str(tmp_path / "r"), "--no-progress"]
    assert main(run) == 2
    _one_line_error(capsys)
    assert not (tmp_path / "r" / "history.json").exists()


def test_emnist_split_option_and_bad_names(capsys):
    assert main(["data", "verify", "mnist:/nowhere", "--emnist-split", "letters"]) == 2
    assert "--emnist-split applies to NAME emnist" in _one_line_error(capsys)
    assert main(["data", "fetch", "imagenet"]) == 2
    assert "unknown dataset 'imagenet'" in _one_line_error(capsys)
    assert main(["data", "verify", "emnist:/nowhere", "--emnist-split", "letters"]) == 2
    assert "emnist-letters" in _one_line_error(capsys)


def test_run_never_downloads_and_says_how_to_fetch(tmp_path, monkeypatch, capsys):
    # mutation caught: `pflt run` falling back to a download when the data are missing
    import dataclasses
    import urllib.request

    calls = []
    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: calls.append(a))
    monkeypatch.setenv("PFLT_DATA", str(tmp_path / "empty"))
    entry = dataclasses.replace(registry.entry("fmnist"), system_dirs=())
    with registry.override({"fmnist": entry}):
        code = main(["run", "--data", "fmnist", "--clients", "3", "--partition", "iid",
                     "--rounds", "1", "--out", str(tmp_path / "r"), "--no-progress"])
    assert code == 2 and calls == []
    assert "pflt data fetch fmnist" in _one_line_error(capsys)


def test_importing_the_cli_and_loaders_does_not_import_the_fetcher():
    # mutation caught: a module-level import of the downloader on the load path
    import subprocess
    import sys

    code = ("import sys, pflt.cli, pflt.commands.run, pflt.commands.data, synthetic.sources, "
            "synthetic.real_data.load, synthetic.real_data.home; "
            "print('synthetic.real_data.fetch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"


def test_a_file_url_mirror_works_offline(tmp_path, fakes, monkeypatch):
    # mutation caught: mirrors restricted to http(s)
    files = fakes.fake_idx_files()
    src = fakes.write_files(tmp_path / "mirror", files)
    entry = fakes.fake_entry("fmnist", files, urls=["http://127.0.0.1:9/unreachable/"])
    with registry.override({"fmnist": entry}):
        assert main(["data", "fetch", "fmnist", "--dir", str(tmp_path / "out"), "--mirror",
                     src.as_uri(), "--no-progress"]) == 0
    for name, data in files.items():
        assert (tmp_path / "out" / name).read_bytes() == data


def test_flower_sim_refuses_a_changed_label_byte(fake, fakes, tmp_path, capsys):
    # mutation caught: the Flower path loading real data without the validation
    pytest.importorskip("flwr", reason="the 'flower' extra provides flwr")
    d = fakes.write_files(tmp_path / "d", fake)
    labels = np.arange(60) % 10
    labels[5] = 0
    (d / "train-labels-idx1-ubyte.gz").write_bytes(gzip.compress(fakes.idx_bytes(labels)))
    assert main(["flower-sim", "--data", f"fmnist:{d}", "--clients", "3", "--partition", "iid",
                 "--rounds", "1", "--out", str(tmp_path / "f")]) == 2
    assert "expected 6 samples of class 0, found 7" in _one_line_error(capsys)


@pytest.mark.parametrize("value, shown", [("inf", "inf"), ("nan", "nan"), ("-1", "-1.0"),
                                          ("1e300", "1e+300")])
def test_a_timeout_that_is_not_a_number_of_seconds_is_one_line(tmp_path, capsys, value,
                                                                 shown):
    # mutation caught: only `timeout <= 0` refused (inf -> "timestamp out of range for
    # platform time_t" from the socket, nan accepted)
    out = tmp_path / "d"
    assert main(["data", "fetch", "fmnist", "--dir", str(out), "--timeout", value]) == 2
    assert _one_line_error(capsys).endswith(f"--timeout must be a number of seconds in "
                                            f"(0, 86400], got {shown}")
    assert not out.exists()


def test_credentials_in_a_mirror_are_named_and_never_echoed(tmp_path, capsys):
    # mutation caught: the URL tried as a source ("nonnumeric port: 'pass@host'", a
    # DNS-looking error) and the password printed back
    assert main(["data", "fetch", "fmnist", "--dir", str(tmp_path / "d"), "--mirror",
                 "https://alice:s3cret@mirror.example/fm/"]) == 2
    err = _one_line_error(capsys)
    assert "credentials in the URL" in err and "s3cret" not in err and "alice" not in err
    assert main(["data", "fetch", "fmnist", "--dir", str(tmp_path / "d"), "--mirror",
                 "mirror.example/fm"]) == 2
    assert "not a base URL" in _one_line_error(capsys)


def test_an_unverifiable_plain_copy_is_not_called_verified(tmp_path, fakes, http_server,
                                                           capsys):
    # mutation caught: a decompressed copy "verified" on its size alone when only the
    # published .gz bytes are pinned (MNIST's pins): the loader would read it unchecked
    import dataclasses

    files = fakes.fake_idx_files()
    fakes.serve(http_server, "m", files)
    entry = fakes.fake_entry("mnist", files, urls=[http_server.url("m")])
    entry = dataclasses.replace(entry, files=tuple(
        dataclasses.replace(p, content_size=len(gzip.decompress(files[p.name])))
        for p in entry.files))
    d = fakes.write_files(tmp_path / "d", files)
    raw = bytearray(gzip.decompress(files["train-images-idx3-ubyte.gz"]))
    raw[-1] ^= 1                                   # same size, one pixel changed
    (d / "train-images-idx3-ubyte").write_bytes(bytes(raw))
    with registry.override({"mnist": entry}):
        assert main(["data", "fetch", "mnist", "--dir", str(d), "--no-progress"]) == 2
    err = _one_line_error(capsys)
    assert f"{d / 'train-images-idx3-ubyte'}: the loader reads this decompressed copy" in err
    assert (d / "train-images-idx3-ubyte").read_bytes() == bytes(raw)   # not deleted
