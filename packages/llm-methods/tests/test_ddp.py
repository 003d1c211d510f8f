"""Every LightningCLI ``fit`` of llm-methods under two-process DDP on the CPU (gloo), through the
console script (DDP re-runs the command line for rank 1).

Each run adds :class:`ddp_probe.DDPProbe`, which reports per rank a checksum of the trainable
parameters after fit and a digest of the first batch: the replicas must end identical (the
gradients were averaged over the ranks) and must have trained on different batches (DDP is not
two copies of one run). Antibody's functional gradients bypassed DDP's hooks (the replicas
diverged) and Antibody's and ReMix's endless samplers gave both ranks the same batches; MBOK,
ReMix and Antibody wrote their outputs from every rank.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iclr26_common.testing import DDP_CPU_ARGS, run_console_script

PROBE = ("--trainer.callbacks+=ddp_probe.DDPProbe",)
CASES = {
    "dispersion": (["dispersion", "fit", "--config", "tiny", "--trainer.max_steps=3"], 3, None),
    "perk": (["perk", "fit", "--config", "tiny", "--trainer.max_steps=2"], 2, None),
    "perk-icr": (["perk", "fit", "--config", "icr_tiny", "--trainer.max_steps=2"], 2, None),
    "antibody": (
        [
            "antibody",
            "fit",
            "--config",
            "fit_tiny",
            "--trainer.max_steps=2",
            "--model.init_args.save_to=aligned",
        ],
        2,
        "aligned/config.json",
    ),
    "mbok": (
        ["mbok", "finetune", "--config", "tiny", "--model.init_args.save_to=m.safetensors"],
        4,
        "m.safetensors",
    ),
    "remix": (
        [
            "remix",
            "fit",
            "--config",
            "tiny",
            "--trainer.max_steps=2",
            "--model.init_args.save_dir=policy",
        ],
        2,
        "policy/config.json",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_fit_runs_under_two_process_ddp(case: str, tmp_path: Path) -> None:
    args, steps, artifact = CASES[case]
    env = {"PYTHONPATH": str(Path(__file__).parent)}
    proc = run_console_script("llm-methods", [*args, *DDP_CPU_ARGS, *PROBE], tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Starting with 2 processes" in proc.stderr
    ranks = json.loads((tmp_path / "ddp_probe.json").read_text())
    assert [r["rank"] for r in ranks] == [0, 1] and all(r["steps"] == steps for r in ranks)
    assert ranks[0]["checksum"] == ranks[1]["checksum"], ranks  # replicas in sync
    assert ranks[0]["first_batch"] != ranks[1]["first_batch"], ranks  # each rank its own data
    # the run's config, saved once, into the logger's version folder (the tiny configs keep
    # their logger: lightning_logs/version_0/config.yaml)
    assert [p.relative_to(tmp_path).parts[0] for p in tmp_path.rglob("config*.yaml")] == [
        "lightning_logs"
    ]
    if artifact is not None:
        assert (tmp_path / artifact).is_file()
    if case == "mbok":  # written (and reported) by rank 0 only
        assert proc.stdout.count("saved 14 compressed layers") == 1, proc.stdout[-2000:]
