"""synthetic/real_data/part_files.py through the fetcher, against the local HTTP server of
conftest.py (127.0.0.1): whatever is planted under a download's temporary name — a symbolic
link out of the directory, a hard link, a foreign file, a linked sidecar or lock, a fifo, a
directory — no byte lands outside ``--dir``, and a file the fetch did not write is never
resumed (issue 43's data loss: ``d/X.part -> ../victim.txt`` got 26 MB appended)."""

from __future__ import annotations

import os

import pytest

from synthetic.real_data import registry
from synthetic.real_data.fetch import fetch
from synthetic.real_data.part_files import LocalFileError, open_part, resumable_size

NAME = "train-images-idx3-ubyte.gz"
VICTIM = b"precious bytes, not a download\n"


@pytest.fixture
def served(tmp_path, fakes, http_server):
    """(directory to fetch into, the victim file beside it, the served files, fetch())."""
    files = fakes.fake_idx_files()
    fakes.serve(http_server, "good", files)
    entry = fakes.fake_entry("fake", files, urls=[http_server.url("good")])
    d = tmp_path / "d"
    d.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_bytes(VICTIM)

    def run():
        with registry.override({"fake": entry}):
            return fetch("fake", d, progress=None)

    return d, victim, files, run


def _all_verified(d, files):
    for name, data in files.items():
        assert (d / name).read_bytes() == data, name
        assert not (d / f"{name}.part").exists()


def test_a_symlink_planted_as_the_part_leaves_its_target_untouched(served, http_server):
    # mutation caught: open(part, "ab") (the old fetcher: follows the link, resumes "from
    # byte 31" with Range and appends the download to the victim)
    d, victim, files, run = served
    os.symlink("../victim.txt", d / f"{NAME}.part")
    run()
    assert victim.read_bytes() == VICTIM
    assert http_server.requests_for(f"/good/{NAME}") == [None]      # no Range: not resumed
    _all_verified(d, files)


def test_a_dangling_symlink_part_creates_nothing_outside(served, tmp_path):
    # mutation caught: O_CREAT without O_NOFOLLOW/O_EXCL (creates the link's target)
    d, _, files, run = served
    os.symlink("../created-outside", d / f"{NAME}.part")
    run()
    assert not (tmp_path / "created-outside").exists()
    _all_verified(d, files)


def test_a_hard_link_planted_as_the_part_is_not_written(served, http_server):
    # mutation caught: resuming a regular file without the link-count / sidecar check
    d, victim, files, run = served
    os.link(victim, d / f"{NAME}.part")
    run()
    assert victim.read_bytes() == VICTIM
    assert http_server.requests_for(f"/good/{NAME}") == [None]
    _all_verified(d, files)


def test_a_foreign_part_with_a_forged_prefix_is_not_resumed(served, http_server):
    # mutation caught: resuming any regular file (the sidecar's device/inode not checked):
    # the first half of the file, with one byte changed, would be kept and completed
    d, _, files, run = served
    forged = bytearray(files[NAME][: len(files[NAME]) // 2])
    forged[100] ^= 0xFF
    (d / f"{NAME}.part").write_bytes(bytes(forged))
    run()
    assert http_server.requests_for(f"/good/{NAME}") == [None]
    _all_verified(d, files)


def test_a_copied_sidecar_does_not_vouch_for_another_file(tmp_path):
    # mutation caught: a sidecar trusted without comparing its inode to the part's
    part = tmp_path / "x.part"
    with open_part(part, append=False) as fh:
        fh.write(b"abc")
    assert resumable_size(part) == 3
    other = tmp_path / "y.part"
    other.write_bytes(b"12345")
    (tmp_path / "y.part.owner").write_bytes((tmp_path / "x.part.owner").read_bytes())
    assert resumable_size(other) == 0 and not other.exists()


def test_linked_sidecar_and_lock_are_not_followed(served, tmp_path):
    # mutation caught: the sidecar written through a planted link; the lock opened with
    # O_CREAT through a link (creates its target)
    d, victim, files, run = served
    os.symlink("../victim.txt", d / f"{NAME}.part.owner")
    os.symlink("../lock-target", d / ".pflt-fetch.lock")
    with pytest.raises(LocalFileError, match=r"\.pflt-fetch\.lock"):
        run()
    assert not (tmp_path / "lock-target").exists()
    os.unlink(d / ".pflt-fetch.lock")
    run()
    assert victim.read_bytes() == VICTIM
    _all_verified(d, files)


def test_a_fifo_as_the_part_neither_blocks_nor_is_kept(served):
    # mutation caught: opening the part for writing without O_NONBLOCK (hangs on a fifo)
    d, _, files, run = served
    os.mkfifo(d / f"{NAME}.part")
    run()
    _all_verified(d, files)


def test_a_directory_as_the_part_is_one_line_naming_it(served):
    # mutation caught: rmtree of whatever sits under the name (data loss), or a traceback
    d, _, _, run = served
    keep = d / f"{NAME}.part" / "mine.txt"
    keep.parent.mkdir()
    keep.write_text("mine")
    with pytest.raises(LocalFileError) as err:
        run()
    assert f"{NAME}.part" in str(err.value.filename) and "\n" not in str(err.value)
    assert keep.read_text() == "mine"


def test_the_fetchs_own_part_is_resumed(served, http_server, fakes):
    # mutation caught: refusing every existing part (a dropped connection restarted from 0)
    d, _, files, run = served
    cut = len(files[NAME]) // 3
    fakes.serve(http_server, "good", {NAME: files[NAME]}, mode="drop", cut=cut)
    run()
    assert http_server.requests_for(f"/good/{NAME}") == [None, f"bytes={cut}-"]
    _all_verified(d, files)
