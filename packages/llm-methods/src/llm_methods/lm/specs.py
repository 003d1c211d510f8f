"""Spec prefixes that plug-ins resolve to a model folder (``"zoo:NAME"``), without torch.

The core does not import the zoo: :data:`SPEC_PLUGINS` names the module that registers the
resolver of a prefix on import (:func:`register_spec_prefix`), and :func:`spec_resolver` imports
it the first time a spec with that prefix is loaded. Stdlib only, so a plug-in registers itself
without importing torch (``import llm_methods.zoo`` stays cheap).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

__all__ = ["SPEC_PLUGINS", "register_spec_prefix", "spec_resolver"]

#: spec prefix -> module that registers its resolver (``prefix`` stripped -> model folder)
SPEC_PLUGINS = {"zoo:": "llm_methods.zoo"}
_RESOLVERS: dict[str, Callable[[str], Path]] = {}


def register_spec_prefix(prefix: str, resolver: Callable[[str], Path]) -> None:
    """Resolve specs ``prefix + NAME`` with ``resolver(NAME) -> model folder`` (the zoo registers
    ``"zoo:"`` this way)."""
    _RESOLVERS[prefix] = resolver


def spec_resolver(text: str) -> tuple[str, Callable[[str], Path]] | None:
    """``(prefix, resolver)`` of the registered or plug-in prefix ``text`` starts with, or None."""
    for prefix in SPEC_PLUGINS.keys() | _RESOLVERS.keys():
        if text.startswith(prefix):
            if prefix not in _RESOLVERS:
                importlib.import_module(SPEC_PLUGINS[prefix])  # registers the resolver
            return prefix, _RESOLVERS[prefix]
    return None
