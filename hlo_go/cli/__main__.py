"""``python -m hlo_go.cli``: the ``hlo-go`` command."""

import sys

from hlo_go.cli import main

if __name__ == "__main__":
    sys.exit(main())
