"""Constants of the RF-MatID measurement: the MS46131A sweep, the positions and the file format.

The lowest-level module of the package (it imports only numpy), so that ``io``, ``protocols``,
``splits``, ``materials`` and ``synth`` share one definition of each without import cycles.
"""

from __future__ import annotations

import numpy as np

# Physical constants (SI).
SPEED_OF_LIGHT = 299_792_458.0  # m/s
FREE_SPACE_IMPEDANCE = 376.730313412  # ohm, eta0 = sqrt(mu0 / eps0)

# Upstream position folders are ``{FOLDER_PREFIX}-{class}-{dist}mm-{deg}deg``.
FOLDER_PREFIX = "ms46131a-4To43.5GHz-2048"

# Anritsu MS46131A sweep: 4-43.5 GHz on 2048 linearly spaced points.
BAND_GHZ: tuple[float, float] = (4.0, 43.5)
FREQ_POINTS = 2048
FREQ_GRID_HZ: np.ndarray = np.linspace(4e9, 43.5e9, FREQ_POINTS)
FREQ_GRID_HZ.setflags(write=False)

# Frequencies the readers accept (Hz): the instrument band with a wide margin. It catches an axis
# written in GHz or MHz (values 4-43.5 or 4000-43500) and absurd values (a Touchstone file without
# an option line is read as GHz: 4e9 "GHz" = 4e18 Hz), while leaving room for other VNA sweeps.
PLAUSIBLE_FREQ_HZ: tuple[float, float] = (1e9, 100e9)

# Time-domain CSVs: 10240 samples; upstream ``TD_dataset`` keeps every 3rd one (3414).
TIME_POINTS = 10240
TIME_DECIMATION = 3
TIME_LENGTH = len(range(0, TIME_POINTS, TIME_DECIMATION))

# Measurement positions of the dataset: 37 stand-off distances x 11 incidence angles.
DISTANCES_MM: tuple[int, ...] = tuple(range(200, 2001, 50))
ANGLES_DEG: tuple[int, ...] = tuple(range(11))
