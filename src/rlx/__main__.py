"""``python -m rlx``: the ``rlx`` command line."""

import sys

from rlx.cli import main

sys.exit(main())
