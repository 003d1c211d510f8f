"""The ``llm-methods`` command (being built: see the package README)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from llm_methods import __version__


def main(args: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="llm-methods")
    parser.add_argument("--version", action="version", version=f"llm-methods {__version__}")
    parser.parse_args(list(sys.argv[1:] if args is None else args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
