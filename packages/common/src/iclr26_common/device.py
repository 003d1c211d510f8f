"""Which device an experiment or CLI runs on, and what it actually used (for provenance).

One rule for the whole workspace: CUDA when PyTorch sees a GPU, else the CPU; the environment
variable ``ICLR26_DEVICE`` forces a choice (``cpu``, ``cuda``, ``cuda:1``). Every device chosen
through :func:`choose_device` / :func:`lightning_accelerator` and every thread count set through
:func:`iclr26_common.threads.torch_threads` is recorded in this process, so the experiment worker
writes into ``result.json`` what ``run()`` used, not what the machine offered.

torch is imported lazily: importing this module costs nothing.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from iclr26_common.cli_support import UsageError

if TYPE_CHECKING:
    import torch

__all__ = [
    "DEVICE_ENV",
    "DEVICE_HELP",
    "DeviceError",
    "add_device_option",
    "check_device_env",
    "choose_device",
    "describe_device",
    "lightning_accelerator",
    "lightning_devices",
    "parse_device_option",
    "record_device",
    "record_threads",
    "reset_usage",
    "used_devices",
    "used_threads",
]

DEVICE_ENV = "ICLR26_DEVICE"

#: The one help text of every command's ``--device`` (:func:`add_device_option`).
DEVICE_HELP = (
    "cpu, cuda or cuda:N (default: cuda when PyTorch sees a GPU, else the CPU; "
    f"${DEVICE_ENV} sets the default)"
)
_DEVICE_NAMES = "cpu, cuda or cuda:N"


def add_device_option(
    parser: Any,
    *,
    default: str | None = None,
    default_text: str | None = None,
    also: str = "",
    type: Any = None,
) -> None:
    """Add ``--device`` with the one wording (:data:`DEVICE_HELP`) to an argparse or
    jsonargparse ``parser``. ``default_text``: what a command whose default is not
    :func:`choose_device`'s says instead (e.g. ``"the CPU, as the experiment"``); ``also``: what
    else the help says (e.g. which model it places); ``type``: the value's type where a
    jsonargparse parser needs one (``str | None``). The value stays the name given (or
    ``default``): commands check it with :func:`parse_device_option` before any work."""
    help_text = (
        DEVICE_HELP if default_text is None else f"{_DEVICE_NAMES} (default: {default_text})"
    )
    if also:
        help_text += f"; {also}"
    kwargs: dict[str, Any] = {} if type is None else {"type": type}
    parser.add_argument("--device", default=default, help=help_text, **kwargs)


class DeviceError(UsageError, RuntimeError):
    """A device named in ``--device`` or ``$ICLR26_DEVICE`` that is not one, or that PyTorch
    cannot see here: a user error (one line, exit 2), and a ``RuntimeError`` for callers that
    caught :func:`choose_device`'s earlier error."""


_USED_DEVICES: list[str] = []
_USED_THREADS: list[int] = []


def _forced() -> str | None:
    value = os.environ.get(DEVICE_ENV, "").strip().lower()
    return value or None


def choose_device(prefer: str | None = None) -> torch.device:
    """The device to run on: ``prefer`` if given, else ``$ICLR26_DEVICE``, else CUDA if PyTorch
    sees a GPU, else the CPU. The choice is recorded (see :func:`used_devices`).

    ``prefer`` is for code that must run on one device (e.g. a CPU-only library call); it still
    records what was used. ``$ICLR26_DEVICE`` is checked as :func:`parse_device_option` checks
    ``--device``: a value that is not a device, or a CUDA device PyTorch cannot see, is a
    :class:`DeviceError` naming the variable (one line, exit 2 from every command; a
    ``RuntimeError`` too, for callers that catch that).
    """
    import torch

    if prefer is None and (forced := _forced()) is not None:
        device = _checked(forced, f"{DEVICE_ENV}={forced}", types=None)
        record_device(device)
        return device
    choice = prefer
    if choice is None:
        choice = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(choice)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise DeviceError(f"{choice!r}: PyTorch sees no CUDA device")
    record_device(device)
    return device


