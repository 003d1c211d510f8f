"""Seeded outputs of the model zoo and the synthetic generator, stored so that a refactor that
changes a number is caught (issue 29; checked by ``tests/test_stored_outputs.py``).

Regenerate (only when a change of numbers is intended, and say so in the change log)::

    OMP_NUM_THREADS=1 .venv/bin/python packages/rf-matid/tests/data/stored_outputs/make_stored_outputs.py

It writes, next to this file:

- ``model_logits.npz``: for every ``rf_matid.model.MODELS`` entry, built by ``build_model(name,
  num_classes=NUM_CLASSES, seq_len=SEQ_LEN)`` with its default architecture after
  ``torch.manual_seed(MODEL_SEED)``, the logits ``[BATCH, NUM_CLASSES]`` of the seeded input
  (complex Gaussian spectra from ``numpy.random.default_rng(INPUT_SEED)``, whitened by
  ``complex_whiten``; for ``rf_matid`` the frequency row of the first ``SEQ_LEN`` bins of the
  MS46131A grid in front), in eval mode (``<name>/eval``) and in train mode after
  ``torch.manual_seed(DROPOUT_SEED)`` (``<name>/train``: batch statistics, dropout);
- ``synth_outputs.npz``: ``synth.simulate_batch`` of the ``SYNTH_KEYS`` samples (per-sample
  generators ``synth_dataset.sample_rng(SYNTH_SEED, *key)``, as ``generate_dataset`` draws them)
  on the full grid, their band-pass impulse responses (``frequency_to_time``, every ``TIME_STRIDE``-th sample) and
  ``echo_to_interference_db`` at ``RATIO_DISTANCES_MM``;
- ``stored_outputs.json``: the settings above, the torch / numpy versions and this command.

Computed on the CPU in float32 (models) / float64 then complex64 (generator), one torch thread.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MODEL_FILE = HERE / "model_logits.npz"
SYNTH_FILE = HERE / "synth_outputs.npz"
SIDECAR = HERE / "stored_outputs.json"
COMMAND = (
    "OMP_NUM_THREADS=1 .venv/bin/python "
    "packages/rf-matid/tests/data/stored_outputs/make_stored_outputs.py"
)

NUM_CLASSES = 16
SEQ_LEN = 256  # the MLP and RF_MatID are built for it; the others take any length
BATCH = 4
MODEL_SEED = 0
INPUT_SEED = 1
DROPOUT_SEED = 2

SYNTH_SEED = 7
# (class, distance mm, angle deg, index): one- and three-layer classes, near and far, tilted
SYNTH_KEYS = (
    ("glass03", 200, 0, 0),
    ("brick02", 650, 4, 1),
    ("wood01", 1300, 7, 0),
    ("stone03", 2000, 10, 2),
)
TIME_STRIDE = 16
RATIO_DISTANCES_MM = (200, 700, 1100, 2000)


def model_input(name: str):  # -> torch.Tensor
    """The seeded input of model ``name``: whitened ``[BATCH, 2, SEQ_LEN]`` (``[BATCH, 3,
    SEQ_LEN]`` with the frequency row for a three-channel model)."""
    import torch

    from rf_matid.constants import FREQ_GRID_HZ
    from rf_matid.data import frequency_channel, three_channel
    from rf_matid.model import INPUT_FORMATS, complex_whiten

    rng = np.random.default_rng(INPUT_SEED)
    spectra = rng.standard_normal((BATCH, SEQ_LEN)) + 1j * rng.standard_normal((BATCH, SEQ_LEN))
    x = complex_whiten(torch.from_numpy(spectra.astype(np.complex64)))
    if INPUT_FORMATS[name] == "three_channel":
        x = three_channel(x, frequency_channel(FREQ_GRID_HZ[:SEQ_LEN]))
    return x


def model_logits(transform=None) -> dict[str, np.ndarray]:  # type: ignore[no-untyped-def]
    """``{"<name>/eval": logits, "<name>/train": logits}`` for every model of the zoo.

    ``transform``: applied to every model's input before the forward passes (the test's mutation
    check feeds a defective input pipeline through it); ``None`` for the stored logits."""
    import torch

    from rf_matid.model import MODELS, build_model

    out: dict[str, np.ndarray] = {}
    for name in MODELS:
        torch.manual_seed(MODEL_SEED)
        model = build_model(name, num_classes=NUM_CLASSES, seq_len=SEQ_LEN)
        x = model_input(name)
        if transform is not None:
            x = transform(x)
        with torch.no_grad():
            out[f"{name}/eval"] = model.eval()(x).numpy()
            torch.manual_seed(DROPOUT_SEED)
            out[f"{name}/train"] = model.train()(x).numpy()
    return out


def synth_outputs(
    keys: tuple[tuple[str, int, int, int], ...] = SYNTH_KEYS,
    ratio_distances_mm: tuple[int, ...] = RATIO_DISTANCES_MM,
) -> dict[str, np.ndarray]:
    """S11 of ``keys``, their decimated impulse responses and the echo ratio at
    ``ratio_distances_mm`` (the defaults are the stored ones; the test's mutation check passes
    others)."""
    from rf_matid import synth
    from rf_matid.constants import FREQ_GRID_HZ
    from rf_matid.synth_dataset import sample_rng

    names, distances, angles, _ = zip(*keys, strict=True)
    rngs = [sample_rng(SYNTH_SEED, *key) for key in keys]
    s11 = synth.simulate_batch(names, distances, angles, rngs)
    time_ps, amplitude = synth.frequency_to_time(FREQ_GRID_HZ, s11)
    return {
        "s11": s11,
        "time_ps": time_ps[::TIME_STRIDE],
        "amplitude": amplitude[:, ::TIME_STRIDE],
        "echo_to_interference_db": synth.echo_to_interference_db(list(ratio_distances_mm)),
    }


def main() -> int:
    import torch

    torch.set_num_threads(1)
    logits = model_logits()
    generator = synth_outputs()
    np.savez_compressed(MODEL_FILE, **logits)
    np.savez_compressed(SYNTH_FILE, **generator)
    sidecar = {
        "command": COMMAND,
        "models": {
            "file": MODEL_FILE.name,
            "num_classes": NUM_CLASSES,
            "seq_len": SEQ_LEN,
            "batch": BATCH,
            "model_seed": MODEL_SEED,
            "input_seed": INPUT_SEED,
            "dropout_seed": DROPOUT_SEED,
            "keys": sorted(logits),
        },
        "synth": {
            "file": SYNTH_FILE.name,
            "seed": SYNTH_SEED,
            "keys": [list(key) for key in SYNTH_KEYS],
            "time_stride": TIME_STRIDE,
            "ratio_distances_mm": list(RATIO_DISTANCES_MM),
        },
        "versions": {"torch": torch.__version__, "numpy": np.__version__},
    }
    SIDECAR.write_text(json.dumps(sidecar, indent=2) + "\n")
    print(f"wrote {MODEL_FILE.name}, {SYNTH_FILE.name}, {SIDECAR.name} in {HERE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
