"""What a user's own data needs (issues 37 and 38), through ``main([...])`` in-process:
``predict`` says which episode and frame each chunk belongs to and which split it sampled (the
user picks it), the commands' help prints ``95 %`` as written, and ``latency`` / ``rollout``
import alone without a cycle. Each docstring says what d9942d3 did."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import robotics_remac
from iclr26_common.testing import assert_one_line_error, run_main
from robotics_remac.cli import main

PACKAGE = Path(robotics_remac.__file__).parent


def _predict(demo_dir: Path, root: Path, *extra: str) -> list[str]:
    return [
        "predict",
        "--config",
        "tiny",
        f"--data.init_args.data_dir={demo_dir}",
        f"--trainer.default_root_dir={root}",
        *extra,
    ]


def test_predict_writes_episode_and_frame_ids_and_the_split_the_user_chose(
    demo_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """On d9942d3 `predict` wrote `{"chunks": [N, H, A]}` alone (no episode or frame ids, no
    split) and always sampled the held-out episodes (`--split` was unknown, exit 2)."""
    import torch

    from robotics_remac.data import DemoDataModule
    from robotics_remac.dataset_reader import read_lerobot_dataset

    episodes = {ep.index: ep for ep in read_lerobot_dataset(demo_dir)}
    assert sorted(episodes) == list(range(6))  # the dataset's episode_index, read
    split = DemoDataModule(data_dir=str(demo_dir), horizon=8, val_fraction=0.34)  # tiny.yaml's
    split.setup("fit")
    seen: dict[str, set[int]] = {}
    for name, extra in (("val", ()), ("train", ("--split", "train")), ("all", ("--split", "all"))):
        root = tmp_path / name
        run = run_main(main, _predict(demo_dir, root, *extra), capsys)
        assert run.code == 0, run.err[-2000:]
        saved = torch.load(root / "predictions.pt", weights_only=True)
        assert set(saved) == {"chunks", "episode_index", "frame_index", "split"}
        assert saved["split"] == name and f"{name} split" in run.out
        n = len(saved["chunks"])
        assert saved["episode_index"].shape == saved["frame_index"].shape == (n,)
        expected = {"val": split.val_set, "train": split.train_set}.get(name)
        if expected is not None:  # the same observations, in the same order
            assert n == len(expected)
            for i in (0, n // 2, n - 1):
                ep, frame = int(saved["episode_index"][i]), int(saved["frame_index"][i])
                torch.testing.assert_close(
                    torch.from_numpy(episodes[ep].states[frame]), expected.obs[i]
                )
        seen[name] = set(saved["episode_index"].tolist())
        # every frame of each episode that has a full chunk ahead of it, in order
        for ep in seen[name]:
            frames = saved["frame_index"][saved["episode_index"] == ep].tolist()
            assert frames == list(range(len(episodes[ep].states) - 8 + 1))
    assert seen["val"] and seen["train"] and not seen["val"] & seen["train"]
    assert seen["all"] == seen["val"] | seen["train"] == set(episodes)
    line = assert_one_line_error(
        main, _predict(demo_dir, tmp_path / "x", "--split", "test"), capsys, prog="robotics-remac"
    )
    assert "--split" in line and "test" in line
    assert not (tmp_path / "x" / "predictions.pt").exists()


@pytest.mark.parametrize("command", ["eval", "collect"])
def test_help_prints_percent_signs_as_written(command: str, capsys: pytest.CaptureFixture) -> None:
    """The issue reported `eval --help` showing `95 %%`; on d9942d3 this already passes (the
    doubled sign left the description in b47f8b7): kept as the regression test, over every
    argparse command's help."""
    run = run_main(main, [command, "--help"], capsys)
    assert run.code == 0
    assert "%%" not in run.out
    text = " ".join(run.out.split())  # argparse wraps the description
    if command == "eval":
        assert "95 % Wilson CI" in text and "95 % bootstrap interval" in text