def check_device_env() -> None:
    """``$ICLR26_DEVICE``, when set, checked as :func:`choose_device` will check it (a
    :class:`DeviceError` naming the variable), without recording a choice: every console script
    calls it before its command starts (:func:`iclr26_common.cli_support.run_with_one_line_errors`),
    so a bad value stops a command before it makes a folder or does any work. Unset, or without
    torch installed (``iclr26-common`` alone: no command there runs a model): nothing is checked."""
    forced = _forced()
    if forced is None:
        return
    try:
        import torch  # noqa: F401
    except ImportError:
        return
    _checked(forced, f"{DEVICE_ENV}={forced}", types=None)


def _checked(value: str, named: str, types: tuple[str, ...] | None) -> torch.device:
    """``value`` as a torch device that this machine has: a :class:`DeviceError` starting with
    ``named`` otherwise. ``types``: the device types allowed (``None``: any torch knows, e.g.
    ``meta`` in tests through ``$ICLR26_DEVICE``)."""
    import torch

    text = str(value).strip().lower()
    try:
        device = torch.device(text)
    except (RuntimeError, ValueError):
        raise DeviceError(f"{named}: not a device; use cpu, cuda or cuda:N") from None
    if types is not None and device.type not in types:
        raise DeviceError(f"{named}: not a device; use cpu, cuda or cuda:N")
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise DeviceError(f"{named}: PyTorch sees no CUDA device on this machine")
        if device.index is not None and device.index >= count:
            raise DeviceError(f"{named}: PyTorch sees {count} CUDA device(s) (0..{count - 1})")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise DeviceError(f"{named}: PyTorch sees no MPS device on this machine")
    return device


def parse_device_option(value: str, option: str = "--device") -> torch.device:
    """The device a user named in ``option``, checked before any work: ``cpu``, ``cuda``,
    ``cuda:N`` or ``mps``. A name that is not a device, or a CUDA device PyTorch cannot see
    here, is a :class:`DeviceError` (a :class:`~iclr26_common.cli_support.UsageError`) naming
    the option (one line, exit 2). The choice is recorded like :func:`choose_device`'s."""
    device = _checked(value, f"{option} {value}", types=("cpu", "cuda", "mps"))
    record_device(device)
    return device


def lightning_accelerator(prefer: str | None = None) -> str:
    """The ``Trainer(accelerator=...)`` value for :func:`choose_device`'s choice ("gpu"/"cpu").

    A Trainer built by hand must also pass ``devices=lightning_devices()``: Lightning's
    ``devices=1`` means the first GPU, whatever ``ICLR26_DEVICE=cuda:N`` says.
    """
    return "gpu" if choose_device(prefer).type == "cuda" else "cpu"


def lightning_devices(prefer: str | None = None) -> int | list[int]:
    """The ``Trainer(devices=...)`` value for :func:`choose_device`'s choice: ``[N]`` for an
    explicit ``cuda:N``, else ``1`` (the CPU, or the first GPU for a plain ``cuda``)."""
    device = choose_device(prefer)
    if device.type == "cuda" and device.index is not None:
        return [device.index]
    return 1


def describe_device(device: Any) -> str:
    """``"cpu"`` or ``"cuda:0 (NVIDIA H200)"``: a device with its model name when it is a GPU."""
    import torch

    device = torch.device(device)
    if device.type != "cuda":
        return device.type
    index = device.index if device.index is not None else torch.cuda.current_device()
    return f"cuda:{index} ({torch.cuda.get_device_name(index)})"


def record_device(device: Any) -> None:
    """Note that this process ran work on ``device`` (a ``torch.device`` or its string)."""
    text = describe_device(device)
    if text not in _USED_DEVICES:
        _USED_DEVICES.append(text)


def record_threads(n: int) -> None:
    """Note that this process ran torch work with ``n`` intra-op threads."""
    if int(n) not in _USED_THREADS:
        _USED_THREADS.append(int(n))


def used_devices() -> list[str]:
    """The devices recorded so far in this process, in first-use order."""
    return list(_USED_DEVICES)


def used_threads() -> list[int]:
    """The intra-op thread counts recorded so far in this process, in first-use order."""
    return list(_USED_THREADS)


def reset_usage() -> None:
    """Forget what was recorded (the worker calls this before ``run()``)."""
    _USED_DEVICES.clear()
    _USED_THREADS.clear()
