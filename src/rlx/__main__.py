"""``python -m rlx``: the ``rlx`` command line (runs ``rlx.cli`` as ``python -m rlx.cli`` does)."""

import runpy

runpy.run_module("rlx.cli", run_name="__main__", alter_sys=True)
