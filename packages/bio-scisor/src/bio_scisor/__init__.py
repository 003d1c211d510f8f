"""bio-scisor: SCISOR, a diffusion model that deletes residues (see README.md).

The main classes and functions are importable from the package itself; they are loaded on first
use, so ``import bio_scisor`` stays cheap (no torch)::

    from bio_scisor import fit_scisor, make_assay, make_family, score_path, shrink
"""

from iclr26_common.exports import distribution_version, lazy_exports

__version__ = distribution_version("bio-scisor")

#: Public name -> the module that defines it (imported on first access).
_EXPORTS = {
    "AssayScores": "bio_scisor.metrics",
    "DeletionAssay": "bio_scisor.io",
    "EsmDenoiser": "bio_scisor.model",
    "ScisorDataModule": "bio_scisor.data",
    "ScisorDenoiser": "bio_scisor.model",
    "ScisorFormatError": "bio_scisor.io",
    "ScisorLitModule": "bio_scisor.lit_module",
    "SynthFamily": "bio_scisor.synth",
    "fit_scisor": "bio_scisor.lit_module",
    "generate": "bio_scisor.scoring",
    "load_checkpoint": "bio_scisor.lit_module",
    "load_official_checkpoint": "bio_scisor.official",
    "make_assay": "bio_scisor.synth",
    "make_family": "bio_scisor.synth",
    "proteingym_summary": "bio_scisor.metrics",
    "read_dms_indels": "bio_scisor.io",
    "read_sequences": "bio_scisor.io",
    "score_clinical_reference": "bio_scisor.proteingym",
    "score_elbo": "bio_scisor.elbo",
    "score_path": "bio_scisor.scoring",
    "score_reference": "bio_scisor.proteingym",
    "shrink": "bio_scisor.scoring",
    "spearman": "bio_scisor.metrics",
    "write_family": "bio_scisor.synth",
}

__all__ = ["__version__", *sorted(_EXPORTS)]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
