"""The error types for bad input: :class:`PGLLMInputError` (a file or a field that cannot be
read as documented) and its subclass :class:`PGLLMUsageError` (options that do not fit together
or are out of range), which the CLI reports as its subcommand's usage error
(``pointcloud-pgllm classify: error: ... (see pointcloud-pgllm classify --help)``)."""

from __future__ import annotations

__all__ = ["PGLLMInputError", "PGLLMUsageError", "PGLLMWarning"]


class PGLLMInputError(ValueError):
    """Bad input data: the message names the file (or option) and the field or line."""


class PGLLMUsageError(PGLLMInputError):
    """Bad options: the message names the option by its command-line spelling (``--graph-k``)."""


class PGLLMWarning(UserWarning):
    """Settings that run but are likely to give a poor result (``--graph-k`` not below the
    smallest class's cloud count); the CLI prints it as one line ``pointcloud-pgllm: warning:
    ...`` on stderr."""
