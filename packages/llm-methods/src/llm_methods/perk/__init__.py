"""PERK: test-time LoRA memory for long contexts (arXiv 2507.06415): ``data`` (BabiLong reader,
generator, DataModule), ``model`` (inner/outer loops), ``icr`` (FT-ICR baseline), ``lit_module``,
``cli``, ``experiment`` (see README.md).

The main classes and functions are exported here and imported on first use
(``import llm_methods.perk`` does not import torch).
"""

from iclr26_common.exports import lazy_exports

#: Public name -> the submodule that defines it (imported on first access).
_EXPORTS = {
    "BabiRecord": "llm_methods.perk.data",
    "BabiLongDataModule": "llm_methods.perk.data",
    "read_babilong": "llm_methods.perk.data",
    "synth_babilong": "llm_methods.perk.data",
    "write_babilong": "llm_methods.perk.data",
    "PERK": "llm_methods.perk.model",
    "TokenWeighter": "llm_methods.perk.model",
    "ICR": "llm_methods.perk.icr",
    "ICRModule": "llm_methods.perk.lit_module",
    "PERKModule": "llm_methods.perk.lit_module",
    "load_checkpoint": "llm_methods.perk.lit_module",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [*_EXPORTS]
