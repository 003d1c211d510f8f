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


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("cuda", "ICLR26_DEVICE=cuda: PyTorch sees no CUDA device on this machine"),
        ("gpu", "ICLR26_DEVICE=gpu: not a device; use cpu, cuda or cuda:N"),
    ],
)
def test_a_bad_device_variable_is_a_user_error(monkeypatch, value, message):
    """Issue 36 review: ``ICLR26_DEVICE=cuda`` without a GPU, or ``=gpu``, was a 31-line
    ``RuntimeError`` traceback in every command; now a user error (one line, exit 2), still a
    ``RuntimeError`` for callers that catch it."""
    from iclr26_common.cli_support import UsageError

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv(dev.DEVICE_ENV, value)
    with pytest.raises(UsageError) as info:
        dev.choose_device()
    assert str(info.value) == message and isinstance(info.value, RuntimeError)
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
