"""bio-scisor: SCISOR, a diffusion model that deletes residues (see README.md).

The main classes and functions are importable from the package itself; they are loaded on first
use, so ``import bio_scisor`` stays cheap (no torch)::

    from bio_scisor import fit_scisor, make_assay, make_family, score_path, shrink
"""

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:
    __version__ = version("bio-scisor")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'bio_scisor' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
