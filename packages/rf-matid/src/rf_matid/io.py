"""Readers and writers for the RF-MatID on-disk format, and a cached dataset loader.

On-disk layout (upstream ``dataset/dataset.py`` and ``dataset/TD_dataset.py``): a *domain root*
holds one folder per measurement position, ``ms46131a-4To43.5GHz-2048-{class}-{dist}mm-{deg}deg``,
and every ``*.csv`` directly inside a position folder is one sample. Upstream tells frequency and
time samples apart only by the root they live in: the frequency and the time-domain loaders are
pointed at different ``data_dir`` roots with the same folder layout. ``write_sample`` therefore
writes a *combined root* with two upstream-compatible domain roots side by side::

    root/freq_domain/<position folder>/<index>.csv   # header + 2048 rows: freq_hz, real, imag
    root/time_domain/<position folder>/<index>.csv   # header + 10240 rows: time_ps, amplitude

``load_dataset`` reads either a combined root or a plain upstream domain root (position folders
directly below ``root``).

This module is the public face of the readers; the code lives in :mod:`rf_matid.layout` (folder
names, the format error), :mod:`rf_matid.csvio` (CSV parsing and writing), :mod:`rf_matid.loader`
(``load_dataset``) and :mod:`rf_matid.cache` (the parsed-array cache).
"""

from __future__ import annotations

from rf_matid.cache import CACHE_SUBDIR, default_cache_dir
from rf_matid.constants import FOLDER_PREFIX, FREQ_POINTS, TIME_DECIMATION, TIME_LENGTH, TIME_POINTS
from rf_matid.csvio import (
    FREQ_HEADER,
    TIME_HEADER,
    check_frequency_range,
    read_frequency_csv,
    read_time_csv,
    write_frequency_csv,
    write_sample,
    write_time_csv,
)
from rf_matid.layout import (
    FREQ_DOMAIN_DIR,
    TIME_DOMAIN_DIR,
    Domain,
    Position,
    RFMatIDData,
    RFMatIDFormatError,
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
    "FREQ_HEADER",
    "FREQ_POINTS",
    "TIME_DECIMATION",
    "TIME_DOMAIN_DIR",
    "TIME_HEADER",
    "TIME_LENGTH",
    "TIME_POINTS",
    "Domain",
    "Position",
    "RFMatIDData",
    "RFMatIDFormatError",
    "check_frequency_range",
    "default_cache_dir",
    "domain_root",
    "frequency_csvs",
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
