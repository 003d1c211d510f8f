"""``iclr26_common.exports.lazy_exports``: names resolve on first use, unknown names fail."""

import sys
import types

import pytest

from iclr26_common.exports import distribution_version, lazy_exports


def _module(name: str, exports: dict[str, str]) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__getattr__, module.__dir__ = lazy_exports(name, exports)  # type: ignore[method-assign]
    sys.modules[name] = module
    return module


def test_a_name_is_imported_on_first_use_and_cached():
    module = _module("lazy_probe_pkg", {"dumps": "json", "sqrt": "math"})
    try:
        assert "dumps" not in vars(module)
        import json

        assert module.dumps is json.dumps
        assert vars(module)["dumps"] is json.dumps  # cached: the next look-up is a plain global
        assert {"dumps", "sqrt"} <= set(dir(module))
    finally:
        del sys.modules["lazy_probe_pkg"]


def test_an_unknown_name_raises_attribute_error_naming_the_module():
    module = _module("lazy_probe_pkg2", {"dumps": "json"})
    try:
        with pytest.raises(AttributeError, match=r"lazy_probe_pkg2.*nope"):
            module.nope  # noqa: B018
        assert not hasattr(module, "loads")
    finally:
        del sys.modules["lazy_probe_pkg2"]


def test_distribution_version_of_an_installed_and_a_missing_distribution():
    from importlib.metadata import version

    assert distribution_version("iclr26-common") == version("iclr26-common")
    assert distribution_version("no-such-distribution-xyz") == "0+unknown"
    assert distribution_version("no-such-distribution-xyz", fallback="0.0.0") == "0.0.0"


def test_a_moved_name_still_imports_with_a_deprecation_warning():
    """``moved_names``: the old place keeps working for one minor version and says where the
    name went and when the old place goes; an unknown name is still an AttributeError."""
    from iclr26_common.exports import moved_names

    module = types.ModuleType("moved_probe_pkg")
    module.__getattr__ = moved_names(  # type: ignore[method-assign]
        "moved_probe_pkg", {"dumps": "json"}, removed_in="probe 0.9.0"
    )
    sys.modules["moved_probe_pkg"] = module
    try:
        import json

        with pytest.warns(DeprecationWarning, match=r"moved to json\.dumps.*removed in probe 0\.9"):
            from moved_probe_pkg import dumps  # type: ignore[import-not-found]
        assert dumps is json.dumps
        with pytest.raises(AttributeError):
            module.loads  # noqa: B018
    finally:
        del sys.modules["moved_probe_pkg"]
