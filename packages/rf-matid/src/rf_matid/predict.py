"""Class probabilities for new spectra from a trained checkpoint (``rf-matid predict-files``).

The preprocessing is the training one (:mod:`rf_matid.data`): crop the sweep to the checkpoint's
frequency protocol (``protocol_mask``, bins in ascending frequency), then per-sample complex
whitening (:func:`rf_matid.model.complex_whiten`) to ``[N, 2, L]``. The protocol comes from the
checkpoint's data-module hyperparameters (Lightning stores them when the model was fitted with
``RFMatIDDataModule``, as ``rf-matid fit`` does), else from ``protocol=``, else from the unique
protocol whose crop gives the model's input length.

Python::

    from rf_matid.predict import load_predictor
    predictor = load_predictor("epoch=59.ckpt")
    probs = predictor.predict_proba(freq_hz, s11)   # s11 complex [F] -> [C], or [N, F] -> [N, C]
    predictor.class_names                           # column order of probs

Checkpoints are read with ``torch.load(..., weights_only=True)`` only.
"""

from __future__ import annotations

import csv
import io
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "CheckpointError",
    "Predictor",
    "SpectrumFile",
    "check_vocabulary",
    "collect_inputs",
    "load_predictor",
    "predict_files",
    "read_spectrum",
]

INPUT_SUFFIXES = (".csv", ".s1p")
# The tail of an upstream position folder name: such a folder carries a label (review of issue
# 22, #10: with another prefix it used to be read as unlabelled without a word).
_POSITION_TAIL = re.compile(r"-\d+mm-\d+deg$")


class CheckpointError(ValueError):
    """A checkpoint file that cannot be read with ``weights_only=True`` or is not a Lightning
    checkpoint; the message is one line naming the file."""


@dataclass(frozen=True)
class SpectrumFile:
    """One input file; ``class_name`` is the fine class parsed from an upstream position folder."""

    path: Path
    class_name: str | None = None


class Predictor:
    """A trained :class:`~rf_matid.lit_module.RFMatIDClassifier` in eval mode plus its metadata.

    Args:
        module: the classifier (``hparams.class_names`` is its vocabulary).
        protocol: frequency protocol of its training data, or None (inferred from ``seq_len``).
        application_mode: 'all_classes' or 'super_classes' (how data labels map to the vocabulary).
    """

    def __init__(self, module: Any, protocol: str | None, application_mode: str = "all_classes"):
        from rf_matid.protocols import PROTOCOLS

        if protocol is not None and protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {tuple(PROTOCOLS)}, got {protocol!r}")
        hp = module.hparams
        if int(hp.in_channels) not in (2, 3):
            raise ValueError(
                f"the checkpoint's model takes {hp.in_channels} input channel(s): a time-domain "
                "model; prediction from S11 needs a frequency-domain (2- or 3-channel) model"
            )
        self.three_channel = int(hp.in_channels) == 3  # RF_MatID: (f GHz, Re, Im)
        self.module = module.eval()
        self.protocol = protocol
        self.application_mode = application_mode
        names = hp.get("class_names")
        self.class_names: tuple[str, ...] = (
            tuple(names) if names else tuple(f"class_{i}" for i in range(int(hp.num_classes)))
        )
        self.has_vocabulary = bool(names)
        self.seq_len = int(hp.seq_len)

    def crop_mask(self, freq_hz: np.ndarray) -> np.ndarray:
        """Boolean mask of the protocol's bins on ``freq_hz``; its count must be ``seq_len``."""
        from rf_matid.protocols import PROTOCOLS, protocol_mask

        freq = np.asarray(freq_hz, dtype=np.float64)
        if freq.ndim != 1 or freq.size < 2 or not np.all(np.diff(freq) > 0):
            raise ValueError(
                f"freq_hz must be a strictly increasing 1-D axis, got shape {freq.shape}"
            )
        if self.protocol is not None:
            mask = protocol_mask(freq, self.protocol)
            if int(mask.sum()) != self.seq_len:
                raise ValueError(
                    f"protocol {self.protocol} keeps {int(mask.sum())} of the {freq.size} bins of "
                    f"this frequency axis ({freq[0] / 1e9:.4g}-{freq[-1] / 1e9:.4g} GHz), but the "
                    f"model was trained on {self.seq_len}: use the training sweep (the MS46131A "
                    "2048-point 4-43.5 GHz grid)"
                )
            return mask
        fits = [p for p in PROTOCOLS if int(protocol_mask(freq, p).sum()) == self.seq_len]
        if len(fits) != 1:
            raise ValueError(
                f"the checkpoint does not record its protocol and {len(fits)} protocols "
                f"({', '.join(fits) or 'none'}) give the model's input length {self.seq_len} on "
                "this frequency axis; pass protocol= (CLI: --protocol)"
            )
        return protocol_mask(freq, fits[0])

    def predict_proba(
        self, freq_hz: np.ndarray, s11: np.ndarray, batch_size: int = 256
    ) -> np.ndarray:
        """Class probabilities from raw S11: ``s11`` complex [F] -> [C], or [N, F] -> [N, C]."""
        import torch

        from rf_matid.data import frequency_channel, three_channel
        from rf_matid.model import complex_whiten

        values = np.asarray(s11)
        if not np.iscomplexobj(values):
            raise ValueError(f"s11 must be complex, got dtype {values.dtype}")
        single = values.ndim == 1
        batch = values[None] if single else values
        if batch.ndim != 2:
            raise ValueError(f"s11 must have shape [F] or [N, F], got {values.shape}")
        freq = np.asarray(freq_hz)
        if batch.shape[1] != freq.shape[-1]:
            raise ValueError(
                f"s11 has {batch.shape[1]} bins on its last axis but freq_hz has {freq.shape[-1]}"
            )
        if not np.isfinite(batch).all():
            raise ValueError("s11 contains NaN or inf")
        mask = self.crop_mask(freq)
        cropped = np.ascontiguousarray(batch[:, mask]).astype(np.complex64)
        freq_ghz = frequency_channel(freq[mask])
        parts = []
        with torch.inference_mode():
            for start in range(0, len(cropped), batch_size):
                x = complex_whiten(torch.from_numpy(cropped[start : start + batch_size]))
                if self.three_channel:
                    x = three_channel(x, freq_ghz)
                parts.append(self.module(x).softmax(dim=1).numpy())
        probs = np.concatenate(parts) if parts else np.zeros((0, len(self.class_names)))
        return probs[0] if single else probs