def _package_imports(path: Path) -> set[str]:
    """Every ``robotics_remac`` module ``path`` imports, at module level or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("robotics_remac")}


def test_latency_and_rollout_import_alone_without_a_cycle() -> None:
    """On d9942d3 `rollout` imported `latency` (MeasuredDelay) and `latency.loop_latency`
    imported `rollout` inside the function: a cycle held apart by a deferred import. Now
    `latency` imports nothing of the package (`loop_latency` lives in `rollout`), and each
    module imports alone in a fresh interpreter."""
    assert _package_imports(PACKAGE / "latency.py") == set()
    assert "robotics_remac.latency" in _package_imports(PACKAGE / "rollout.py")
    for module, absent in (
        ("robotics_remac.latency", ("robotics_remac.rollout", "torch")),
        ("robotics_remac.rollout", ()),
    ):
        code = (
            f"import sys, {module}\n"
            f"absent = [m for m in {absent!r} if m in sys.modules]\n"
            "assert not absent, absent\n"
        )
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert proc.returncode == 0, f"{module}: {proc.stderr[-2000:]}"
    from robotics_remac import latency, rollout

    assert callable(rollout.loop_latency)
    # the old place warned in 0.5.0 and is gone in 0.6.0, as the changelog promised
    assert not hasattr(latency, "loop_latency")


def test_eval_data_scores_policies_offline_on_the_users_episodes(
    demo_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Issue 38: `eval` ran only the built-in chase task. `--data DIR` scores each method's
    executed actions against the user's own episodes per delay. Planted: a policy whose chunk
    is the demonstration itself would score 0; here an untrained base scores > 0, and at d > 0
    REMAC's prefix-preserved sampler keeps the committed (demonstration) prefix, which the
    naive chunk does not, so the two differ."""
    import csv

    import torch

    from robotics_remac.checkpoint import save_policy
    from robotics_remac.model import FlowPolicy, add_lora

    torch.manual_seed(0)
    base = FlowPolicy(channels=8, hidden=8, token_hidden=4)
    save_policy(tmp_path / "b.pt", base, "base")
    save_policy(
        tmp_path / "r.pt", add_lora(FlowPolicy(channels=8, hidden=8, token_hidden=4)), "remac"
    )
    out = tmp_path / "offline"
    args = ["eval", "--policy", str(tmp_path / "b.pt"), "--remac", str(tmp_path / "r.pt")]
    args += ["--method", "naive,remac", "--delays", "0,2", "--data", str(demo_dir)]
    run = run_main(main, [*args, "--out", str(out), "--quiet"], capsys)
    assert run.code == 0, run.err[-2000:]
    rows = list(csv.DictReader((out / "offline_results.csv").open()))
    assert [(r["method"], r["delay"]) for r in rows] == [
        ("naive", "0"),
        ("remac", "0"),
        ("naive", "2"),
        ("remac", "2"),
    ]
    for row in rows:
        assert int(row["episodes"]) == 6
        assert float(row["error_low"]) <= float(row["action_error"]) <= float(row["error_high"])
        assert float(row["action_error"]) > 0
    # the planner (it needs the task's dynamics) is refused before any work (no folder left)
    bad = [*args[:-4], "--method", "planner", "--data", str(demo_dir), "--out", str(tmp_path / "x")]
    line = assert_one_line_error(main, bad, capsys)
    assert "--data cannot evaluate --method planner:" in line and not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    ("extra", "named", "not_named"),
    [
        # review of issue 38: this case's line also named --measured-delay and --resume
        (
            ["--method", "naive,sync"],
            "--method sync:",
            ["--measured-delay", "--resume", "--method naive"],
        ),
        (["--method", "naive", "--measured-delay", "4"], "--measured-delay", ["--resume"]),
        (["--method", "naive", "--resume"], "--resume", ["--measured-delay", "--method"]),
    ],
)
def test_eval_data_errors_name_only_what_was_given(
    demo_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    extra: list[str],
    named: str,
    not_named: list[str],
) -> None:
    from robotics_remac.checkpoint import save_policy
    from robotics_remac.model import FlowPolicy

    save_policy(tmp_path / "b.pt", FlowPolicy(channels=8, hidden=8, token_hidden=4), "base")
    out = tmp_path / "x"
    args = ["eval", "--policy", str(tmp_path / "b.pt"), *extra, "--data", str(demo_dir)]
    line = assert_one_line_error(main, [*args, "--out", str(out)], capsys)
    assert named in line and line.startswith("robotics-remac eval: error: --data")
    assert not any(word in line for word in not_named), line
    assert not out.exists()


def test_offline_action_error_is_zero_for_the_demonstration_itself(demo_dir: Path) -> None:
    """The metric by hand: a chunker returning the demonstration's own next actions scores 0;
    one off by a constant c on both action components scores c·√2 at every delay."""
    import numpy as np
    import torch

    from robotics_remac.dataset_reader import read_lerobot_dataset
    from robotics_remac.offline_eval import boundary_batch, offline_action_error

    episodes = read_lerobot_dataset(demo_dir)
    batch = boundary_batch(episodes, 8, 4)
    lookup = {tuple(o.tolist()): a for o, a in zip(batch[0], batch[1], strict=True)}

    def oracle(obs, prefix, d, e, gen, shift=0.0):  # type: ignore[no-untyped-def]
        return torch.stack([torch.from_numpy(lookup[tuple(o.tolist())]) for o in obs]) + shift

    for d in (0, 2, 4):
        assert np.allclose(offline_action_error(oracle, batch, d, 4), 0.0)
        off = offline_action_error(lambda *a: oracle(*a, shift=0.1), batch, d, 4)
        assert np.allclose(off, 0.1 * np.sqrt(2), atol=1e-6)
