"""``loop_latency`` moved from ``latency`` to ``rollout`` in 0.5.0 (the import cycle between them
went); the old import still works for one minor version, with a deprecation warning (on 7db60f3
it was an ImportError)."""

import subprocess
import sys

import pytest


def test_loop_latency_still_imports_from_latency_with_a_warning() -> None:
    import robotics_remac.latency as old
    import robotics_remac.rollout as new

    with pytest.warns(DeprecationWarning, match=r"removed in robotics-remac 0\.6\.0"):
        value = old.loop_latency
    assert value is new.loop_latency


def test_importing_latency_does_not_import_rollout() -> None:
    code = "import sys, robotics_remac.latency; print('robotics_remac.rollout' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
