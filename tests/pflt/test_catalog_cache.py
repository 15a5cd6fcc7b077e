"""The catalogue cache (:mod:`pflt.catalog_cache`): keyed by the sources, so an edited source
is never answered from an old file; skipped with plugins; stores only what JSON keeps."""

from __future__ import annotations

import json
import sys
import types

import pytest

from pflt import catalog, catalog_cache


@pytest.fixture
def sources(tmp_path, monkeypatch):
    """A package ``fake_sources`` standing for the registries' sources, and an empty
    user cache."""
    package = tmp_path / "src" / "fake_sources"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("NAMES = ['a']\n")
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    monkeypatch.setattr(catalog_cache, "SOURCE_PACKAGES", ("fake_sources",))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("PFLT_PLUGINS", raising=False)
    return package


def _counting(value):
    calls = []

    def build():
        calls.append(1)
        return value() if callable(value) else value
    return build, calls


def test_an_edited_source_is_not_answered_from_the_old_file(sources):
    init = sources / "__init__.py"
    build, calls = _counting(lambda: [init.read_text()])
    first = catalog_cache.cached("names", build)
    assert catalog_cache.cached("names", build) == first and len(calls) == 1   # from the file
    key = catalog_cache.sources_key()
    init.write_text("NAMES = ['b']\n")                    # same length, other bytes
    assert catalog_cache.sources_key() != key
    assert catalog_cache.cached("names", build) == ["NAMES = ['b']\n"] and len(calls) == 2


def test_a_new_source_file_changes_the_key(sources):
    key = catalog_cache.sources_key()
    (sources / "more.py").write_text("")
    assert catalog_cache.sources_key() != key


def test_plugins_bypass_the_cache(sources, monkeypatch):
    build, calls = _counting(["x"])
    monkeypatch.setenv("PFLT_PLUGINS", "my_plugin")
    catalog_cache.cached("names", build)
    catalog_cache.cached("names", build)
    assert len(calls) == 2 and not catalog_cache.cache_dir().exists()


@pytest.mark.parametrize("value", [[(1, 2)], [float("nan")], []])
def test_what_json_does_not_give_back_equal_is_not_stored(sources, value):
    build, calls = _counting(value)
    catalog_cache.cached("names", build)
    catalog_cache.cached("names", build)
    assert len(calls) == 2


def test_an_unstorable_answer_is_rebuilt(sources):
    build, calls = _counting(["x"])
    catalog_cache.cached("names", build, storable=lambda v: False)
    catalog_cache.cached("names", build, storable=lambda v: False)
    assert len(calls) == 2


def test_the_newest_files_are_kept(sources, monkeypatch):
    init = sources / "__init__.py"
    for i in range(catalog_cache.KEEP + 3):
        init.write_text(f"N = {i}\n")
        catalog_cache.cached("names", lambda: [i])
    files = sorted(catalog_cache.cache_dir().glob("names-*.json"))
    assert len(files) == catalog_cache.KEEP
    assert (catalog_cache.cache_dir() / f"names-{catalog_cache.sources_key()}.json") in files


def test_a_read_only_cache_still_answers(sources, tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))     # not a directory
    assert catalog_cache.cached("names", lambda: ["x"]) == ["x"]


def test_the_cached_catalogue_equals_the_registry(tmp_path, monkeypatch):
    """Algorithms (with every hyper-parameter default) survive the file exactly."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("PFLT_PLUGINS", raising=False)
    live = catalog.live_algorithms()
    assert catalog_cache.cached("algorithms", catalog.live_algorithms) == live
    stored = json.loads(next(catalog_cache.cache_dir().glob("algorithms-*.json")).read_text())
    assert stored == live
    assert [catalog.AlgorithmInfo.from_dict(d).as_dict() for d in stored] == live
    assert catalog.headline_models()["ppfe"] == "ensemble"       # PPFE.headline_model


def test_a_registry_filled_in_this_process_is_asked(monkeypatch):
    monkeypatch.setitem(sys.modules, "fake_registry", types.SimpleNamespace(_REGISTRY={"a": 1}))
    monkeypatch.setitem(sys.modules, "empty_registry", types.SimpleNamespace(_REGISTRY={}))
    assert catalog.registered_here("fake_registry")
    assert not catalog.registered_here("empty_registry")
    assert not catalog.registered_here("not_imported_registry")


@pytest.mark.parametrize("source", ["catalog.py", "base.py", "fedavg.py", "cgpfl_theory.py",
                                    "sources.py", "driver.py"])
def test_the_key_covers_every_source_an_entry_is_read_from(monkeypatch, source):
    """The catalogue's own parsing (pflt/catalog.py), the engine's fields (base.py), a
    method, a check module, the datasets (synthetic/sources.py) and the figure driver."""
    from pathlib import Path

    key = catalog_cache.sources_key()
    read = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes",
                        lambda self: read(self) + (b"#" if self.name == source else b""))
    assert catalog_cache.sources_key() != key
