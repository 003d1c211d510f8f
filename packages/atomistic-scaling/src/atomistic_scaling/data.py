"""Datasets of atomic graphs and the Lightning data module.

:class:`AtomsGraphDataset` turns labelled ``ase.Atoms`` (see :mod:`.io`) into PyG graphs once
(neighbour lists with vesin). :class:`AtomisticDataModule` reads files or generates EMT data,
splits train/val/test, streams the training set for one epoch over ``max_samples`` structures
(the paper's single-epoch regime), and fits per-element reference energies on the training
split by least squares.
"""

from __future__ import annotations

from collections.abc import Sequence

import lightning as L
import numpy as np
import torch
from ase import Atoms
from torch.utils.data import Dataset

from atomistic_scaling._pyg import Data, DataLoader
from atomistic_scaling.constants import (
    DEFAULT_ENERGY_KEY,
    DEFAULT_FORCES_KEY,
    DEFAULT_MIN_DISTANCE,
    EMT_ELEMENTS,
    MAX_Z,
)
from atomistic_scaling.graph import atoms_to_graph
from atomistic_scaling.io import FRAME_KEY, SOURCE_KEY, read_many
from atomistic_scaling.symmetry import randomly_orient

__all__ = [
    "AtomisticDataModule",
    "AtomsGraphDataset",
    "elements_of",
    "fit_atomic_energies",
    "graph_references",
]


class AtomsGraphDataset(Dataset):
    """PyG graphs of labelled structures within ``cutoff`` (Å), built once up front."""

    def __init__(self, structures: Sequence[Atoms], cutoff: float) -> None:
        self.cutoff = float(cutoff)
        self.graphs: list[Data] = [atoms_to_graph(atoms, cutoff) for atoms in structures]

    def __len__(self) -> int:
        return len(self.graphs)

    def __getitem__(self, index: int) -> Data:
        return self.graphs[index]


def fit_atomic_energies(structures: Sequence[Atoms]) -> torch.Tensor:
    """Per-element reference energies ``E0`` (MAX_Z,) minimising ``sum (E - sum_i E0[z_i])^2``
    over ``structures`` (least squares on element counts; absent elements get 0)."""
    return _least_squares_references(
        [atoms.numbers for atoms in structures],
        np.array([atoms.info["energy"] for atoms in structures]),
    )


def graph_references(dataset: Dataset, indices: Sequence[int]) -> tuple[torch.Tensor, list[int]]:
    """:func:`fit_atomic_energies` on the graphs ``dataset[i]`` for ``i`` in ``indices`` (their
    ``z`` and ``energy``), and the elements present in them."""
    graphs = [dataset[int(i)] for i in indices]
    numbers = [g.z.numpy() for g in graphs]
    energies = np.array([float(g.energy) for g in graphs])
    elements = sorted({int(z) for row in numbers for z in row})
    return _least_squares_references(numbers, energies), elements


def _least_squares_references(numbers: Sequence[np.ndarray], energies: np.ndarray) -> torch.Tensor:
    """``E0`` (MAX_Z,) from the atomic numbers of each structure and its energy (S,)."""
    elements = sorted({int(z) for row in numbers for z in row})
    counts = np.zeros((len(numbers), len(elements)))
    for row, z_row in enumerate(numbers):
        for col, z in enumerate(elements):
            counts[row, col] = np.count_nonzero(np.asarray(z_row) == z)
    coef, *_ = np.linalg.lstsq(counts, np.asarray(energies, float), rcond=None)
    out = torch.zeros(MAX_Z)
    out[elements] = torch.as_tensor(coef, dtype=torch.float32)
    return out


def _without_labels(atoms: Atoms) -> Atoms:
    """A copy of ``atoms`` without ``info["energy"]`` and ``arrays["forces"]``."""
    out = atoms.copy()
    out.info.pop("energy", None)
    if "forces" in out.arrays:
        del out.arrays["forces"]
    return out


def elements_of(structures: Sequence[Atoms]) -> list[int]:
    """Sorted atomic numbers present in ``structures``."""
    return sorted({int(z) for atoms in structures for z in atoms.numbers})


