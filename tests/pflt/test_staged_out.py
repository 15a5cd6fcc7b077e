"""pflt.staged_out: files written aside are published by renames; the previous run's files
are removed only where that run recorded them, never through a link or outside OUT."""

import json

import pytest

from pfl_theory.safe_files import UnsafeOutputError
from pflt.staged_out import manifest_path, staged


def _write(stage, name, text="x"):
    path = stage / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_publish_replaces_recorded_files_and_keeps_everything_else(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    with staged(out, "cmd") as stage:
        _write(stage, "a.txt", "1")
        _write(stage, "sub/b.txt", "1")
    (out / "sub" / "user.txt").write_text("mine")
    (out / "c.txt").write_text("mine")           # never published: not ours
    with staged(out, "cmd") as stage:
        _write(stage, "a.txt", "2")
    assert (out / "a.txt").read_text() == "2"
    assert not (out / "sub" / "b.txt").exists()   # ours, not written again: removed
    assert (out / "sub" / "user.txt").read_text() == "mine"
    assert (out / "c.txt").read_text() == "mine"
    assert json.loads(manifest_path(out, "cmd").read_text())["files"] == ["a.txt"]
    assert [p.name for p in out.iterdir() if p.name.startswith(".pflt-staging")] == []


def test_a_failure_inside_the_block_publishes_nothing(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    (out / "a.txt").write_text("previous")
    with pytest.raises(RuntimeError):
        with staged(out, "cmd") as stage:
            _write(stage, "a.txt", "new")
            raise RuntimeError("boom")
    assert (out / "a.txt").read_text() == "previous"
    assert sorted(p.name for p in out.iterdir()) == ["a.txt"]


def test_a_tampered_record_deletes_nothing_outside_or_through_links(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "f.txt").write_text("keep")
    (out / "ln").symlink_to(linked, target_is_directory=True)
    (out / "lf").symlink_to(victim)
    manifest_path(out, "cmd").write_text(json.dumps(
        {"files": ["../victim.txt", str(victim), "ln/f.txt", "lf", 3, ""]}))
    with staged(out, "cmd") as stage:
        _write(stage, "a.txt")
    assert victim.read_text() == "keep" and (linked / "f.txt").read_text() == "keep"
    assert (out / "lf").is_symlink()


def test_a_link_at_a_published_name_is_refused_before_anything_moves(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    target = tmp_path / "t.txt"
    target.write_text("keep")
    (out / "b.txt").symlink_to(target)
    with pytest.raises(UnsafeOutputError, match="symbolic link"):
        with staged(out, "cmd") as stage:
            _write(stage, "a.txt")
            _write(stage, "b.txt")
    assert not (out / "a.txt").exists() and target.read_text() == "keep"


def test_staging_directories_of_killed_runs_are_cleaned_only_when_marked(tmp_path):
    out = tmp_path / "o"
    (out / ".pflt-staging-1-abc").mkdir(parents=True)
    (out / ".pflt-staging-1-abc" / ".pflt-staging").write_text("")
    (out / ".pflt-staging-2-user").mkdir()            # no mark: not ours
    with staged(out, "cmd"):
        pass
    assert not (out / ".pflt-staging-1-abc").exists()
    assert (out / ".pflt-staging-2-user").is_dir()


def test_keep_previous_keeps_and_still_records_the_files_not_written_again(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    with staged(out, "cmd") as stage:
        _write(stage, "a.txt", "1")
        _write(stage, "b.txt", "1")
    with staged(out, "cmd") as stage:
        _write(stage, "a.txt", "2")
        stage.keep_previous = True            # e.g. the module writing b.txt failed
    assert (out / "a.txt").read_text() == "2" and (out / "b.txt").read_text() == "1"
    assert json.loads(manifest_path(out, "cmd").read_text())["files"] == ["a.txt", "b.txt"]
    with staged(out, "cmd") as stage:
        _write(stage, "a.txt", "3")
    assert not (out / "b.txt").exists()       # still ours: removed by a complete run


def test_verify_under_a_file_size_limit_names_the_output_file(tmp_path):
    """``ulimit -f``: the write fails with EFBIG, which carries no file name; the error
    said ``[Errno 27] File too large`` (then the staging copy's name); it names
    ``OUT/results.json``, one line, exit 2, and OUT keeps nothing half written."""
    import resource
    import subprocess
    import sys
    from pathlib import Path

    out = tmp_path / "v"
    limit = 2048          # bytes: more than the staging mark, less than results.json

    def limited():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-m", "pflt", "verify", "--only",
                           "pfedme.envelope_gradient", "--out", str(out), "--no-progress"],
                          cwd=root, capture_output=True, text=True, preexec_fn=limited,
                          timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == \
        f"pflt verify: error: {out / 'results.json'}: File too large"
    # nothing published; the finished check is kept for a resume (OUT/partial)
    assert sorted(p.name for p in out.iterdir() if p.name != "partial") in ([], [".lock"])
