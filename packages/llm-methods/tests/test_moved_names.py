"""Public names moved in 0.7.0 kept their old module, with a deprecation warning, for one minor
version; llm-methods 0.8.0 removes the old place (on 7db60f3 they were an ImportError without a
warning first)."""

import pytest


@pytest.mark.parametrize("name", ["RLRunner", "collate_rollouts"])
def test_the_training_loop_names_are_only_in_remix_runner(name: str) -> None:
    """``llm_methods.remix.model.RLRunner`` / ``collate_rollouts`` (moved to
    ``llm_methods.remix.runner`` in 0.7.0) are gone from ``remix.model``: an ``ImportError``,
    not a warning; the new module gives them."""
    import importlib

    import llm_methods.remix.runner as new

    old = importlib.import_module("llm_methods.remix.model")
    with pytest.raises(ImportError, match=name):
        exec(f"from llm_methods.remix.model import {name}", {})
    assert not hasattr(old, name)
    assert callable(getattr(new, name))
