"""``python -m rlx.cli``: the same as the ``rlx`` console script."""

import sys

from rlx.cli import main

sys.exit(main())