class AtomisticDataModule(L.LightningDataModule):
    """Train/val/test graphs from files (``train_files``; optional ``val_files``/``test_files``,
    else random fractions of the training files) or, with no files, ``synthetic_size`` EMT
    structures generated with ``seed``.

    Args:
        train_files: paths read with :func:`atomistic_scaling.io.read_structures`.
        val_files, test_files: optional separate files.
        energy_key, forces_key: label keys (``REF_energy``/``REF_forces`` default, plain
            ``energy``/``forces`` accepted).
        cutoff: neighbour cutoff (Å), linked into the model.
        batch_size: structures per step (the paper: 64).
        max_samples: training structures streamed in the single epoch (D); default all.
        val_fraction, test_fraction: split fractions when no separate files are given.
        synthetic_size: structures generated with EMT when no ``train_files`` are given
            (randomly oriented, see :func:`atomistic_scaling.synth.generate_structures`).
        elements: EMT elements for the synthetic data.
        seed: split and generation seed.
        min_distance: frames with two atoms closer than this (Å) are refused on read (0: off).
        random_orientation: rotate every structure read from files (train/val/test) by its own
            random rotation (seeded), so that an unconstrained model must learn rotational
            symmetry; generated data is randomly oriented already.
    """

    def __init__(
        self,
        train_files: list[str] | None = None,
        val_files: list[str] | None = None,
        test_files: list[str] | None = None,
        energy_key: str = DEFAULT_ENERGY_KEY,
        forces_key: str = DEFAULT_FORCES_KEY,
        cutoff: float = 4.5,
        batch_size: int = 16,
        max_samples: int | None = None,
        val_fraction: float = 0.1,
        test_fraction: float = 0.1,
        synthetic_size: int = 200,
        elements: list[str] | None = None,
        seed: int = 0,
        min_distance: float = DEFAULT_MIN_DISTANCE,
        random_orientation: bool = False,
    ) -> None:
        super().__init__()
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if not 0 <= val_fraction < 1 or not 0 <= test_fraction < 1:
            raise ValueError("val_fraction and test_fraction must be in [0, 1)")
        self.save_hyperparameters()
        self.train_structures: list[Atoms] | None = None
        self.val_structures: list[Atoms] = []
        self.test_structures: list[Atoms] = []
        self.predict_only = False  # set by setup("predict") with test_files (_load_predict)

    def _load(self) -> None:
        hp = self.hparams
        rng = np.random.default_rng(hp.seed)

        def read(files: list[str]) -> list[Atoms]:
            return read_many(files, hp.energy_key, hp.forces_key, hp.min_distance)

        if hp.train_files:
            train = read(hp.train_files)
        else:
            from atomistic_scaling.synth import generate_structures

            train = generate_structures(hp.synthetic_size, hp.seed, hp.elements or EMT_ELEMENTS)
            for frame, atoms in enumerate(train):  # ids, as read_many gives a file's frames
                atoms.info[SOURCE_KEY] = f"synthetic:seed={hp.seed}"
                atoms.info[FRAME_KEY] = frame
        order = rng.permutation(len(train))
        train = [train[i] for i in order]
        n_val = 0 if hp.val_files else round(hp.val_fraction * len(train))
        n_test = 0 if hp.test_files else round(hp.test_fraction * len(train))
        val = read(hp.val_files) if hp.val_files else []
        test = read(hp.test_files) if hp.test_files else []
        if hp.random_orientation and hp.train_files:
            train = randomly_orient(train, hp.seed)
            val = randomly_orient(val, hp.seed + 1)
            test = randomly_orient(test, hp.seed + 2)
        val = val or train[:n_val]
        test = test or train[n_val : n_val + n_test]
        train = train[n_val + n_test :]
        if hp.max_samples is not None:
            if hp.max_samples > len(train):
                raise ValueError(
                    f"max_samples={hp.max_samples} exceeds the {len(train)} training structures"
                )
            train = train[: hp.max_samples]
        if not train or not val:
            raise ValueError(
                f"empty split: {len(train)} train / {len(val)} val structures "
                "(give more data, val_files, or a larger val_fraction)"
            )
        self.train_structures, self.val_structures, self.test_structures = train, val, test

    def _load_predict(self) -> None:
        """``predict`` with ``test_files``: those files only, labels optional (new structures
        need no reference energy or forces; a label a frame has is kept for the predictions'
        reference columns). No training data is read: the per-element references the model
        adds are buffers of the checkpoint (``--ckpt_path``)."""
        hp = self.hparams
        test = read_many(
            hp.test_files, hp.energy_key, hp.forces_key, hp.min_distance, require_labels=False
        )
        if hp.random_orientation and hp.train_files:  # as _load rotates the test files
            test = randomly_orient(test, hp.seed + 2)
        self.test_structures = test
        self.predict_only = True

    def setup(self, stage: str | None = None) -> None:
        if self.train_structures is not None or self.predict_only:
            return
        if stage == "predict" and self.hparams.test_files:
            self._load_predict()
            # graphs without labels: a batch must not mix graphs with and without them
            self.test_set = AtomsGraphDataset(
                [_without_labels(atoms) for atoms in self.test_structures], self.hparams.cutoff
            )
            return
        self._load()
        cutoff = self.hparams.cutoff
        self.train_set = AtomsGraphDataset(self.train_structures, cutoff)
        self.val_set = AtomsGraphDataset(self.val_structures, cutoff)
        self.test_set = AtomsGraphDataset(self.test_structures or self.val_structures, cutoff)

    def atomic_energies(self) -> torch.Tensor:
        """Per-element references fitted on the training split (call after ``setup``)."""
        if self.train_structures is None:
            self.setup()
        return fit_atomic_energies(self.train_structures)

    def training_elements(self) -> list[int]:
        """Atomic numbers of the training split (call after ``setup``)."""
        if self.train_structures is None:
            self.setup()
        return elements_of(self.train_structures)

    def train_dataloader(self) -> DataLoader:
        gen = torch.Generator().manual_seed(self.hparams.seed)
        return DataLoader(
            self.train_set, batch_size=self.hparams.batch_size, shuffle=True, generator=gen
        )

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_set, batch_size=self.hparams.batch_size)

    def test_dataloader(self) -> DataLoader:
        return DataLoader(self.test_set, batch_size=self.hparams.batch_size)

    def predict_dataloader(self) -> DataLoader:
        # batch_size by keyword in every loader: Lightning re-creates the predict loader (to set
        # its sampler) and a positional batch_size made `predict` fail with a TypeError
        return self.test_dataloader()
