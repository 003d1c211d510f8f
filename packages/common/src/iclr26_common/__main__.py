"""``python -m iclr26_common`` is the ``iclr26`` command."""

import sys

from iclr26_common.cli import main

if __name__ == "__main__":
    sys.exit(main())
