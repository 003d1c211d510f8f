"""RF-MatID (ICLR 2026): RF material identification from wide-band S11.

Readers for the upstream folder/CSV format and Touchstone, frequency-allocation protocols,
splits, a physics-based synthetic generator and 1-D baselines. The main classes and functions
are exported here and imported on first use (``import rf_matid`` stays cheap: torch and
Lightning load only when a model, the data module or the benchmark is touched)::

    import rf_matid

    rf_matid.generate_dataset("data", classes=["brick01", "wood02"], distances_mm=[200, 800])
    data = rf_matid.load_dataset("data")
    module = rf_matid.RFMatIDClassifier(arch="material_id", num_classes=2, seq_len=2048)
"""

from iclr26_common.exports import distribution_version, lazy_exports

__version__ = distribution_version("rf-matid", fallback="0.0.0")

#: Public name -> the submodule that defines it (imported on first access).
_EXPORTS = {
    # data on disk
    "load_dataset": "rf_matid.io",
    "read_frequency_csv": "rf_matid.io",
    "write_sample": "rf_matid.io",
    "Position": "rf_matid.io",
    "RFMatIDData": "rf_matid.io",
    "RFMatIDFormatError": "rf_matid.io",
    "read_s1p": "rf_matid.touchstone",
    "write_s1p": "rf_matid.touchstone",
    # protocols, splits, synthetic data
    "PROTOCOLS": "rf_matid.protocols",
    "apply_protocol": "rf_matid.protocols",
    "protocol_mask": "rf_matid.protocols",
    "make_split": "rf_matid.splits",
    "simulate_s11": "rf_matid.synth",
    "generate_dataset": "rf_matid.synth_dataset",
    # models and training
    "MODELS": "rf_matid.model",
    "build_model": "rf_matid.model",
    "complex_whiten": "rf_matid.model",
    "RFMatIDClassifier": "rf_matid.lit_module",
    "RFMatIDDataModule": "rf_matid.data",
    # prediction and the benchmark
    "Predictor": "rf_matid.predict",
    "load_predictor": "rf_matid.predict",
    "BenchmarkRow": "rf_matid.benchmark",
    "train_and_test": "rf_matid.benchmark",
    "run_benchmark": "rf_matid.benchmark",
}

__all__ = ["__version__", *_EXPORTS]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
