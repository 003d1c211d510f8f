"""Readers and writers for the RF-MatID on-disk format, and a cached dataset loader.

On-disk layout (upstream ``dataset/dataset.py`` and ``dataset/TD_dataset.py``): a *domain root*
holds one folder per measurement position, ``ms46131a-4To43.5GHz-2048-{class}-{dist}mm-{deg}deg``,
and every ``*.csv`` directly inside a position folder is one sample. Upstream tells frequency and
time samples apart only by the root they live in: the frequency and the time-domain loaders are
pointed at different ``data_dir`` roots with the same folder layout. ``write_sample`` therefore
writes a *combined root* with two upstream-compatible domain roots side by side::

    root/frequency_domain/<position folder>/<index>.csv  # header + 2048 rows: freq, real, imag
    root/time_domain/<position folder>/<index>.csv       # header + 10240 rows: time_ps, amplitude

as upstream's README lays out ``RFMatID_Dataset/``. ``load_dataset`` reads such a combined root
(also ``RFMatID_Dataset``'s parent folder, and the ``freq_domain/`` name of earlier versions) or
a plain upstream domain root (position folders directly below ``root``). The frequency unit of a
CSV is decided from its values (the released files say ``freq.GHZ`` over Hz values).

This module is the public face of the readers; the code lives in :mod:`rf_matid.layout` (folder
names, the format error), :mod:`rf_matid.csvio` (CSV parsing), :mod:`rf_matid.csvwrite` (writing), :mod:`rf_matid.loader`
(``load_dataset``) and :mod:`rf_matid.cache` (the parsed-array cache).
"""

from __future__ import annotations

from rf_matid.cache import CACHE_SUBDIR, default_cache_dir
from rf_matid.constants import FOLDER_PREFIX, FREQ_POINTS, TIME_DECIMATION, TIME_LENGTH, TIME_POINTS
from rf_matid.csvio import (
    FREQ_HEADER,
    FREQ_UNITS,
    TIME_HEADER,
    UPSTREAM_FREQ_HEADER,
    check_frequency_range,
    frequency_unit,
    read_frequency_csv,
    read_time_csv,
)
from rf_matid.csvwrite import write_frequency_csv, write_sample, write_time_csv
from rf_matid.layout import (
    FREQ_DOMAIN_DIR,
    FREQ_DOMAIN_DIRS,
    TIME_DOMAIN_DIR,
    UPSTREAM_DATASET_DIR,
    Domain,
    Position,
    RFMatIDData,
    RFMatIDFormatError,
    combined_roots,
    domain_root,
    frequency_csvs,
    parse_position_folder,
    position_folder_name,
    position_folders,
    sample_csvs,
    sample_file_name,
    scan_position_folders,
)
from rf_matid.loader import load_dataset

__all__ = [
    "CACHE_SUBDIR",
    "FOLDER_PREFIX",
    "FREQ_DOMAIN_DIR",
    "FREQ_DOMAIN_DIRS",
    "FREQ_HEADER",
    "FREQ_POINTS",
    "FREQ_UNITS",
    "TIME_DECIMATION",
    "TIME_DOMAIN_DIR",
    "TIME_HEADER",
    "TIME_LENGTH",
    "TIME_POINTS",
    "UPSTREAM_DATASET_DIR",
    "UPSTREAM_FREQ_HEADER",
    "Domain",
    "Position",
    "RFMatIDData",
    "RFMatIDFormatError",
    "check_frequency_range",
    "combined_roots",
    "default_cache_dir",
    "domain_root",
    "frequency_csvs",
    "frequency_unit",
    "load_dataset",
    "parse_position_folder",
    "position_folder_name",
    "position_folders",
    "read_frequency_csv",
    "read_time_csv",
    "sample_csvs",
    "sample_file_name",
    "scan_position_folders",
    "write_frequency_csv",
    "write_sample",
    "write_time_csv",
]
