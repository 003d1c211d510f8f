"""The one exception type the core raises for bad input (unknown layer, empty text, bad spec)."""

from __future__ import annotations

__all__ = ["LMError"]


class LMError(ValueError):
    """Bad input to the LM core: the message names the offending argument, file or field.

    A ``ValueError`` subclass, so the CLI turns it into one ``llm-methods: error: ...`` line.
    """
