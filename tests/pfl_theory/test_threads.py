import pytest
import torch

from pfl_theory import threads


def test_default_and_override(monkeypatch):
    monkeypatch.delenv("PFLT_THREADS", raising=False)
    assert threads.default_threads() == 1
    monkeypatch.setenv("PFLT_THREADS", "2")
    assert threads.default_threads() == 2
    before = torch.get_num_threads()
    try:
        assert threads.set_torch_threads() == 2 and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("bad", ["0", "-1", "two"])
def test_bad_env(monkeypatch, bad):
    monkeypatch.setenv("PFLT_THREADS", bad)
    with pytest.raises(ValueError, match="PFLT_THREADS"):
        threads.default_threads()


def test_single_blas_thread_is_a_context_manager():
    import numpy as np
    with threads.single_blas_thread():
        a = np.linalg.svd(np.eye(3))[1]
    assert np.allclose(a, 1.0)


def test_run_threads_default_is_one_thread(monkeypatch):
    # measured (pfl_theory/threads.py): one thread at every N unless PFLT_THREADS says more
    monkeypatch.delenv("PFLT_THREADS", raising=False)
    assert threads.run_threads(10) == threads.run_threads(10_000) == 1
    monkeypatch.setenv("PFLT_THREADS", "2")
    assert threads.run_threads(100) == 2
    with pytest.raises(ValueError, match="num_clients"):
        threads.run_threads(0)


def test_single_threaded_restores_thread_count():
    seen = []
    fn = threads.single_threaded(lambda: seen.append(torch.get_num_threads()) or 7)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert fn() == 7 and seen == [1]
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_api_threads_policy(monkeypatch):
    monkeypatch.delenv("PFLT_THREADS", raising=False)
    assert threads.api_threads() == 1 and threads.api_threads(3) == 3
    monkeypatch.setenv("PFLT_THREADS", "2")
    assert threads.api_threads() == 2 and threads.api_threads(1) == 1
    for bad in (0, -2, 1.5, True, "2"):
        with pytest.raises(ValueError, match="threads"):
            threads.api_threads(bad)


def test_torch_threads_restores_also_on_error():
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        with pytest.raises(RuntimeError):
            with threads.torch_threads(1):
                assert torch.get_num_threads() == 1
                raise RuntimeError("boom")
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)


def test_set_torch_threads_when_imported_sets_them_now_once_torch_is_loaded():
    import sys

    import torch

    from pfl_theory.threads import set_torch_threads_when_imported

    before = torch.get_num_threads()
    try:
        set_torch_threads_when_imported(3 if before != 3 else 2)
        assert torch.get_num_threads() == (3 if before != 3 else 2)
        assert not any(type(f).__name__ == "_AfterTorchImport" for f in sys.meta_path)
    finally:
        torch.set_num_threads(before)
