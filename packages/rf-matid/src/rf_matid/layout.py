"""RF-MatID on-disk layout: position folder names, domain roots, the format error and data records.

A *domain root* holds one folder per measurement position,
``ms46131a-4To43.5GHz-2048-{class}-{dist}mm-{deg}deg``, and every ``*.csv`` directly inside a
position folder is one sample (upstream ``dataset/dataset.py``). A *combined root* holds a
frequency and a time-domain root side by side: upstream's ``RFMatID_Dataset/frequency_domain``
and ``RFMatID_Dataset/time_domain`` (its README's recommended layout), also reached from the
folder above ``RFMatID_Dataset``; ``freq_domain/`` (this package's earlier name) is read too.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from rf_matid.constants import (
    FOLDER_PREFIX,
)

logger = logging.getLogger("rf_matid")

# Upstream README: RF-MatID/RFMatID_Dataset/{frequency_domain,time_domain}.
FREQ_DOMAIN_DIR = "frequency_domain"
TIME_DOMAIN_DIR = "time_domain"
UPSTREAM_DATASET_DIR = "RFMatID_Dataset"
# Frequency-domain folder names of a combined root, in order of preference; "freq_domain" is what
# versions <= 0.3 of this package wrote.
FREQ_DOMAIN_DIRS: tuple[str, ...] = (FREQ_DOMAIN_DIR, "freq_domain")

_DISTANCE_RE = re.compile(r"^(\d+)mm$")
_ANGLE_RE = re.compile(r"^(\d+)deg$")
_CLASS_RE = re.compile(r"^[A-Za-z0-9_.]+$")

Domain = Literal["frequency", "time"]


class RFMatIDFormatError(ValueError):
    """Malformed RF-MatID input; names the offending file and, where known, line and field."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        message: str,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.path = str(path)
        self.line = line
        self.field = field
        self.message = message
        location = self.path
        if line is not None:
            location += f", line {line}"
        if field is not None:
            location += f", field {field!r}"
        super().__init__(f"{location}: {message}")


@dataclass(frozen=True)
class Position:
    """One measurement position: fine class name, distance (mm) and angle (deg)."""

    class_name: str
    distance_mm: int
    angle_deg: int


@dataclass
class RFMatIDData:
    """A loaded domain: ``x`` is complex64 [N, 2048] (frequency) or float32 [N, 3414] (time).

    ``axis`` is freq_hz [2048] or time_ps [3414]; ``files`` are the source CSVs relative to the
    root passed to ``load_dataset``; ``skipped`` holds ``(file, reason)`` for every sample dropped
    with ``skip_bad=True``.
    """

    x: np.ndarray
    axis: np.ndarray
    class_names: tuple[str, ...]
    distance_mm: np.ndarray
    angle_deg: np.ndarray
    files: tuple[str, ...]
    skipped: tuple[tuple[str, str], ...]
    domain: str = "frequency"

    def __len__(self) -> int:
        return len(self.files)


# --------------------------------------------------------------------------- folder names


def position_folder_name(class_name: str, distance_mm: int, angle_deg: int) -> str:
    """Upstream folder name ``ms46131a-4To43.5GHz-2048-{class}-{dist}mm-{deg}deg``."""
    if not isinstance(class_name, str) or not _CLASS_RE.match(class_name):
        raise ValueError(
            f"class name {class_name!r} must be non-empty and use only letters, digits, '_' or '.'"
            " (upstream parses folder names by splitting on '-')"
        )
    for name, value in (("distance_mm", distance_mm), ("angle_deg", angle_deg)):
        if isinstance(value, bool) or int(value) != value or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return f"{FOLDER_PREFIX}-{class_name}-{int(distance_mm)}mm-{int(angle_deg)}deg"


def parse_position_folder(path_or_name: str | os.PathLike[str]) -> Position:
    """Parse ``ms46131a-4To43.5GHz-2048-{class}-{dist}mm-{deg}deg`` into a Position.

    Stricter than upstream ``_get_data_info``, which takes the 3rd, 2nd and last ``-`` parts from
    the right: the instrument prefix must match and exactly three parts must follow it, so a class
    name containing ``-`` (``brick-01`` would become class ``01``) is an error, not a new class.
    """
    name = Path(path_or_name).name
    prefix = f"{FOLDER_PREFIX}-"
    if not name.startswith(prefix):
        raise RFMatIDFormatError(
            path_or_name,
            f"folder name {name!r} does not start with the instrument prefix {prefix!r} "
            "(expected '<prefix><class>-<dist>mm-<deg>deg')",
            field="prefix",
        )
    parts = name[len(prefix) :].split("-")
    if len(parts) < 3:
        raise RFMatIDFormatError(
            path_or_name,
            f"folder name {name!r} is not '{prefix}<class>-<dist>mm-<deg>deg'",
            field="folder name",
        )
    angle = _ANGLE_RE.match(parts[-1])
    if angle is None:
        raise RFMatIDFormatError(
            path_or_name,
            f"expected '<int>deg' as the last '-' part of {name!r}, got {parts[-1]!r}",
            field="angle_deg",
        )
    distance = _DISTANCE_RE.match(parts[-2])
    if distance is None:
        raise RFMatIDFormatError(
            path_or_name,
            f"expected '<int>mm' as the second-to-last '-' part of {name!r}, got {parts[-2]!r}",
            field="distance_mm",
        )
    class_name = "-".join(parts[:-2])
    if len(parts) > 3:
        raise RFMatIDFormatError(
            path_or_name,
            f"class name {class_name!r} in {name!r} contains '-'; upstream would read it as "
            f"class {parts[-3]!r}",
            field="class_name",
        )
    if not _CLASS_RE.match(class_name):
        raise RFMatIDFormatError(
            path_or_name, f"invalid class name {class_name!r} in {name!r}", field="class_name"
        )
    return Position(class_name, int(distance.group(1)), int(angle.group(1)))


