"""The device rule (CUDA when seen, ICLR26_DEVICE forces) and the usage record."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from iclr26_common import device as dev  # noqa: E402
from iclr26_common.threads import torch_threads  # noqa: E402


@pytest.fixture(autouse=True)
def _clean(monkeypatch):
    monkeypatch.delenv(dev.DEVICE_ENV, raising=False)
    dev.reset_usage()
    yield
    dev.reset_usage()


def test_default_follows_cuda_availability(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert dev.choose_device().type == "cpu"
    assert dev.lightning_accelerator() == "cpu"
    assert dev.used_devices() == ["cpu"]


def test_env_forces_cpu_even_with_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setenv(dev.DEVICE_ENV, "cpu")
    assert dev.choose_device().type == "cpu"


def test_cuda_preferred_when_seen(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "Fake GPU")
    assert dev.choose_device().type == "cuda"
    assert dev.lightning_accelerator() == "gpu"
    assert dev.used_devices() == ["cuda:0 (Fake GPU)"]


def test_forced_cuda_without_gpu_names_the_variable(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv(dev.DEVICE_ENV, "cuda")
    with pytest.raises(RuntimeError, match="ICLR26_DEVICE"):
        dev.choose_device()
    assert dev.used_devices() == []


def test_prefer_overrides_env_and_is_recorded(monkeypatch):
    monkeypatch.setenv(dev.DEVICE_ENV, "cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert dev.choose_device("cpu").type == "cpu"
    assert dev.used_devices() == ["cpu"]


def test_torch_threads_records_the_count_used_inside():
    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    assert dev.used_threads() == [1]