def load_predictor(
    ckpt_path: str | os.PathLike[str],
    protocol: str | None = None,
    map_location: str = "cpu",
    *,
    option: str | None = None,
) -> Predictor:
    """Loads a Lightning checkpoint of :class:`RFMatIDClassifier` (``weights_only=True``).

    ``protocol`` overrides the one recorded with the data module's hyperparameters. ``option``:
    the command-line option that gave ``ckpt_path`` (``"--ckpt"``): every error then starts with
    it (``"--ckpt PATH: ..."``), as ``--ckpt_path``'s do.

    Raises:
        FileNotFoundError: ``ckpt_path`` is not a file.
        CheckpointError: it cannot be read with ``weights_only=True``, holds no
            ``state_dict``, or is another model's (one line naming the file).
    """
    import inspect

    from iclr26_common.checkpoints import load_weights_only
    from rf_matid.lit_module import RFMatIDClassifier

    path = Path(ckpt_path)
    checkpoint = load_weights_only(
        path,
        "checkpoint",
        error=CheckpointError,
        map_location=map_location,
        require_state_dict=True,
        package="rf_matid",  # another package's model: one line naming both
        option=option,
    )
    named = f"{option} {path}" if option else str(path)
    hparams = dict(checkpoint.get("hyper_parameters") or {})
    accepted = set(inspect.signature(RFMatIDClassifier).parameters)
    try:  # another model's checkpoint: wrong arguments or weights
        module = RFMatIDClassifier(**{k: v for k, v in hparams.items() if k in accepted})
        module.load_state_dict(checkpoint["state_dict"])
    except (TypeError, ValueError, KeyError, RuntimeError) as error:
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise CheckpointError(
            f"{named}: not a checkpoint of an rf-matid classifier ({first})"
        ) from None
    data_hparams = dict(checkpoint.get("datamodule_hyper_parameters") or {})
    if data_hparams.get("domain", "frequency") != "frequency":
        raise ValueError(f"{named}: a time-domain model; predict from S11 needs a frequency model")
    return Predictor(
        module,
        protocol=protocol or data_hparams.get("protocol"),
        application_mode=data_hparams.get("application_mode", "all_classes"),
    )


def collect_inputs(paths: Sequence[str | os.PathLike[str]]) -> list[SpectrumFile]:
    """Expands files and folders into sorted ``.csv`` / ``.s1p`` inputs.

    A folder is searched recursively (hidden entries skipped; for a combined root with
    ``frequency_domain/`` only that tree). A file inside an upstream position folder
    (``ms46131a-...-{class}-{dist}mm-{deg}deg``) carries that class as its label; files in other
    folders are unlabelled. A folder that starts with the instrument prefix but is not a valid
    position folder (a class name with ``-``, a bad distance), or that ends in
    ``-<int>mm-<int>deg`` without the exact prefix, is an error naming it, as in training
    (:func:`rf_matid.io.parse_position_folder`): its label is never dropped silently.
    """
    from rf_matid.constants import FOLDER_PREFIX
    from rf_matid.io import domain_root, parse_position_folder

    def label(file: Path) -> str | None:
        name = file.parent.name
        if not name.startswith(f"{FOLDER_PREFIX}-") and not _POSITION_TAIL.search(name):
            return None
        # a labelled-looking folder with another prefix is refused as `fit` refuses it
        return parse_position_folder(file.parent).class_name

    def walk(folder: Path) -> Iterator[Path]:
        for entry in sorted(folder.iterdir(), key=lambda p: p.name):
            if entry.name.startswith("."):
                continue
            if entry.is_dir():
                yield from walk(entry)
            elif entry.suffix.lower() in INPUT_SUFFIXES:
                yield entry

    found: list[SpectrumFile] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            found += [SpectrumFile(f, label(f)) for f in walk(domain_root(path, "frequency"))]
        elif path.is_file():
            if path.suffix.lower() not in INPUT_SUFFIXES:
                raise ValueError(f"{path}: expected a .csv (upstream frequency CSV) or .s1p file")
            found.append(SpectrumFile(path, label(path)))
        else:
            raise FileNotFoundError(f"{path} does not exist")
    if not found:
        raise FileNotFoundError(
            f"no .csv or .s1p files in {', '.join(str(p) for p in paths) or '(no paths given)'}"
        )
    return found


