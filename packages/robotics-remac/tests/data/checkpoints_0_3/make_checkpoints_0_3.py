"""Writes Lightning checkpoints with robotics-remac 0.3.0 (flat hyperparameters) and their
policies' outputs, for ``tests/test_settings.py`` (0.3.x checkpoints still load). It only runs
against the 0.3.0 sources (the commit in ``checkpoints.json``), e.g. from the workspace root::

    git archive COMMIT packages/robotics-remac | tar -x -C /tmp/remac-0.3
    PYTHONPATH=/tmp/remac-0.3/packages/robotics-remac/src .venv/bin/python \
        packages/robotics-remac/tests/data/checkpoints_0_3/make_checkpoints_0_3.py OUT_DIR
"""

import json
import subprocess
import sys
from pathlib import Path

import lightning as L
import numpy as np
import torch

from robotics_remac.checkpoint import load_policy
from robotics_remac.data import DemoDataModule
from robotics_remac.lit_module import FlowPolicyModule, RemacModule

out = Path(sys.argv[1])
torch.set_num_threads(1)
L.seed_everything(0)
TINY = {"channels": 16, "hidden": 32, "token_hidden": 8, "depth": 1}
dm = DemoDataModule(n_episodes=2, batch_size=64, val_fraction=0.5)


def fit(module, name):
    tr = L.Trainer(
        max_steps=2,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        limit_val_batches=0,
        default_root_dir="/tmp/s-remac-oldckpt",
    )
    tr.fit(module, dm)
    tr.save_checkpoint(out / f"{name}.ckpt", weights_only=True)


fit(FlowPolicyModule(**TINY), "base_0.3.0")
fit(FlowPolicyModule(**TINY, training_time_rtc=True, max_delay=3), "ttrtc_0.3.0")
fit(RemacModule(**TINY, rank=2, alpha=4.0), "remac_0.3.0")
fit(
    RemacModule(
        **TINY, use_mask=False, curriculum=False, use_delta=False, use_keep=False, max_delay=0
    ),
    "lora_only_0.3.0",
)
g = torch.Generator().manual_seed(5)
obs, x, t = (
    torch.randn(3, 8, generator=g),
    torch.randn(3, 8, 2, generator=g),
    torch.rand(3, generator=g),
)
arrays = {"obs": obs.numpy(), "x": x.numpy(), "t": t.numpy()}
kinds = {}
for name in ("base_0.3.0", "ttrtc_0.3.0", "remac_0.3.0", "lora_only_0.3.0"):
    lp = load_policy(out / f"{name}.ckpt")
    kinds[name] = lp.kind
    with torch.no_grad():
        arrays[name] = lp.policy(obs, x, t).numpy()
np.savez(out / "outputs.npz", **arrays)
commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
(out / "checkpoints.json").write_text(
    json.dumps(
        {
            "made_by": "robotics-remac 0.3.0 (flat LightningModule arguments), Trainer(max_steps=2).fit on 2 generated episodes, save_checkpoint(weights_only=True)",
            "commit": commit,
            "kinds": kinds,
            "torch": torch.__version__,
            "lightning": L.__version__,
            "outputs": "outputs.npz: load_policy(ckpt).policy(obs, x, t) for the stored obs, x, t",
        },
        indent=1,
    )
    + "\n"
)
