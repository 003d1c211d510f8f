"""robotics-remac: masked action chunking for asynchronous robot inference (see README.md).

The main classes and functions are importable from the package itself; they are loaded on first
use, so ``import robotics_remac`` stays cheap (no torch)::

    from robotics_remac import DemoDataModule, fit_base, fit_finetune, make_chunker

(``rollout`` is a submodule's name: the loop itself is ``robotics_remac.rollout.rollout``.)
"""

from iclr26_common.exports import distribution_version, lazy_exports

__version__ = distribution_version("robotics-remac")

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
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
