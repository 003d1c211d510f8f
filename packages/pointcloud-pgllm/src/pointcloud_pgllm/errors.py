"""The one error type for bad input (a file or a field that cannot be read as documented)."""

from __future__ import annotations

__all__ = ["PGLLMInputError"]


class PGLLMInputError(ValueError):
    """Bad input data: the message names the file (or option) and the field or line."""
