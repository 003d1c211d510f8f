"""robotics-remac: masked action chunking for asynchronous robot inference (see README.md).

The main classes and functions are importable from the package itself; they are loaded on first
use, so ``import robotics_remac`` stays cheap (no torch)::

    from robotics_remac import DemoDataModule, fit_base, fit_finetune, make_chunker

(``rollout`` is a submodule's name: the loop itself is ``robotics_remac.rollout.rollout``.)
"""

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:
    __version__ = version("robotics-remac")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

#: Public name -> the module that defines it (imported on first access).
_EXPORTS = {
    "ABLATIONS": "robotics_remac.training",
    "METHODS": "robotics_remac.rollout",
    "AsyncChunkWrapper": "robotics_remac.gym_async",
    "CurriculumSettings": "robotics_remac.settings",
    "DemoDataModule": "robotics_remac.data",
    "Episode": "robotics_remac.dataset_format",
    "FlowPolicy": "robotics_remac.model",
    "FlowPolicyModule": "robotics_remac.lit_module",
    "LoRASettings": "robotics_remac.settings",
    "MeasuredDelay": "robotics_remac.latency",
    "PointMassChaseEnv": "robotics_remac.env",
    "PolicySizes": "robotics_remac.settings",
    "RemacFormatError": "robotics_remac.dataset_format",
    "RemacModule": "robotics_remac.lit_module",
    "RolloutStats": "robotics_remac.rollout",
    "add_lora": "robotics_remac.model",
    "chunker_policy": "robotics_remac.gym_async",
    "collect_demonstrations": "robotics_remac.data",
    "evaluate_async": "robotics_remac.gym_async",
    "fit_base": "robotics_remac.training",
    "fit_finetune": "robotics_remac.training",
    "load_policy": "robotics_remac.checkpoint",
    "make_chunker": "robotics_remac.rollout",
    "merge_lora": "robotics_remac.model",
    "read_lerobot_dataset": "robotics_remac.dataset_reader",
    "save_policy": "robotics_remac.checkpoint",
    "write_lerobot_dataset": "robotics_remac.dataset_writer",
}

__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'robotics_remac' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
