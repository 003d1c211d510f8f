"""Reading a user's input file, with one-line errors (stdlib only).

Every reader of every package opens its input the same way:

- :func:`input_file`: the path must be an existing regular file. A missing path raises
  ``FileNotFoundError("PATH: no such WHAT")``; a folder where a file is expected raises
  ``IsADirectoryError("PATH: is a folder; give a WHAT")`` (never "does not exist").
- :func:`read_text`: the file's UTF-8 text (a ``.gz`` file decompressed). Bytes that are not UTF-8
  raise the caller's error class with one line naming the file, the offending byte and its
  offset: ``PATH: not UTF-8 text (byte 0xe9 at offset 17); save it as UTF-8``.
- :func:`decode_utf8`: the same decoding for bytes already read (an archive member).

All three errors are one line, exit status 2, through
:func:`~iclr26_common.cli_support.run_with_one_line_errors` (``FileNotFoundError`` and
``IsADirectoryError`` are :data:`~iclr26_common.cli_support.PATH_ERRORS`; pass the package's own
format error as ``error``).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["decode_utf8", "input_file", "read_text"]


def input_file(
    path: str | os.PathLike[str], what: str = "file", *, error: type[Exception] | None = None
) -> Path:
    """``path`` as a :class:`~pathlib.Path`, checked to be an existing regular file.

    Raises:
        FileNotFoundError: ``"{path}: no such {what}"``.
        IsADirectoryError: ``"{path}: is a folder; give a {what}"``.
        error: the same messages, when a reader's API promises its own error class (e.g.
            llm-methods' ``LMError``) for a missing input.
    """
    path = Path(path)
    if path.is_dir():
        raise (error or IsADirectoryError)(f"{path}: is a folder; give a {what}")
    if not path.is_file():
        raise (error or FileNotFoundError)(f"{path}: no such {what}")
    return path


def decode_utf8(
    raw: bytes, where: str | os.PathLike[str], error: type[Exception] = ValueError
) -> str:
    """``raw`` decoded as UTF-8 (a leading byte-order mark dropped); otherwise ``error("{where}:
    not UTF-8 text (byte 0x.. at offset N); save it as UTF-8")``."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        byte = raw[err.start : err.start + 1].hex()
        raise error(
            f"{where}: not UTF-8 text (byte 0x{byte} at offset {err.start}); save it as UTF-8"
        ) from None
    return text[1:] if text.startswith("\ufeff") else text


def read_text(
    path: str | os.PathLike[str],
    what: str = "file",
    *,
    error: type[Exception] = ValueError,
    gzip_suffix: bool = True,
) -> str:
    """The UTF-8 text of the file ``path`` (checked by :func:`input_file`); with
    ``gzip_suffix`` a ``.gz`` file is decompressed first. Not UTF-8, or a ``.gz`` that is not
    gzip: ``error`` with one line naming the file."""
    import gzip
    import zlib

    path = input_file(path, what)
    raw = path.read_bytes()
    if gzip_suffix and path.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as err:
            raise error(f"{path}: not a readable gzip file ({err})") from None
    return decode_utf8(raw, path, error)
