"""The ``pointcloud-pgllm`` command (being built: see the package README)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pointcloud_pgllm import __version__


def main(args: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pointcloud-pgllm")
    parser.add_argument("--version", action="version", version=f"pointcloud-pgllm {__version__}")
    parser.parse_args(list(sys.argv[1:] if args is None else args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