def read_spectrum(path: str | os.PathLike[str]) -> tuple[np.ndarray, np.ndarray]:
    """(freq_hz [F], s11 complex [F]) from an upstream frequency CSV or a Touchstone ``.s1p``."""
    from rf_matid.io import read_frequency_csv
    from rf_matid.touchstone import read_s1p

    if Path(path).suffix.lower() == ".s1p":
        return read_s1p(path)
    return read_frequency_csv(path, expected_rows=None)


def check_vocabulary(predictor: Predictor, inputs: Sequence[SpectrumFile]) -> None:
    """Raises ValueError if a labelled input's class is not in the checkpoint's vocabulary."""
    from rf_matid.classes import superclass_of

    labels = sorted({f.class_name for f in inputs if f.class_name is not None})
    if not labels:
        return
    if not predictor.has_vocabulary:
        raise ValueError(
            "the checkpoint records no class_names, so the data's labels "
            f"{labels} cannot be matched to its outputs"
        )
    if predictor.application_mode == "super_classes":
        labels = sorted({superclass_of(name) for name in labels})
    unknown = [name for name in labels if name not in predictor.class_names]
    if unknown:
        raise ValueError(
            f"class vocabulary mismatch: the data has classes {unknown} that the checkpoint "
            f"({predictor.application_mode}) was not trained on; its classes are "
            f"{list(predictor.class_names)}"
        )


def predict_files(
    predictor: Predictor,
    inputs: Sequence[SpectrumFile],
    out: str | os.PathLike[str],
    batch_size: int = 256,
    overwrite: bool = False,
    quiet: bool = True,
) -> Path:
    """Writes ``out``: CSV ``file, predicted[, label], prob_<class>...``, one row per input.

    ``out`` is checked before any spectrum is read
    (:func:`iclr26_common.outputs.check_out_file`: an existing file is an error unless
    ``overwrite``, a folder is an error) and written at the end in one atomic step, mode 0644:
    an error or Ctrl-C leaves no partial file. ``quiet=False`` shows progress over the batches
    on stderr.
    """
    from iclr26_common.outputs import check_out_file, write_text
    from iclr26_common.progress import progress

    target = check_out_file(out, option="--out", overwrite=overwrite)
    check_vocabulary(predictor, inputs)
    labelled = any(f.class_name is not None for f in inputs)
    header = ["file", "predicted", *(["label"] if labelled else [])]
    header += [f"prob_{name}" for name in predictor.class_names]
    handle = io.StringIO(newline="")
    writer = csv.writer(handle, lineterminator="\r\n")
    writer.writerow(header)
    starts = range(0, len(inputs), batch_size)
    for start in progress(starts, description="predict-files batches", quiet=quiet):
        chunk = inputs[start : start + batch_size]
        for item, probs in zip(chunk, _chunk_probabilities(predictor, chunk), strict=True):
            row = [str(item.path), predictor.class_names[int(np.argmax(probs))]]
            if labelled:
                row.append(item.class_name or "")
            writer.writerow(row + [f"{p:.6g}" for p in probs])
    return write_text(target, handle.getvalue())


def _chunk_probabilities(predictor: Predictor, chunk: Sequence[SpectrumFile]) -> np.ndarray:
    """Reads ``chunk`` and predicts it, one forward pass per distinct frequency axis."""
    spectra = [read_spectrum(item.path) for item in chunk]
    probs = np.zeros((len(chunk), len(predictor.class_names)))
    groups: dict[bytes, list[int]] = {}
    for i, (freq, _) in enumerate(spectra):
        groups.setdefault(np.asarray(freq, dtype=np.float64).tobytes(), []).append(i)
    for members in groups.values():
        freq = spectra[members[0]][0]
        try:
            stacked = np.stack([spectra[i][1] for i in members])
            probs[members] = predictor.predict_proba(freq, stacked)
        except ValueError as error:
            raise ValueError(f"{chunk[members[0]].path}: {error}") from None
    return probs
