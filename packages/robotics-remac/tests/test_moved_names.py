"""``loop_latency`` moved from ``latency`` to ``rollout`` in 0.5.0 (the import cycle between them
went); the old import warned for one minor version and is gone in 0.6.0, as the 0.5.0 changelog
promised (on 7db60f3 it was an ImportError without notice)."""

import subprocess
import sys

import pytest


def test_loop_latency_is_gone_from_latency_in_0_6_0() -> None:
    import robotics_remac
    import robotics_remac.latency as old
    import robotics_remac.rollout as new

    assert robotics_remac.__version__.split(".")[:2] != ["0", "5"]
    with pytest.raises(AttributeError):
        old.loop_latency  # noqa: B018
    assert callable(new.loop_latency)


def test_importing_latency_does_not_import_rollout() -> None:
    code = "import sys, robotics_remac.latency; print('robotics_remac.rollout' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
