"""pfl_theory.safe_files: atomic writes that survive a full disk, never through a link."""

import errno
import os

import pytest
import torch

from pfl_theory import safe_files
from pfl_theory.safe_files import (UnsafeOutputError, append_text, atomic_save,
                                   atomic_write_text, safe_subdir)


def full_disk_after(monkeypatch, budget: int):
    """Every write through safe_files fails with ENOSPC once ``budget`` bytes are used."""
    used = [0]
    real = safe_files.os_write

    def write(fd, data):
        if used[0] + len(data) > budget:
            free = budget - used[0]
            if free > 0:   # a short write, as a real disk does, then the error
                used[0] += real(fd, bytes(data[:free]))
                return free
            raise OSError(errno.ENOSPC, "No space left on device")
        used[0] += len(data)
        return real(fd, data)

    monkeypatch.setattr(safe_files, "os_write", write)


def _leftovers(d):
    return sorted(p.name for p in d.iterdir() if p.name.endswith(".tmp"))


def test_full_disk_keeps_the_previous_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "history.json"
    atomic_write_text(path, "previous")
    full_disk_after(monkeypatch, 100)
    with pytest.raises(OSError) as info:
        atomic_write_text(path, "x" * 100_000)
    assert info.value.errno == errno.ENOSPC and str(path) in str(info.value)
    assert path.read_text() == "previous" and _leftovers(tmp_path) == []


def test_torch_save_on_a_full_disk_is_the_oserror_not_torchs_runtimeerror(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint.pt"
    atomic_save(path, lambda fh: torch.save({"w": torch.ones(3)}, fh))
    full_disk_after(monkeypatch, 4096)
    with pytest.raises(OSError) as info:   # torch alone raises RuntimeError("... pos ...")
        atomic_save(path, lambda fh: torch.save({"w": torch.zeros(100_000)}, fh))
    assert info.value.errno == errno.ENOSPC
    assert torch.equal(torch.load(path, weights_only=True)["w"], torch.ones(3))
    assert _leftovers(tmp_path) == []


def test_complete_write_replaces_and_keeps_normal_permissions(tmp_path):
    path = tmp_path / "a.txt"
    atomic_write_text(path, "one")
    atomic_write_text(path, "two")
    assert path.read_text() == "two" and _leftovers(tmp_path) == []
    mask = os.umask(0)
    os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask   # not mkstemp's 0600


def test_links_are_never_written_through(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("user data")
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.md").symlink_to(outside)
    with pytest.raises(UnsafeOutputError, match="symbolic link"):
        atomic_write_text(out / "report.md", "new")
    with pytest.raises(UnsafeOutputError, match="symbolic link"):
        append_text(out / "report.md", "more")
    assert outside.read_text() == "user data" and (out / "report.md").is_symlink()


def test_safe_subdir_refuses_linked_or_climbing_directories(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "figures").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(UnsafeOutputError):
        safe_subdir(out, "figures/a")
    with pytest.raises(UnsafeOutputError):
        safe_subdir(out, "../x")
    assert list(elsewhere.iterdir()) == []
    assert safe_subdir(out, "b/c").is_dir()


def test_append_adds_to_the_end(tmp_path):
    path = tmp_path / "log.jsonl"
    append_text(path, "a\n")
    append_text(path, "b\n")
    assert path.read_text() == "a\nb\n"
