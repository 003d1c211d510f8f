"""Public names moved in 0.7.0 still import from their old module, with a deprecation warning
naming the new place and llm-methods 0.8.0 (on 7db60f3 they were an ImportError)."""

import pytest


@pytest.mark.parametrize("name", ["RLRunner", "collate_rollouts"])
def test_remix_model_keeps_the_training_loop_names_for_one_minor_version(name: str) -> None:
    import llm_methods.remix.model as old
    import llm_methods.remix.runner as new

    with pytest.warns(DeprecationWarning, match=rf"moved to llm_methods\.remix\.runner\.{name}"):
        value = getattr(old, name)
    assert value is getattr(new, name)
