"""Stored seeded outputs (issue 29): every model of the zoo and the synthetic generator give
today the numbers stored in ``tests/data/stored_outputs/`` (made by its ``make_stored_outputs.py``
before the refactors), so a change that moves a number fails here."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from rf_matid.model import MODELS

STORED = Path(__file__).parent / "data" / "stored_outputs"


def _load_maker():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "rf_matid_make_stored_outputs", STORED / "make_stored_outputs.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MAKER = _load_maker()


@pytest.fixture
def one_thread():  # type: ignore[no-untyped-def]
    """The fixtures were computed with one torch thread; reduction order follows the threads."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_the_sidecar_describes_the_stored_files() -> None:
    sidecar = json.loads((STORED / "stored_outputs.json").read_text())
    assert sidecar["command"] == MAKER.COMMAND
    assert sidecar["models"]["seq_len"] == MAKER.SEQ_LEN
    assert sidecar["synth"]["keys"] == [list(key) for key in MAKER.SYNTH_KEYS]
    with np.load(STORED / "model_logits.npz") as stored:
        assert sorted(stored.files) == sidecar["models"]["keys"]


def test_every_model_of_the_zoo_has_stored_logits() -> None:
    with np.load(STORED / "model_logits.npz") as stored:
        assert sorted(stored.files) == sorted(f"{n}/{m}" for n in MODELS for m in ("eval", "train"))


@pytest.mark.usefixtures("one_thread")
def test_model_logits_match_the_stored_ones() -> None:
    # float32 on the CPU: kernels may differ in the last bits across CPUs; any change of the
    # architecture, the initialisation order or the input pipeline moves logits by >= 1e-3.
    logits = MAKER.model_logits()
    with np.load(STORED / "model_logits.npz") as stored:
        for key in stored.files:
            expected = torch.from_numpy(stored[key])
            assert expected.shape == (MAKER.BATCH, MAKER.NUM_CLASSES)
            torch.testing.assert_close(
                torch.from_numpy(logits[key]),
                expected,
                rtol=1e-4,
                atol=1e-5,
                msg=lambda text, key=key: f"{key}: {text}",
            )


def test_generator_outputs_match_the_stored_ones() -> None:
    outputs = MAKER.synth_outputs()
    with np.load(STORED / "synth_outputs.npz") as stored:
        assert sorted(stored.files) == sorted(outputs)
        for key in stored.files:
            # float64 physics rounded to complex64 / float32: only the last-bit rounding may vary
            torch.testing.assert_close(
                torch.from_numpy(np.asarray(outputs[key])),
                torch.from_numpy(stored[key]),
                rtol=1e-5,
                atol=1e-7,
                msg=lambda text, key=key: f"{key}: {text}",
            )
