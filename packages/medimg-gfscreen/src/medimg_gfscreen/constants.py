"""Constants shared by the medimg_gfscreen modules (one definition each).

Values follow the official GF-Screen code (Luffy03/GF-Screen) unless a comment says otherwise.
"""

from __future__ import annotations

# Preprocessing: target voxel spacing (mm, RAS axes x, y, z) and CT intensity windows (HU).
SPACING_MM: tuple[float, float, float] = (1.0, 1.0, 3.0)
HU_WINDOWS: dict[str, tuple[float, float]] = {
    "abdomen": (-175.0, 250.0),
    "chest": (-900.0, 650.0),
}
# CT plausibility check (``transforms.CheckValuesd``): a CT in Hounsfield units holds air / lung
# at or below HU_AIR_MAX (fat, about -100 HU, does not reach it) and soft tissue at or above
# HU_TISSUE_MIN.
HU_AIR_MAX = -200.0
HU_TISSUE_MIN = 0.0
# The paper's Focus sub-volume (voxels at SPACING_MM) and the Focus defaults.
PAPER_ROI: tuple[int, int, int] = (96, 96, 64)
PAPER_FEATURE_SIZE = 48

# Glance gate: a tile goes to Focus when softmax(glance)[1] > GATE_THRESHOLD (upstream ``valid``).
GATE_THRESHOLD = 0.9
DEFAULT_OVERLAP = 0.75  # upstream crop_3d_tensor overlap_ratio

# RL loss (upstream GFScreen_RL.get_RL_loss and group_relative_advantages).
PPO_EPSILON = 0.1
KL_BETA = 0.01
RATIO_CLAMP: tuple[float, float] = (0.01, 5.0)
KL_RATIO_CLAMP: tuple[float, float] = (1e-4, 1e4)
ADVANTAGE_STD_FLOOR = 1e-2
ADVANTAGE_CLAMP = 5.0
LOG_EPS = 1e-6  # added inside log() and ratios, as upstream
GLANCE_LOSS_WEIGHT = 0.1

# Optimisation (upstream: AdamW, lr 3e-4, weight decay 1e-5 for both optimizers).
LEARNING_RATE = 3e-4
WEIGHT_DECAY = 1e-5

# Label of the lesion class after label mapping; background is 0.
LESION = 1