def sample_file_name(index: int) -> str:
    """File name of sample ``index`` inside a position folder (upstream reads any ``*.csv``)."""
    if isinstance(index, bool) or int(index) != index or index < 0:
        raise ValueError(f"sample index must be a non-negative integer, got {index!r}")
    return f"{int(index):04d}.csv"


def combined_roots(root: str | os.PathLike[str]) -> tuple[Path | None, Path | None] | None:
    """``(frequency root, time root)`` of a combined root, or None for a plain domain root.

    A combined root holds ``frequency_domain/`` (or ``freq_domain/``) and/or ``time_domain/``;
    the folder above upstream's ``RFMatID_Dataset/`` counts as one too. Either entry is None when
    that domain's folder is absent. Both ``frequency_domain/`` and ``freq_domain/`` in one root is
    ambiguous and raises ``RFMatIDFormatError``.
    """
    base = Path(root)
    for candidate in (base, base / UPSTREAM_DATASET_DIR):
        freq = [candidate / name for name in FREQ_DOMAIN_DIRS if (candidate / name).is_dir()]
        if len(freq) > 1:
            raise RFMatIDFormatError(
                candidate,
                f"holds both {freq[0].name}/ and {freq[1].name}/; keep one frequency-domain folder",
            )
        time = candidate / TIME_DOMAIN_DIR
        if freq or time.is_dir():
            return (freq[0] if freq else None), (time if time.is_dir() else None)
    return None


def domain_root(root: str | os.PathLike[str], domain: Domain = "frequency") -> Path:
    """Directory holding the position folders of ``domain``.

    In a combined root (:func:`combined_roots`) that domain's folder (``root/frequency_domain``,
    ``root/RFMatID_Dataset/time_domain``, ...), else ``root`` itself (a plain upstream
    ``data_dir``). A combined root without the domain's folder raises ``RFMatIDFormatError``.
    """
    if domain not in ("frequency", "time"):
        raise ValueError(f"domain must be 'frequency' or 'time', got {domain!r}")
    base = Path(root)
    roots = combined_roots(base)
    if roots is None:
        return base
    found = roots[0] if domain == "frequency" else roots[1]
    if found is None:
        wanted = "/ or ".join(FREQ_DOMAIN_DIRS) if domain == "frequency" else TIME_DOMAIN_DIR
        raise RFMatIDFormatError(base, f"combined root has no {domain}-domain folder ({wanted}/)")
    return found


def scan_position_folders(
    root: str | os.PathLike[str], domain: Domain = "frequency", skip_bad: bool = False
) -> tuple[list[tuple[Path, Position]], list[tuple[str, str]]]:
    """Sorted ``(folder, Position)`` of every position folder of ``domain`` (no CSV reads).

    Hidden entries and plain files are ignored. A malformed folder name raises
    ``RFMatIDFormatError``, or with ``skip_bad`` is logged (warning) and returned in the second
    list as ``(folder path, reason)``.
    """
    base = domain_root(root, domain)
    if not base.is_dir():
        raise RFMatIDFormatError(base, "dataset root is not a directory")
    folders = sorted(
        (entry for entry in base.iterdir() if entry.is_dir() and not entry.name.startswith(".")),
        key=lambda entry: entry.name,
    )
    parsed: list[tuple[Path, Position]] = []
    skipped: list[tuple[str, str]] = []
    for folder in folders:
        try:
            parsed.append((folder, parse_position_folder(folder)))
        except RFMatIDFormatError as error:
            if not skip_bad:
                raise
            logger.warning("skipping position folder %s: %s", folder, error)
            skipped.append((str(folder), str(error)))
    return parsed, skipped


def position_folders(
    root: str | os.PathLike[str], domain: Domain = "frequency", skip_bad: bool = False
) -> list[tuple[Path, Position]]:
    """Sorted ``(folder, Position)`` of every position folder of ``domain`` (cheap: no CSV reads).

    Hidden entries and plain files are ignored; a malformed folder name raises
    ``RFMatIDFormatError`` unless ``skip_bad`` (then it is logged; ``scan_position_folders`` also
    returns the skipped folders).
    """
    return scan_position_folders(root, domain, skip_bad)[0]


def sample_csvs(folder: str | os.PathLike[str]) -> list[Path]:
    """Sorted sample CSVs of one position folder (``*.csv``, non-recursive, as upstream glob)."""
    return sorted(
        (path for path in Path(folder).iterdir() if path.name.endswith(".csv") and path.is_file()),
        key=lambda path: path.name,
    )


# A position folder of a frequency domain root holds only frequency CSVs.
frequency_csvs = sample_csvs
