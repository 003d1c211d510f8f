"""medimg-gfscreen: glance-and-focus CT screening, GF-Screen (see README.md).

The main classes and functions are importable from the package itself; they are loaded on first
use, so ``import medimg_gfscreen`` stays cheap (no torch, MONAI or Lightning)::

    from medimg_gfscreen import GFScreenModule, generate_dataset, load_screen_module, screen_file
"""

from iclr26_common.exports import distribution_version, lazy_exports

__version__ = distribution_version("medimg-gfscreen")

#: Public name -> the module that defines it (imported on first access).
_EXPORTS = {
    "FocusSettings": "medimg_gfscreen.settings",
    "GFScreenDataModule": "medimg_gfscreen.data",
    "GFScreenFormatError": "medimg_gfscreen.io",
    "GFScreenModule": "medimg_gfscreen.lit_module",
    "Glance": "medimg_gfscreen.model",
    "GlanceSettings": "medimg_gfscreen.settings",
    "InferenceSettings": "medimg_gfscreen.settings",
    "MaskWriter": "medimg_gfscreen.screen",
    "ObjectiveSettings": "medimg_gfscreen.settings",
    "OptimSettings": "medimg_gfscreen.settings",
    "build_focus": "medimg_gfscreen.model",
    "count_flops": "medimg_gfscreen.inference",
    "detection_reward": "medimg_gfscreen.model",
    "discover_cases": "medimg_gfscreen.io",
    "generate_dataset": "medimg_gfscreen.synth",
    "gfscreen_losses": "medimg_gfscreen.lit_module",
    "glance_focus_inference": "medimg_gfscreen.inference",
    "group_advantages": "medimg_gfscreen.model",
    "load_datalist": "medimg_gfscreen.io",
    "load_screen_module": "medimg_gfscreen.screen",
    "load_weights": "medimg_gfscreen.screen",
    "rl_loss": "medimg_gfscreen.model",
    "screen_file": "medimg_gfscreen.screen",
    "sliding_window_focus": "medimg_gfscreen.inference",
    "synth_case": "medimg_gfscreen.synth",
    "write_datalist": "medimg_gfscreen.io",
}

__all__ = ["__version__", *sorted(_EXPORTS)]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
