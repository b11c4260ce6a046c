"""JAX backend tests: 8 simulated CPU devices for the sharding tests, and cheaper XLA compiles.

XLA reads ``XLA_FLAGS`` once, when jax is first imported, so the flags must be set before
any test module imports jax. ``tests/conftest.py`` sets the device count for the whole run
(it loads before every test module); this file repeats it for runs rooted in tests/backends
and, if jax is not imported yet, turns off LLVM's expensive optimisation passes: the tests
compile a few hundred tiny programs, where compile time dominates and code speed does not
matter (the numbers are the same: no fast-math either way). Sharding tests skip, with the
reason, when jax was imported earlier without the device count.
"""

import os
import sys

_FLAGS = {
    "xla_force_host_platform_device_count": "8",
    "xla_llvm_disable_expensive_passes": "true",
    "xla_backend_optimization_level": "0",
}
if "jax" not in sys.modules:
    flags = os.environ.get("XLA_FLAGS", "")
    extra = [f"--{k}={v}" for k, v in _FLAGS.items() if k not in flags]
    os.environ["XLA_FLAGS"] = " ".join([flags, *extra]).strip()
