"""atomistic-scaling: neural force fields of rising symmetry order, EMT data and scaling-law fits
(see README.md).

The main classes and functions are exported here and imported on first use, so ``import
atomistic_scaling`` stays cheap (torch, PyG and e3nn load when a model, the data module or the
sweep is touched)::

    import atomistic_scaling as asc

    structures = asc.generate_structures(40, seed=0)
    module = asc.ForceFieldModule(arch="l1", width=8, num_layers=1)
"""

from iclr26_common.exports import distribution_version, lazy_exports

__version__ = distribution_version("atomistic-scaling")

#: Public name -> the submodule that defines it (imported on first access).
_EXPORTS = {
    # data
    "read_structures": "atomistic_scaling.io",
    "read_many": "atomistic_scaling.io",
    "write_extxyz": "atomistic_scaling.io",
    "AtomisticFormatError": "atomistic_scaling.io",
    "generate_structures": "atomistic_scaling.synth",
    "write_synthetic": "atomistic_scaling.synth",
    "AtomsGraphDataset": "atomistic_scaling.data",
    "AtomisticDataModule": "atomistic_scaling.data",
    # models
    "ForceField": "atomistic_scaling.model",
    "ForceFieldModule": "atomistic_scaling.lit_module",
    "ForceFieldCalculator": "atomistic_scaling.calculator",
    "load_force_field": "atomistic_scaling.calculator",
    "PredictionsWriter": "atomistic_scaling.predictions",
    # scaling laws and the sweep
    "fit_nd_law": "atomistic_scaling.scaling",
    "fit_compute_law": "atomistic_scaling.scaling",
    "seed_bootstrap_fit": "atomistic_scaling.scaling",
    "compute_optimal": "atomistic_scaling.scaling",
    "SweepConfig": "atomistic_scaling.sweep",
    "run_sweep": "atomistic_scaling.sweep",
    "fit_sweep": "atomistic_scaling.sweep",
    "trivial_loss": "atomistic_scaling.sweep",
}

__all__ = ["__version__", *_EXPORTS]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
